"""Binned metrics equal one scalar metric per bin fed bin-wise."""

from __future__ import annotations

import math
import random

import pytest
from streameval.pipeline.metrics import (
    BinnedClassificationMetrics,
    BinnedRegressionMetrics,
    ClassificationMetrics,
    Forgetting,
    RegressionMetrics,
)

FORGETTINGS = [
    Forgetting.whole(),
    Forgetting.sliding(1),
    Forgetting.sliding(25),
    Forgetting.fading(0.95),
    Forgetting.fading(0.3),  # crosses the lazy-scale threshold (0.3^-192 > 1e100)
]
KEYS = ("n", "accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus")


def assert_close(got: float, want: float, what: object) -> None:
    if math.isnan(want):
        assert math.isnan(got), what
    else:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), what


@pytest.mark.parametrize("forgetting", FORGETTINGS, ids=lambda f: f.label)
def test_binned_classification_equals_independent_metrics(forgetting: Forgetting) -> None:
    rng = random.Random(7)
    n_bins = 6
    binned = BinnedClassificationMetrics(n_bins, forgetting)
    scalars = [ClassificationMetrics(forgetting) for _ in range(n_bins)]
    classes = ["a", "b"]
    for t in range(400):
        if t == 150:
            classes += ["c", "d", "e", "f", "g", "h", "i"]  # outgrow the initial columns
        y = rng.choice(classes)
        options = [*classes, None, "never-true"]
        preds = [y if rng.random() < 0.1 * b else rng.choice(options) for b in range(n_bins)]
        per = [rng.choice(options) for _ in range(n_bins)]
        per[0] = preds[0]  # bin 0 predicts like the reference: kappa_per exactly 0
        maj = [rng.choice(options) for _ in range(n_bins)]
        binned.update(y, preds, per, maj)
        for b, m in enumerate(scalars):
            m.update(y, preds[b], per[b], maj[b])
        if t % 7 and t != 399:
            continue
        got = binned.get()
        for b, m in enumerate(scalars):
            want = m.get()
            for key in KEYS:
                assert_close(got[key][b], want[key], (t, b, key))
        assert got["kappa_per"][0] == 0.0 or math.isnan(got["kappa_per"][0])


def test_binned_classification_hand_computed() -> None:
    m = BinnedClassificationMetrics(n_bins=2)
    #           y    bin 0, bin 1      No-Change  Majority
    m.update("a", ["b", "a"], ["x", "x"], ["a", "a"])
    m.update("b", [None, "b"], ["a", "a"], ["a", "a"])
    m.update("b", ["b", "a"], ["b", "b"], ["a", "b"])
    s = m.get()
    assert s["n"] == [3.0, 3.0]
    # bin 0: right at t3 -> 1/3. P(y) a 1/3 b 2/3, P_h b 2/3 -> p_ran = 4/9
    #        kappa = (1/3 - 4/9) / (5/9) = -1/5
    # bin 1: right at t1, t2 -> 2/3. P_h a 2/3 b 1/3 -> p_ran = 2/9 + 2/9 = 4/9
    #        kappa = (2/3 - 4/9) / (5/9) = 2/5
    assert s["accuracy"] == pytest.approx([1 / 3, 2 / 3])
    assert s["kappa"] == pytest.approx([-0.2, 0.4])
    # p_per = 1/3 in both bins (t3): kappa_per = [0, (2/3 - 1/3) / (2/3)] = [0, 1/2]
    assert s["kappa_per"] == pytest.approx([0.0, 0.5])
    # p_maj: bin 0 t1 only -> 1/3, kappa_m 0; bin 1 t1, t3 -> 2/3, kappa_m = 0
    assert s["kappa_m"] == pytest.approx([0.0, 0.0])
    assert s["kappa_plus"] == pytest.approx([0.0, math.sqrt(0.2)])


def test_binned_classification_empty_and_validation() -> None:
    m = BinnedClassificationMetrics(3, Forgetting.sliding(4))
    s = m.get()
    assert s["n"] == [0.0] * 3 and all(math.isnan(v) for v in s["kappa"])
    with pytest.raises(ValueError):
        m.update("a", ["a", "a"], ["a"] * 3, ["a"] * 3)
    with pytest.raises(ValueError):
        BinnedClassificationMetrics(0)


@pytest.mark.parametrize("forgetting", FORGETTINGS, ids=lambda f: f.label)
def test_binned_regression_equals_independent_metrics(forgetting: Forgetting) -> None:
    rng = random.Random(8)
    n_bins = 5
    binned = BinnedRegressionMetrics(n_bins, forgetting)
    scalars = [RegressionMetrics(forgetting) for _ in range(n_bins)]
    for t in range(300):
        y = rng.gauss(0.0, 3.0)
        preds = [
            None if rng.random() < 0.1 * b else y + rng.gauss(0.0, b + 1) for b in range(n_bins)
        ]
        binned.update(y, preds)
        for b, m in enumerate(scalars):
            m.update(y, preds[b])
        if t % 11 == 0 or t == 299:
            got = binned.get()
            for b, m in enumerate(scalars):
                want = m.get()
                for key in ("n", "mae", "rmse"):
                    # window sums of floats: both subtract what leaves, in another order
                    if math.isnan(want[key]):
                        assert math.isnan(got[key][b])
                    else:
                        assert got[key][b] == pytest.approx(want[key], rel=1e-9, abs=1e-12)


def test_regression_hand_computed_window() -> None:
    m = RegressionMetrics(Forgetting.sliding(2))
    for y, yhat in [(0.0, 10.0), (1.0, 2.0), (3.0, None), (4.0, 1.0)]:
        m.update(y, yhat)
    # window t3, t4: one prediction, error 3
    assert m.get() == {"n": 1.0, "mae": 3.0, "rmse": 3.0}
    m.update(0.0, None)
    m.update(0.0, None)
    s = m.get()
    assert s["n"] == 0.0 and math.isnan(s["mae"]) and math.isnan(s["rmse"])
    b = BinnedRegressionMetrics(1, Forgetting.fading(0.5))
    b.update(0.0, [2.0])
    b.update(0.0, [-1.0])
    # weights .5, 1: mae = (1 + 1) / 1.5, rmse = sqrt((2 + 1) / 1.5)
    s = b.get()
    assert s["n"] == [1.5]
    assert s["mae"] == pytest.approx([4 / 3]) and s["rmse"] == pytest.approx([math.sqrt(2)])
