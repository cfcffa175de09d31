"""Property tests on the evaluation core, complementing the per-module ones.

Already covered elsewhere, and not repeated here:

* AUC equals a brute-force pair count on scores with many ties
  (``test_metrics_auc.py::test_property_equals_brute_force``);
* kappa, kappa_per, kappa_m below 1, kappa_plus and G-mean in [0, 1]
  (``test_metrics_classification.py::test_kappa_bounds``);
* fading factor 1 and a window longer than the stream equal the whole history, a window
  equals the batch of its last rows -- on fixed random streams
  (``test_metrics_classification.py``);
* the bins of one waiting period partition it, ``bin_of`` agrees with the edges
  (``test_reeval_bins.py``);
* the merge restores the schedule from any interleaving (``test_merge_ingest.py``).

Added here: the same identities for *any* stream hypothesis draws, for every metric class
that takes a :class:`~streameval.pipeline.metrics.Forgetting` (classification, regression, binned,
the pairwise comparisons); AUC on arbitrary real scores, its invariance under monotone
rescaling; kappa's lower bound; and, at the level of a whole experiment, every labelled
instance lands in every bin exactly once.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.metrics import (
    BinnedClassificationMetrics,
    BinnedRegressionMetrics,
    ClassificationMetrics,
    Forgetting,
    PrequentialAUC,
    RegressionMetrics,
)
from streameval.pipeline.metrics.comparison import QStatistic, SignedMcNemar
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay, TimeDelay
from streameval.pipeline.streams.schedule import replay_schedule

LABELS = st.sampled_from(["a", "b", "c", "d"])
MAYBE = st.one_of(LABELS, st.none())
#: (y_true, y_pred, y_per, y_maj); predictions may be None (nothing known yet)
ROWS = st.lists(st.tuples(LABELS, MAYBE, MAYBE, MAYBE), min_size=1, max_size=60)
TARGETS = st.floats(-1e3, 1e3, allow_nan=False)
REG_ROWS = st.lists(st.tuples(TARGETS, st.one_of(TARGETS, st.none())), min_size=1, max_size=60)


def same(a: Any, b: Any, *, rel: float = 0.0, path: str = "") -> None:
    """Equal dicts/lists of numbers, nan equal to nan, within ``rel`` if given."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], rel=rel, path=f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, rel=rel, path=f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), (path, a, b)
    elif rel:
        assert b == pytest.approx(a, rel=rel, abs=rel), (path, a, b)
    else:
        assert a == b, (path, a, b)


# -- fading factor 1 is the whole history, for every estimator -----------------------------------


@settings(max_examples=150, deadline=None)
@given(ROWS)
def test_fading_one_equals_cumulative_classification(rows: list[tuple]) -> None:
    whole, fading = ClassificationMetrics(), ClassificationMetrics(Forgetting.fading(1.0))
    for row in rows:
        whole.update(*row)
        fading.update(*row)
        same(fading.get(), whole.get())


@settings(max_examples=100, deadline=None)
@given(REG_ROWS)
def test_fading_one_equals_cumulative_regression(rows: list[tuple]) -> None:
    whole, fading = RegressionMetrics(), RegressionMetrics(Forgetting.fading(1.0))
    for row in rows:
        whole.update(*row)
        fading.update(*row)
        same(fading.get(), whole.get())


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.data())
def test_fading_one_equals_cumulative_binned(n_bins: int, data: st.DataObject) -> None:
    bins = st.lists(MAYBE, min_size=n_bins, max_size=n_bins)
    rows = data.draw(st.lists(st.tuples(LABELS, bins, bins, bins), min_size=1, max_size=40))
    whole = BinnedClassificationMetrics(n_bins)
    fading = BinnedClassificationMetrics(n_bins, Forgetting.fading(1.0))
    reg_whole = BinnedRegressionMetrics(n_bins)
    reg_fading = BinnedRegressionMetrics(n_bins, Forgetting.fading(1.0))
    for y, preds, per, maj in rows:
        whole.update(y, preds, per, maj)
        fading.update(y, preds, per, maj)
        values = [None if p is None else float(ord(p)) for p in preds]
        reg_whole.update(float(ord(y)), values)
        reg_fading.update(float(ord(y)), values)
        same(fading.get(), whole.get())
        same(reg_fading.get(), reg_whole.get())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 1.0]))))
