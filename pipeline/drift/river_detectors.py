"""River's ADWIN and DDM behind the :class:`~streameval.pipeline.drift.base.DriftDetector` protocol.

* ``adwin`` -- :class:`river.drift.ADWIN` (adaptive windowing), on any loss in
  ``[0, 1]``; ``statistic`` is the mean loss of its current window.
* ``ddm`` -- :class:`river.drift.binary.DDM` (Drift Detection Method), on 0/1
  losses only; ``statistic`` is DDM's test value ``(p_i + s_i - p_min) / s_min``,
  the number of minimal standard deviations by which the error has risen, which
  alarms above ``drift_threshold`` (3 by default). It is 0 during DDM's warm
  start (river allows an alarm from the ``warm_start + 1``-th loss on), and
  ``inf`` when DDM's minimum was reached with no error at all (``s_min = 0``).
  The value is read from DDM's private state.

In river both detectors restart at the ``update`` after a detection, the same
lazy restart as the other detectors of :mod:`streameval.pipeline.drift`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from streameval.pipeline.drift.base import spec_name

RiverName = Literal["adwin", "ddm"]

_DEFAULTS: dict[str, dict[str, Any]] = {"adwin": {"delta": 0.002}, "ddm": {}}


class RiverDetector:
    """One of river's detectors, by name, with river's own parameters.

    >>> d = RiverDetector("ddm")
    >>> alarms = [i for i, e in enumerate([0] * 100 + [1] * 20, start=1) if d.update(e)]
    >>> alarms
    [101]
    >>> d.name, RiverDetector("adwin").name
    ('ddm', 'adwin[delta=0.002]')
    """

    def __init__(self, name: RiverName, **params: Any) -> None:
        if name not in _DEFAULTS:
            raise ValueError(f"unknown river detector {name!r} (known: {', '.join(_DEFAULTS)})")
        self.kind: RiverName = name
        self.params = {**_DEFAULTS[name], **params}
        from river import drift  # imported on use: river.drift pulls in scipy (seconds)

        self.detector: Any = (
            drift.ADWIN(**self.params) if name == "adwin" else drift.binary.DDM(**self.params)
        )

    @property
    def name(self) -> str:
        return spec_name(self.kind, self.params)

    @property
    def drift_detected(self) -> bool:
        return bool(self.detector.drift_detected)

    @property
    def statistic(self) -> float:
        if self.kind == "adwin":
            return float(self.detector.estimation)
        return _ddm_statistic(self.detector)

    def update(self, error: float) -> bool:
        """Feed one loss; ``True`` when river reports a drift."""
        if self.kind == "ddm":
            if error not in (0, 1):
                raise ValueError(f"ddm needs 0/1 losses, got {error}")
            self.detector.update(bool(error))
        else:
            self.detector.update(float(error))
        return self.drift_detected

    def reset(self) -> None:
        self.detector = self.detector.clone()

    def __repr__(self) -> str:
        return f"<RiverDetector {self.name}>"


def _ddm_statistic(ddm: Any) -> float:
    """``(p_i + s_i - p_min) / s_min`` from DDM's (private) state.

    0 before ``p_min`` exists; with ``s_min = 0`` (no error at the minimum) any
    rise is infinitely many deviations: ``inf``.
    """
    mean = getattr(ddm, "_p", None)
    p_min = getattr(ddm, "_p_min", None)
    s_min = getattr(ddm, "_s_min", None)
    if mean is None or p_min is None or s_min is None or not mean.n:
        return 0.0
    p = mean.get()
    rise = p + math.sqrt(p * (1.0 - p) / mean.n) - p_min
    if s_min == 0.0:
        return math.inf if rise > 0.0 else 0.0
    return rise / s_min
