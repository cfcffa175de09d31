"""Page-Hinkley on a raw signal and on prequential error estimates (sect. 5.1-5.2)."""

from __future__ import annotations

import math
import random

import pytest
from streameval.pipeline.drift.evaluation import collect_alarms
from streameval.pipeline.drift.page_hinkley import (
    PageHinkley,
    PageHinkleyStatistic,
    PrequentialPageHinkley,
)
from streameval.pipeline.metrics.forgetting import Forgetting


def bernoulli_step(p0: float, p1: float, n0: int, n1: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [float(rng.random() < p0) for _ in range(n0)] + [
        float(rng.random() < p1) for _ in range(n1)
    ]


def test_hand_computed_signal() -> None:
    # x = 1, 1, 1, 5, 5 with delta = 0.5:
    # running means 1, 1, 1, 2, 2.6
    # m_T = -0.5, -1.0, -1.5, -1.5 + 5 - 2 - 0.5 = 1.0, 1.0 + 5 - 2.6 - 0.5 = 2.9
    # M_T = -0.5, -1.0, -1.5, -1.5, -1.5;  PH_T = 0, 0, 0, 2.5, 4.4
    ph = PageHinkleyStatistic(delta=0.5)
    ms, mins, stats = [], [], []
    for x in (1, 1, 1, 5, 5):
        ph.update(x)
        ms.append(ph.m)
        mins.append(ph.m_min)
        stats.append(ph.get())
    assert ms == pytest.approx([-0.5, -1.0, -1.5, 1.0, 2.9])
    assert mins == [-0.5, -1.0, -1.5, -1.5, -1.5]
    assert stats == pytest.approx([0.0, 0.0, 0.0, 2.5, 4.4])


def test_alarm_is_strictly_greater_than_lambda() -> None:
    # PH_4 = 2.5 exactly: sect. 5.1 alarms only when PH_T > lambda, so on the 5th value.
    d = PageHinkley(delta=0.5, lambda_=2.5)
    assert [d.update(x) for x in (1, 1, 1, 5, 5)] == [False, False, False, False, True]
    assert d.statistic == pytest.approx(4.4)
    # Just below the value, the 4th one alarms.
    d = PageHinkley(delta=0.5, lambda_=2.499)
    assert collect_alarms(d, (1, 1, 1, 5, 5)) == [4]


def test_statistic_before_any_value_and_first_value() -> None:
    d = PageHinkley()
    assert d.statistic == 0.0
    d.update(0.7)
    assert d.ph.m == pytest.approx(-0.1)  # m_1 = x_1 - x_1 - delta
    assert d.statistic == 0.0


def test_restarts_after_an_alarm() -> None:
    signal = [0.0] * 20 + [1.0] * 40 + [0.0] * 20 + [1.0] * 40
    d = PageHinkley(delta=0.05, lambda_=3.0)
    alarms = collect_alarms(d, signal)
    assert alarms, "the step must be detected"
    first = alarms[0]
    assert first > 20
    # Statistic still shows the alarm value until the next update.
    d2 = PageHinkley(delta=0.05, lambda_=3.0)
    collect_alarms(d2, signal[:first])
    assert d2.drift_detected and d2.statistic > 3.0
    # What follows the alarm is what a fresh detector sees on the rest of the signal.
    fresh = PageHinkley(delta=0.05, lambda_=3.0)
    assert [first + a for a in collect_alarms(fresh, signal[first:])] == alarms[1:]


def test_reset_forgets_everything() -> None:
    d = PageHinkley(delta=0.0, lambda_=10.0)
    collect_alarms(d, [0, 0, 1, 1, 1])
    d.reset()
    assert d.statistic == 0.0 and d.ph.mean.count == 0 and not d.drift_detected


def test_prequential_window_hand_computed() -> None:
    # window of 2 over 0, 0, 1, 1: P = 0, 0, 1/2, 1; running means of P: 0, 0, 1/6, 3/8
    # m_T (delta = 0): 0, 0, 1/3, 1/3 + 1 - 3/8 = 23/24;  M_T = 0
    d = PrequentialPageHinkley(Forgetting.sliding(2), delta=0.0, lambda_=0.9)
    assert [d.update(e) for e in (0, 0, 1, 1)] == [False, False, False, True]
    assert d.estimate == 1.0
    assert d.statistic == pytest.approx(23 / 24)


@pytest.mark.parametrize(
    ("forgetting", "expected"),
    [
        (Forgetting.whole(), [0.0, 0.0, 1 / 3, 1 / 2]),
        (Forgetting.sliding(2), [0.0, 0.0, 1 / 2, 1.0]),
        (Forgetting.fading(0.5), [0.0, 0.0, 1 / 1.75, 1.5 / 1.875]),
    ],
)
def test_prequential_estimate_follows_the_estimator(
    forgetting: Forgetting, expected: list[float]
) -> None:
    d = PrequentialPageHinkley(forgetting)
    got = []
    for e in (0, 0, 1, 1):
        d.update(e)
        got.append(d.estimate)
    assert got == pytest.approx(expected)


def test_prequential_restart_resets_the_estimate() -> None:
    d = PrequentialPageHinkley(Forgetting.sliding(2), delta=0.0, lambda_=0.9)
    collect_alarms(d, (0, 0, 1, 1))
    assert d.drift_detected
    d.update(0.0)
    assert d.estimate == 0.0 and d.statistic == 0.0 and not d.drift_detected


@pytest.mark.parametrize("estimator", [Forgetting.sliding(1000), Forgetting.fading(0.997)])
def test_paper_parameters_detect_a_step_and_not_before(estimator: Forgetting) -> None:
    errors = bernoulli_step(0.1, 0.5, 5000, 5000, seed=1)
    alarms = collect_alarms(PrequentialPageHinkley(estimator), errors)
    assert alarms and alarms[0] > 5000
    assert alarms[0] - 5000 < 1500


def test_whole_history_estimate_is_slow() -> None:
    # Sect. 5.2: the whole-history estimate reacts far later (or never).
    errors = bernoulli_step(0.05, 0.6, 5000, 5000, seed=1)
    whole = collect_alarms(PrequentialPageHinkley(Forgetting.whole()), errors)
    fading = collect_alarms(PrequentialPageHinkley(Forgetting.fading(0.997)), errors)
    assert fading and fading[0] > 5000
    assert not whole or whole[0] > fading[0] + 1000


@pytest.mark.parametrize(
    ("delta", "lambda_"), [(-0.1, 100.0), (0.1, 0.0), (0.1, -1.0), (math.nan, 1.0)]
)
def test_bad_parameters(delta: float, lambda_: float) -> None:
    with pytest.raises(ValueError):
        PageHinkley(delta, lambda_)
    with pytest.raises(ValueError):
        PrequentialPageHinkley(Forgetting.whole(), delta, lambda_)
