"""Scoring drift alarms against known drift points: delay, misses, false alarms.

``prequential-error-fading-factors.txt``, sect. 5, assesses change detectors by
the probability of true detection, the probability of false alarms and the
delay in detection (the number of examples needed to detect a change after it
occurs). :func:`score_detections` counts the three for one run.

**Positions.** Alarms and drift points share one axis, the number of losses:

* an alarm ``a`` is the number of losses the detector had been fed when it
  alarmed (1-based: ``a = 1`` is an alarm on the first loss), as recorded by
  :func:`collect_alarms` and by the experiment;
* a drift point ``d`` is the number of instances of the old concept, that is
  the 0-based index of the first instance of the new one.

So ``a - d`` is the number of new-concept losses seen when the alarm rose.

**Matching.** Drift point ``d_k`` owns the alarms ``d_k < a <= d_{k+1}`` (the
last drift owns those up to ``n``). The first of them detects it with delay
``a - d_k >= 1``, provided ``a - d_k <= max_delay`` when ``max_delay`` is given.
Every other alarm is a false alarm: alarms before the first drift point
(``a <= d_1``), alarms after the first detection in the same segment, and
alarms of a segment that come later than ``max_delay``. A drift point without a
detecting alarm is a miss.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from streameval.pipeline.drift.base import DriftDetector


@dataclass(frozen=True)
class DetectionReport:
    """How a list of alarms matches the known drift points of a stream of ``n`` losses."""

    delays: list[int]
    """The delay of each detected drift, in drift order."""
    mean_delay: float
    """Their mean (``nan`` when nothing was detected)."""
    detected: int
    misses: int
    false_alarms: int
    n_drifts: int
    n: int

    @property
    def detection_rate(self) -> float:
        """Share of the drift points detected (``nan`` without drift points)."""
        return self.detected / self.n_drifts if self.n_drifts else math.nan

    @property
    def false_alarms_per_1000(self) -> float:
        """False alarms per 1000 losses."""
        return 1000.0 * self.false_alarms / self.n if self.n else math.nan

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["detection_rate"] = self.detection_rate
        out["false_alarms_per_1000"] = self.false_alarms_per_1000
        return out


def score_detections(
    alarms: Sequence[int],
    drift_points: Sequence[int],
    n: int,
    max_delay: int | None = None,
) -> DetectionReport:
    """Match ``alarms`` to ``drift_points`` (positions as in the module docstring).

    >>> r = score_detections([50, 120, 130, 260], drift_points=[100, 200], n=300)
    >>> r.delays, r.detected, r.misses, r.false_alarms
    ([20, 60], 2, 0, 2)
    >>> score_detections([120], [100], n=300, max_delay=10).misses
    1
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if max_delay is not None and max_delay < 1:
        raise ValueError(f"max_delay must be >= 1, got {max_delay}")
    points = sorted(int(d) for d in drift_points)
    if len(set(points)) != len(points):
        raise ValueError(f"drift points must be distinct, got {list(drift_points)}")
    if points and (points[0] < 0 or points[-1] >= n):
        raise ValueError(f"drift points must lie in [0, {n}), got {list(drift_points)}")
    found = sorted(int(a) for a in alarms)
    if found and (found[0] < 1 or found[-1] > n):
        raise ValueError(f"alarms must lie in [1, {n}], got {list(alarms)}")

    delays: list[int] = []
    false_alarms = 0
    detected_k: set[int] = set()
    for a in found:
        k = bisect.bisect_left(points, a) - 1  # the last drift point d_k < a
        if k < 0 or k in detected_k:
            false_alarms += 1
            continue
        delay = a - points[k]
        if max_delay is not None and delay > max_delay:
            false_alarms += 1
            continue
        detected_k.add(k)
        delays.append(delay)
    detected = len(delays)
    return DetectionReport(
        delays=delays,
        mean_delay=sum(delays) / detected if detected else math.nan,
        detected=detected,
        misses=len(points) - detected,
        false_alarms=false_alarms,
        n_drifts=len(points),
        n=n,
    )


def collect_alarms(detector: DriftDetector, errors: Iterable[float]) -> list[int]:
    """Feed ``errors`` to ``detector``; the 1-based positions where it alarmed.

    >>> from streameval.pipeline.drift.random_detector import RandomDetector
    >>> collect_alarms(RandomDetector(p=1.0, warmup=30), [0.0] * 100)
    [30, 60, 90]
    """
    return [i for i, e in enumerate(errors, start=1) if detector.update(e)]
