"""Matching alarms to drift points: delays, misses and false alarms."""

from __future__ import annotations

import math

import pytest
from streameval.pipeline.drift.evaluation import DetectionReport, score_detections


def test_crafted_alarms() -> None:
    # drifts at 100, 200, 300 in 400 losses
    # 40: before the first drift           -> false alarm
    # 150: first after 100                  -> detects 100, delay 50
    # 160, 200: same segment (200 <= d_2)   -> false alarms
    # (nothing in ]200, 300])               -> 200 missed
    # 310: first after 300                  -> detects 300, delay 10
    r = score_detections([40, 150, 160, 200, 310], [100, 200, 300], n=400)
    assert r.delays == [50, 10]
    assert r.mean_delay == 30.0
    assert (r.detected, r.misses, r.false_alarms) == (2, 1, 3)
    assert r.detection_rate == pytest.approx(2 / 3)
    assert r.false_alarms_per_1000 == pytest.approx(7.5)


def test_alarm_at_the_drift_point_is_not_a_detection() -> None:
    # An alarm at position d has seen no loss of the new concept; d + 1 has seen one.
    assert score_detections([100], [100], n=200).false_alarms == 1
    assert score_detections([101], [100], n=200).delays == [1]


def test_max_delay() -> None:
    r = score_detections([130, 140, 260], [100, 250], n=300, max_delay=30)
    # 130: delay 30 <= 30 detects; 140 extra; 260: delay 10 detects
    assert (r.delays, r.false_alarms, r.misses) == ([30, 10], 1, 0)
    r = score_detections([131, 140], [100], n=300, max_delay=30)
    # both later than 30: the drift is missed and both alarms are false
    assert (r.delays, r.false_alarms, r.misses) == ([], 2, 1)
    assert math.isnan(r.mean_delay)


def test_unsorted_inputs_and_no_drifts() -> None:
    r = score_detections([30, 10, 20], [], n=50)
    assert (r.detected, r.misses, r.false_alarms, r.n_drifts) == (0, 0, 3, 0)
    assert math.isnan(r.detection_rate)
    r = score_detections([260, 120], [200, 100], n=300)
    assert r.delays == [20, 60]


def test_no_alarms() -> None:
    r = score_detections([], [100, 200], n=300)
    assert (r.detected, r.misses, r.false_alarms) == (0, 2, 0)


def test_to_dict() -> None:
    d = score_detections([150], [100], n=1000).to_dict()
    assert d == {
        "delays": [50],
        "mean_delay": 50.0,
        "detected": 1,
        "misses": 0,
        "false_alarms": 0,
        "n_drifts": 1,
        "n": 1000,
        "detection_rate": 1.0,
        "false_alarms_per_1000": 0.0,
    }
    assert isinstance(score_detections([], [], 0), DetectionReport)


@pytest.mark.parametrize(
    ("alarms", "drifts", "n", "max_delay"),
    [
        ([0], [10], 20, None),
        ([21], [10], 20, None),
        ([5], [20], 20, None),
        ([5], [-1], 20, None),
        ([5], [3, 3], 20, None),
        ([5], [3], 20, 0),
    ],
)
def test_bad_inputs(alarms: list[int], drifts: list[int], n: int, max_delay: int | None) -> None:
    with pytest.raises(ValueError):
        score_detections(alarms, drifts, n, max_delay)
