"""The random detector of the DDM-random experiment (temporal dependence paper, sect. 6.9)."""

from __future__ import annotations

import itertools

import pytest
from streameval.pipeline.drift.evaluation import collect_alarms
from streameval.pipeline.drift.random_detector import RandomDetector


def test_p_one_alarms_every_30th_instance() -> None:
    # "if p = 1 change is alarmed at every 30th instance"
    alarms = collect_alarms(RandomDetector(p=1.0), [0.0] * 300)
    assert alarms == list(range(30, 301, 30))


@pytest.mark.parametrize("warmup", [0, 1, 2, 7])
def test_p_one_spacing_follows_the_warmup(warmup: int) -> None:
    alarms = collect_alarms(RandomDetector(p=1.0, warmup=warmup), [1.0] * 50)
    step = max(warmup, 1)
    assert alarms == list(range(step, 51, step))


def test_p_zero_never_alarms() -> None:
    assert collect_alarms(RandomDetector(p=0.0, warmup=0), [1.0] * 10_000) == []


def test_no_alarm_within_the_warmup_after_a_restart() -> None:
    alarms = collect_alarms(RandomDetector(p=0.2, warmup=30, seed=5), [0.0] * 20_000)
    assert alarms[0] >= 30
    gaps = [b - a for a, b in itertools.pairwise(alarms)]
    assert min(gaps) >= 30
    # After the warm-up, the wait is geometric: P(gap == 30) = p.
    share = sum(g == 30 for g in gaps) / len(gaps)
    assert share == pytest.approx(0.2, abs=0.05)


def test_alarm_rate_after_warmup() -> None:
    alarms = collect_alarms(RandomDetector(p=0.01, warmup=30, seed=1), [0.0] * 100_000)
    # mean spacing 29 + 1 / p = 129
    assert len(alarms) == pytest.approx(100_000 / 129, rel=0.1)


def test_seeded_and_ignores_the_data() -> None:
    a = collect_alarms(RandomDetector(p=0.05, seed=3), [0.0] * 5000)
    b = collect_alarms(RandomDetector(p=0.05, seed=3), [1.0] * 5000)
    c = collect_alarms(RandomDetector(p=0.05, seed=4), [0.0] * 5000)
    assert a == b and a != c


def test_statistic_counts_since_restart_and_reset_keeps_the_generator() -> None:
    d = RandomDetector(p=1.0, warmup=3)
    d.update(0.0)
    d.update(0.0)
    assert d.statistic == 2.0
    assert d.update(0.0) and d.statistic == 3.0
    d.update(0.0)
    assert d.statistic == 1.0
    d.reset()
    assert d.statistic == 0.0


@pytest.mark.parametrize(("p", "warmup"), [(-0.1, 30), (1.5, 30), (0.5, -1)])
def test_bad_parameters(p: float, warmup: int) -> None:
    with pytest.raises(ValueError):
        RandomDetector(p, warmup)
