"""The drift detector protocol shared by every detector of :mod:`streameval.pipeline.drift`.

A detector watches the loss stream of one learner -- the 0/1 loss of each
prediction for a classifier, any non-negative loss for a regressor:

* ``update(error)`` feeds the loss of one prediction and returns ``True`` when
  the detector raises an alarm on it;
* ``statistic`` is the current value of the test statistic (at an alarm: the
  value that raised it);
* ``reset()`` restarts the detector as if it had seen nothing;
* ``name`` is the detector's spec, which :func:`streameval.pipeline.drift.spec.build_detector`
  turns back into an equal detector.

**Restart after an alarm.** Every detector restarts itself after an alarm, as
the detectors of ``prequential-error-fading-factors.txt`` (sect. 5) and
``temporal-dependence-evaluation-journal.txt`` (sect. 6.9) are used: the
learner is rebuilt and the test starts again on the new concept. The restart
is *lazy*, as in river: it happens at the start of the next ``update``, so
that ``statistic`` still shows the alarm value between the alarm and the next
loss. Alarm positions are the same as with an immediate restart.
"""

from __future__ import annotations

import abc
from typing import Protocol, runtime_checkable


@runtime_checkable
class DriftDetector(Protocol):
    """What an experiment needs from a drift detector."""

    @property
    def name(self) -> str: ...

    @property
    def statistic(self) -> float: ...

    def update(self, error: float) -> bool: ...

    def reset(self) -> None: ...


class RestartingDetector(abc.ABC):
    """A detector that restarts itself at the ``update`` following an alarm.

    Subclasses implement :meth:`_step` (one loss in, alarm out) and
    :meth:`_restart` (forget everything).
    """

    def __init__(self) -> None:
        self.drift_detected = False

    def update(self, error: float) -> bool:
        """Feed the loss of one prediction; ``True`` on an alarm."""
        if self.drift_detected:
            self.reset()
        self.drift_detected = self._step(error)
        return self.drift_detected

    def reset(self) -> None:
        """Forget everything seen so far."""
        self.drift_detected = False
        self._restart()

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def statistic(self) -> float: ...

    @abc.abstractmethod
    def _step(self, error: float) -> bool: ...

    @abc.abstractmethod
    def _restart(self) -> None: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def spec_value(value: float | int | str) -> str:
    """A parameter value as written in a spec: short, but parsed back to the same value.

    >>> spec_value(0.9994), spec_value(100.0), spec_value(1e-05), spec_value(5000)
    ('0.9994', '100', '1e-05', '5000')
    >>> float(spec_value(0.1 + 0.2)) == 0.1 + 0.2
    True
    """
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def spec_name(kind: str, params: dict[str, float | int | str]) -> str:
    """``kind[k=v,...]`` (just ``kind`` without parameters).

    >>> spec_name("ratio_window", {"w1": 5000, "w2": 1000})
    'ratio_window[w1=5000,w2=1000]'
    """
    if not params:
        return kind
    return f"{kind}[{','.join(f'{k}={spec_value(v)}' for k, v in params.items())}]"


def check_threshold(delta: float, lambda_: float) -> None:
    """Page-Hinkley parameters: ``delta >= 0`` (allowed change), ``lambda_ > 0`` (threshold)."""
    if not delta >= 0.0:
        raise ValueError(f"delta (admissible change) must be >= 0, got {delta}")
    if not lambda_ > 0.0:
        raise ValueError(f"lambda (alarm threshold) must be > 0, got {lambda_}")
