"""Algorithm 4 (ratio of two fading estimates) and its sliding-window twin (sect. 5.3)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from streameval.pipeline.drift.evaluation import collect_alarms
from streameval.pipeline.drift.ratio import (
    FadingRatioPageHinkley,
    RatioPageHinkley,
    WindowRatioPageHinkley,
)

Means = Callable[[np.ndarray], np.ndarray]


def bernoulli_step(p0: float, p1: float, n0: int, n1: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [float(rng.random() < p0) for _ in range(n0)] + [
        float(rng.random() < p1) for _ in range(n1)
    ]


def periodic_step() -> list[float]:
    """An error every 10th loss for 600 losses, then every 2nd loss for 600."""
    return [float(i % 10 == 0) for i in range(1, 601)] + [float(i % 2 == 0) for i in range(1, 601)]


# --- an independent, non-recursive re-implementation -------------------------------------


def fading_means(alpha: float) -> Means:
    """M_alpha(i) = sum_j alpha^(i-j) e_j / sum_j alpha^(i-j), one explicit power sum per i."""

    def means(e: np.ndarray) -> np.ndarray:
        out = np.empty(len(e))
        for i in range(1, len(e) + 1):
            powers = alpha ** np.arange(i - 1, -1, -1, dtype=float)
            out[i - 1] = np.dot(powers, e[:i]) / powers.sum()
        return out

    return means


def window_means(w: int) -> Means:
    """M_w(i) = mean of e_{max(1, i-w+1)} .. e_i, one slice per i."""

    def means(e: np.ndarray) -> np.ndarray:
        return np.array([e[max(0, i - w) : i].mean() for i in range(1, len(e) + 1)])

    return means


def ph_statistics(e: np.ndarray, long: Means, short: Means, delta: float) -> np.ndarray:
    """m_T(i) - M_T for i = 1..n: cumulative sums of R - running mean - delta, M_T from 1."""
    m_long, m_short = long(e), short(e)
    safe = np.where(m_long > 0, m_long, 1.0)
    r = np.where(m_long > 0, m_short / safe, 1.0)
    running_mean = np.cumsum(r) / np.arange(1, len(r) + 1)
    m = np.cumsum(r - running_mean - delta)
    return m - np.minimum(1.0, np.minimum.accumulate(m))


def reference_alarms(
    errors: Sequence[float], long: Means, short: Means, delta: float, lambda_: float
) -> tuple[list[int], np.ndarray]:
    """All alarm positions (1-based), restarting after each; statistics up to the first one."""
    e = np.asarray(errors, dtype=float)
    alarms: list[int] = []
    start = 0
    first_stats = np.array([])
    while start < len(e):
        stats = ph_statistics(e[start:], long, short, delta)
        if not len(first_stats):
            first_stats = stats
        hits = np.flatnonzero(stats >= lambda_)
        if not len(hits):
            break
        # The alarm decision must not hinge on the last bits of a float.
        assert abs(stats[hits[0]] - lambda_) > 1e-6
        start += int(hits[0]) + 1
        alarms.append(start)
    return alarms, first_stats


def run(detector: RatioPageHinkley, errors: Sequence[float]) -> tuple[list[int], list[float]]:
    alarms, stats = [], []
    for i, e in enumerate(errors, start=1):
        if detector.update(e):
            alarms.append(i)
        stats.append(detector.statistic)
    return alarms, stats


# --- Algorithm 4 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alpha1", "alpha2", "delta", "lambda_"),
    [(0.99, 0.9, 0.05, 5.0), (0.99, 0.9, 0.1, 10.0), (0.995, 0.95, 0.1, 5.0)],
)
def test_fading_ratio_matches_closed_form(
    alpha1: float, alpha2: float, delta: float, lambda_: float
) -> None:
    errors = periodic_step()
    expected, stats = reference_alarms(
        errors, fading_means(alpha1), fading_means(alpha2), delta, lambda_
    )
    alarms, got = run(FadingRatioPageHinkley(alpha1, alpha2, delta, lambda_), errors)
    assert alarms == expected
    assert alarms and alarms[0] > 600  # after the step, not before
    first = alarms[0]
    np.testing.assert_allclose(got[:first], stats[:first], rtol=1e-9, atol=1e-9)


def test_fading_ratio_matches_closed_form_with_several_alarms() -> None:
    rng = random.Random(7)
    errors = [float(rng.random() < (0.1 if (i // 300) % 2 == 0 else 0.6)) for i in range(1500)]
    expected, _ = reference_alarms(errors, fading_means(0.98), fading_means(0.9), 0.1, 4.0)
    alarms = collect_alarms(FadingRatioPageHinkley(0.98, 0.9, 0.1, 4.0), errors)
    assert alarms == expected
    assert len(alarms) >= 2


@pytest.mark.parametrize(
    ("w1", "w2", "delta", "lambda_"), [(100, 20, 0.05, 5.0), (200, 50, 0.1, 10.0)]
)
def test_window_ratio_matches_closed_form(w1: int, w2: int, delta: float, lambda_: float) -> None:
    errors = periodic_step()
    expected, stats = reference_alarms(errors, window_means(w1), window_means(w2), delta, lambda_)
    alarms, got = run(WindowRatioPageHinkley(w1, w2, delta, lambda_), errors)
    assert alarms == expected
    assert alarms and alarms[0] > 600
    first = alarms[0]
    np.testing.assert_allclose(got[:first], stats[:first], rtol=1e-9, atol=1e-9)


def test_alarm_is_greater_or_equal_to_lambda() -> None:
    # Algorithm 4 alarms when m_T - M_T >= lambda: a threshold equal to a reached value alarms.
    probe = FadingRatioPageHinkley(0.9, 0.5, delta=0.0, lambda_=100.0)
    values = []
    for e in (0, 0, 1, 1):
        probe.update(e)
        values.append(probe.statistic)
    exact = values[-1]
    assert exact > max(values[:-1])
    d = FadingRatioPageHinkley(0.9, 0.5, delta=0.0, lambda_=exact)
    assert collect_alarms(d, (0, 0, 1, 1)) == [4]


def test_m_t_starts_at_one_and_zero_errors_give_ratio_one() -> None:
    d = FadingRatioPageHinkley()
    assert d.ph.m_min == 1.0  # Algorithm 4's initialisation of M_T
    assert collect_alarms(d, [0.0] * 500) == []
    assert d.ratio == 1.0
    assert d.statistic == 0.0
    assert d.ph.m_min == pytest.approx(-0.1 * 500)  # m_T(i) = -i delta while R = 1
    # The first error after a clean run: R = N_alpha1 / N_alpha2 (both sums hold one error).
    d.update(1.0)
    n1 = sum(0.9994**k for k in range(501))
    n2 = sum(0.997**k for k in range(501))
    assert d.ratio == pytest.approx(n1 / n2)


@pytest.mark.parametrize(
    "make", [FadingRatioPageHinkley, WindowRatioPageHinkley], ids=["fading", "window"]
)
def test_paper_defaults_detect_a_step_and_not_before(make: Callable[[], RatioPageHinkley]) -> None:
    errors = bernoulli_step(0.1, 0.5, 5000, 5000, seed=3)
    alarms = collect_alarms(make(), errors)
    assert alarms and alarms[0] > 5000
    assert alarms[0] - 5000 < 600


@pytest.mark.parametrize(
    "make", [FadingRatioPageHinkley, WindowRatioPageHinkley], ids=["fading", "window"]
)
def test_paper_defaults_are_quiet_on_a_stationary_stream(
    make: Callable[[], RatioPageHinkley],
) -> None:
    rng = random.Random(11)
    errors = [float(rng.random() < 0.2) for _ in range(50_000)]
    assert collect_alarms(make(), errors) == []


def test_restart_after_alarm_equals_fresh_detector_on_the_rest() -> None:
    errors = periodic_step()
    alarms = collect_alarms(WindowRatioPageHinkley(100, 20, 0.05, 5.0), errors)
    first = alarms[0]
    fresh = WindowRatioPageHinkley(100, 20, 0.05, 5.0)
    assert [first + a for a in collect_alarms(fresh, errors[first:])] == alarms[1:]


def test_statistic_kept_until_next_update() -> None:
    d = WindowRatioPageHinkley(w1=4, w2=2, delta=0.0, lambda_=0.4)
    assert collect_alarms(d, (1, 0, 1, 0, 1, 1)) == [6]
    assert d.drift_detected and d.statistic >= 0.4
    d.update(0.0)
    assert not d.drift_detected and d.statistic == 0.0 and d.ratio == 1.0


def test_negative_loss_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        FadingRatioPageHinkley().update(-1.0)
    with pytest.raises(ValueError, match="non-negative"):
        WindowRatioPageHinkley().update(float("nan"))


@pytest.mark.parametrize(
    ("alpha1", "alpha2"), [(0.997, 0.9994), (0.99, 0.99), (1.0, 0.99), (0.99, 0.0)]
)
def test_bad_fading_factors(alpha1: float, alpha2: float) -> None:
    with pytest.raises(ValueError, match="alpha2 < alpha1"):
        FadingRatioPageHinkley(alpha1, alpha2)


@pytest.mark.parametrize(("w1", "w2"), [(1000, 5000), (100, 100), (10, 0)])
def test_bad_windows(w1: int, w2: int) -> None:
    with pytest.raises(ValueError, match="w2 < w1"):
        WindowRatioPageHinkley(w1, w2)