def test_fading_one_equals_cumulative_comparisons(losses: list[tuple[float, float]]) -> None:
    q, q1 = QStatistic(), QStatistic(Forgetting.fading(1.0))
    m, m1 = SignedMcNemar(), SignedMcNemar(Forgetting.fading(1.0))
    for a, b in losses:
        q.update(a, b)
        q1.update(a, b)
        m.update(a > 0, b > 0)
        m1.update(a > 0, b > 0)
        same(q1.get(), q.get())
        same(m1.get(), m.get())


# -- a window of n is the batch of the last n ----------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(ROWS, st.integers(1, 20))
def test_window_equals_batch_classification(rows: list[tuple], w: int) -> None:
    window = ClassificationMetrics(Forgetting.sliding(w))
    for t, row in enumerate(rows):
        window.update(*row)
        batch = ClassificationMetrics()
        for old in rows[max(0, t + 1 - w) : t + 1]:
            batch.update(*old)
        got, want = window.get(), batch.get()
        # classes that left the window keep a key (nan recall, zero prior): drop them
        for key in ("recall", "priors", "p_per_joint"):
            assert got[key].keys() >= want[key].keys()
            got[key] = {c: got[key][c] for c in want[key]}
        same(got, want)


@settings(max_examples=100, deadline=None)
@given(REG_ROWS, st.integers(1, 20))
@example([(0.0, 32.0), (1.315504722394735, 0.0), (0.0, None), (0.0, 0.0), (0.0, 0.0)], 3)
def test_window_equals_batch_regression(rows: list[tuple], w: int) -> None:
    window = RegressionMetrics(Forgetting.sliding(w))
    scale = 1.0  # the largest squared error summed so far: the size of the rounding residue
    for t, row in enumerate(rows):
        window.update(*row)
        if row[1] is not None:
            scale = max(scale, (row[0] - row[1]) ** 2)
        batch = RegressionMetrics()
        for old in rows[max(0, t + 1 - w) : t + 1]:
            batch.update(*old)
        got, want = window.get(), batch.get()
        # running window sums subtract what leaves: equal up to rounding. The residue of a
        # sum of squares is ~1e-16 of the largest square that passed through it, and RMSE's
        # square root magnifies it near 0 (a residue of 4e-14 reads 2e-7), so RMSE is
        # compared as the mean square, to the residue's size.
        got_rmse, want_rmse = got.pop("rmse"), want.pop("rmse")
        same(got, want, rel=1e-7)
        if math.isnan(want_rmse):
            assert math.isnan(got_rmse)
        else:
            assert abs(got_rmse**2 - want_rmse**2) <= 1e-12 * scale, (got_rmse, want_rmse)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 12), st.data())
def test_window_equals_batch_binned(n_bins: int, w: int, data: st.DataObject) -> None:
    bins = st.lists(MAYBE, min_size=n_bins, max_size=n_bins)
    rows = data.draw(st.lists(st.tuples(LABELS, bins, bins, bins), min_size=1, max_size=40))
    window = BinnedClassificationMetrics(n_bins, Forgetting.sliding(w))
    for t, row in enumerate(rows):
        window.update(*row)
        batch = BinnedClassificationMetrics(n_bins)
        for old in rows[max(0, t + 1 - w) : t + 1]:
            batch.update(*old)
        same(window.get(), batch.get(), rel=1e-12)


# -- kappa family bounds --------------------------------------------------------------------------

FORGETTINGS = st.sampled_from(
    [Forgetting.whole(), Forgetting.sliding(3), Forgetting.fading(0.8), Forgetting.fading(0.3)]
)


@settings(max_examples=200, deadline=None)
@given(ROWS, FORGETTINGS)
def test_kappa_is_at_least_minus_one(rows: list[tuple], forgetting: Forgetting) -> None:
    """Cohen's kappa lies in [-1, 1]; kappa_plus in [0, 1]; kappa_per/kappa_m have no floor."""
    m = ClassificationMetrics(forgetting)
    for row in rows:
        m.update(*row)
        s = m.get()
        assert math.isnan(s["kappa"]) or -1.0 - 1e-9 <= s["kappa"] <= 1.0 + 1e-9
        assert math.isnan(s["kappa_plus"]) or 0.0 <= s["kappa_plus"] <= 1.0 + 1e-9
        for key in ("kappa_per", "kappa_m"):
            assert math.isnan(s[key]) or s[key] <= 1.0 + 1e-9
        if not math.isnan(s["kappa"]) and s["accuracy"] == 1.0:
            assert s["kappa"] == pytest.approx(1.0)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), FORGETTINGS, st.data())
