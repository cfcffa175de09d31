"""River's ADWIN and DDM behind the drift detector protocol."""

from __future__ import annotations

import random

import pytest
from streameval.pipeline.drift.base import DriftDetector
from streameval.pipeline.drift.evaluation import collect_alarms, score_detections
from streameval.pipeline.drift.river_detectors import RiverDetector


def bernoulli_step(p0: float, p1: float, n0: int, n1: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [float(rng.random() < p0) for _ in range(n0)] + [
        float(rng.random() < p1) for _ in range(n1)
    ]


@pytest.mark.parametrize("name", ["adwin", "ddm"])
def test_detects_a_step_from_005_to_06(name: str) -> None:
    errors = bernoulli_step(0.05, 0.6, 5000, 5000, seed=2)
    d = RiverDetector(name)  # type: ignore[arg-type]
    assert isinstance(d, DriftDetector)
    report = score_detections(collect_alarms(d, errors), [5000], len(errors), max_delay=300)
    assert report.detected == 1
    assert report.delays[0] <= 300


def test_adwin_statistic_is_the_window_mean() -> None:
    d = RiverDetector("adwin")
    for e in (1.0, 0.0, 0.0, 1.0):
        d.update(e)
    assert d.statistic == pytest.approx(0.5)


def test_ddm_statistic_exceeds_its_threshold_at_an_alarm() -> None:
    errors = bernoulli_step(0.2, 0.6, 2000, 2000, seed=4)
    d = RiverDetector("ddm")
    for e in errors:
        if d.update(e):
            assert d.statistic > 3.0
            break
    else:
        pytest.fail("no alarm")


def test_ddm_needs_zero_one_losses() -> None:
    with pytest.raises(ValueError, match="0/1"):
        RiverDetector("ddm").update(0.5)


def test_reset_gives_a_fresh_detector() -> None:
    errors = bernoulli_step(0.05, 0.6, 500, 500, seed=2)
    d = RiverDetector("ddm")
    collect_alarms(d, errors[:300])
    d.reset()
    fresh = RiverDetector("ddm")
    assert collect_alarms(d, errors[300:]) == collect_alarms(fresh, errors[300:])


def test_params_and_names() -> None:
    assert RiverDetector("adwin", delta=0.01).name == "adwin[delta=0.01]"
    assert RiverDetector("ddm", warm_start=50).name == "ddm[warm_start=50]"
    with pytest.raises(ValueError, match="unknown river detector"):
        RiverDetector("kswin")  # type: ignore[arg-type]