def test_binned_kappa_bounds(n_bins: int, forgetting: Forgetting, data: st.DataObject) -> None:
    bins = st.lists(MAYBE, min_size=n_bins, max_size=n_bins)
    rows = data.draw(st.lists(st.tuples(LABELS, bins, bins, bins), min_size=1, max_size=30))
    m = BinnedClassificationMetrics(n_bins, forgetting)
    for row in rows:
        m.update(*row)
        s = m.get()
        for b in range(n_bins):
            assert 0.0 <= s["accuracy"][b] <= 1.0 + 1e-9
            k, kp = s["kappa"][b], s["kappa_plus"][b]
            assert math.isnan(k) or -1.0 - 1e-9 <= k <= 1.0 + 1e-9
            assert math.isnan(kp) or 0.0 <= kp <= 1.0 + 1e-9
            for key in ("kappa_per", "kappa_m"):
                assert math.isnan(s[key][b]) or s[key][b] <= 1.0 + 1e-9


# -- AUC ------------------------------------------------------------------------------------------


def pair_count_auc(rows: list[tuple[float, bool]]) -> float:
    """Count, over every (positive, negative) pair: 1 if ordered right, 1/2 if tied."""
    pos = [s for s, y in rows if y]
    neg = [s for s, y in rows if not y]
    if not pos or not neg:
        return 1.0
    half_points = sum(2 * (p > n) + (p == n) for p in pos for n in neg)
    return float(Fraction(half_points, 2 * len(pos) * len(neg)))


SCORES = st.floats(-1e6, 1e6, allow_nan=False)
AUC_ROWS = st.lists(
    st.tuples(st.one_of(SCORES, st.sampled_from([0.0, 0.25, 1.0])), st.booleans()),
    min_size=1,
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(AUC_ROWS, st.one_of(st.none(), st.integers(1, 15)))
def test_auc_on_real_scores_equals_pair_count(rows: list[tuple[float, bool]], window) -> None:
    auc = PrequentialAUC(window)
    for t, (score, label) in enumerate(rows):
        auc.update(score, label)
        lo = 0 if window is None else max(0, t + 1 - window)
        assert auc.get() == pair_count_auc(rows[lo : t + 1]), t


@settings(max_examples=100, deadline=None)
@given(AUC_ROWS, st.integers(1, 15), st.floats(1e-3, 1e3), st.floats(-1e3, 1e3))
def test_auc_ignores_monotone_rescaling(rows, window: int, scale: float, shift: float) -> None:
    """Only the order of the scores matters: any increasing map gives the same AUC.

    (In floating point an increasing map may round two scores into one, a tie; the maps
    are checked on the streams where they keep distinct scores distinct. Scaling by a
    power of two always does.)
    """
    maps = [lambda s: s * 1024.0, lambda s: s * scale + shift, lambda s: s**3, math.atan]
    scores = {s for s, _ in rows}
    kept = [f for f in maps if len({f(s) for s in scores}) == len(scores)]
    assert kept
    reference = PrequentialAUC(window)
    mapped = [PrequentialAUC(window) for _ in kept]
    for score, label in rows:
        reference.update(score, label)
        for f, auc in zip(kept, mapped, strict=True):
            auc.update(f(score), label)
            assert auc.get() == reference.get()


@settings(max_examples=100, deadline=None)
@given(AUC_ROWS)
def test_auc_window_longer_than_the_stream_is_the_whole_history(rows) -> None:
    whole, window = PrequentialAUC(None), PrequentialAUC(len(rows))
    for score, label in rows:
        whole.update(score, label)
        window.update(score, label)
        assert window.get() == whole.get()


# -- every labelled instance lands in every bin once ---------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    delay=st.one_of(st.integers(0, 8).map(InstanceDelay), st.floats(0, 9).map(TimeDelay)),
    same_time=st.booleans(),
    k=st.integers(1, 4),
    n_bins=st.integers(1, 6),
    cap=st.one_of(st.none(), st.integers(1, 10)),
)
def test_every_labelled_instance_fills_every_bin_once(n, delay, same_time, k, n_bins, cap):
    rows = [
        Instance(str(i), float(i // 3 if same_time else i), {"x": float(i % 5)}, "ab"[i % 3 == 0])
        for i in range(n)
    ]
    config = ExperimentConfig(
        "s", ["nochange", "nb"], reeval_k=k, bins=n_bins, window=5, pending_cap=cap
    )
    experiment = Experiment(config)
    experiment.run(replay_schedule("s", rows, delay))
    results = experiment.results()
    labelled = results["n_labelled"]
    assert labelled + results["overhead"]["evicted"] == n
    for spec in config.learners:
        binned = results["learners"][spec]["binned"]
        assert binned["n"] == [float(labelled)] * (n_bins + 2)
        assert results["learners"][spec]["n_scored"] == labelled
