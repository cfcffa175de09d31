"""Rolling and Faded against direct recomputation, for every metric.

``Rolling(metric, W)`` after each update must equal a fresh metric fed the last ``W``
observations, and ``Faded(metric, alpha)`` a fresh metric fed every observation ``k``
of ``n`` with the explicit weight ``alpha^(n-k)`` (``prequential-error-fading-factors.txt``,
Algorithms 2 and 3). Streams are random, with classes appearing mid-stream. Identities:
a window at least as long as the stream, and a fading factor of 1, are the whole history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.metrics import (
    AUC,
    MAE,
    RMSE,
    Accuracy,
    CohenKappa,
    ConfusionMatrix,
    Faded,
    GMean,
    KappaM,
    KappaPlus,
    KappaTemporal,
    Mean,
    Rolling,
)
from streameval.pipeline.metrics.comparison import DisagreementCounts, LossRatio


class KappaSE(CohenKappa):
    """Cohen's kappa standard error (eq. 11), which also reads the effective ``n``."""

    def get(self) -> float:
        return self.se


class KappaZ(CohenKappa):
    def get(self) -> float:
        return self.z


CLASSIFICATION = [Accuracy, CohenKappa, KappaSE, KappaZ, KappaTemporal, KappaM, KappaPlus, GMean]
SUMS: list[Callable[[], Any]] = [Mean, MAE, RMSE, LossRatio, DisagreementCounts]


@st.composite
def label_rows(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """(y, y_pred, y_per, y_maj): one class more every 10 rows, None predictions."""
    raw = draw(
        st.lists(
            st.tuples(st.integers(0, 9), st.integers(-1, 9), st.booleans(), st.booleans()),
            min_size=1,
            max_size=60,
        )
    )
    rows, previous = [], None
    for i, (y, p, per, maj) in enumerate(raw):
        k = 1 + i // 10
        label = f"c{y % k}"
        pred = None if p < 0 else f"c{p % (k + 1)}"
        rows.append((label, pred, previous if per else None, "c0" if maj else None))
        previous = label
    return rows


def sums_rows(make: Callable[[], Any], draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Values on a grid of 1/8 (sums and squares exact), so that a window's reverts leave no
    rounding residue to tell apart from a wrong eviction (the residue has its own test)."""
    n = draw(st.integers(1, 60))
    floats = st.integers(0, 80).map(lambda k: k / 8)
    if make is Mean:
        return [(draw(floats),) for _ in range(n)]
    if make in (MAE, RMSE):
        y = st.integers(-40, 40).map(lambda k: k / 4)
        return [(draw(y), draw(st.one_of(st.none(), y))) for _ in range(n)]
    if make is LossRatio:
        return [(draw(st.sampled_from([0.0, 0.5])), draw(floats)) for _ in range(n)]
    return [(draw(st.booleans()), draw(st.booleans())) for _ in range(n)]


def assert_close(got: float, want: float, context: Any) -> None:
    if KappaPlus in context:  # eq. 14 is a square root: compare the product it is taken of
        got, want = got * got, want * want
    if math.isnan(want):
        assert math.isnan(got), context
    else:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9), context


def fed(make: Callable[[], Any], rows: Sequence[tuple[Any, ...]], weights=None) -> Any:
    m = make()
    for i, row in enumerate(rows):
        if weights is None:
            m.update(*row)
        else:
            m.update(*row, w=weights[i])
    return m


def check_rolling(make: Callable[[], Any], rows: list, window: int, **kw: Any) -> None:
    rolled = Rolling(make(), window, **kw)
    for t, row in enumerate(rows):
        rolled.update(*row)
        want = fed(make, rows[max(0, t + 1 - window) : t + 1]).get()
        assert_close(rolled.get(), want, (make, t))
        assert len(rolled) == min(window, t + 1)


def check_faded(make: Callable[[], Any], rows: list, alpha: float) -> None:
    faded = Faded(make(), alpha)
    for t, row in enumerate(rows):
        faded.update(*row)
        weights = [alpha ** (t - k) for k in range(t + 1)]
        assert_close(faded.get(), fed(make, rows[: t + 1], weights).get(), (make, t))


@pytest.mark.parametrize("make", CLASSIFICATION, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(rows=label_rows(), window=st.integers(1, 25), alpha=st.floats(0.3, 0.999))
def test_classification_rolling_and_faded_equal_recomputation(
    make: Callable[[], Any], rows: list, window: int, alpha: float
) -> None:
    check_rolling(make, rows, window)
    check_faded(make, rows, alpha)


@pytest.mark.parametrize("make", SUMS, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data(), window=st.integers(1, 25), alpha=st.floats(0.3, 0.999))
def test_sums_rolling_and_faded_equal_recomputation(
    make: Callable[[], Any], data: st.DataObject, window: int, alpha: float
) -> None:
    rows = sums_rows(make, data.draw)
    check_rolling(make, rows, window, rebuild=True)
    check_rolling(make, rows, window)  # also without the per-turn rebuild
    check_faded(make, rows, alpha)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=60),
    window=st.integers(1, 25),
)
def test_auc_rolling_equals_recomputation_exactly(rows: list, window: int) -> None:
    rolled = Rolling(AUC(), window)
    for t, row in enumerate(rows):
        rolled.update(*row)
        assert rolled.get() == fed(AUC, rows[max(0, t + 1 - window) : t + 1]).get()


def test_auc_cannot_be_faded() -> None:
    with pytest.raises(TypeError, match="cannot be faded"):
        Faded(AUC(), 0.9)


@pytest.mark.parametrize("make", CLASSIFICATION + SUMS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_long_window_and_alpha_one_are_the_whole_history(
    make: Callable[[], Any], data: st.DataObject
) -> None:
    rows = data.draw(label_rows()) if make in CLASSIFICATION else sums_rows(make, data.draw)
    whole = fed(make, rows).get()
    rolled, faded = Rolling(make(), len(rows)), Faded(make(), 1.0)
    for row in rows:
        rolled.update(*row)
        faded.update(*row)
    for got in (rolled.get(), faded.get()):
        assert got == whole or (math.isnan(got) and math.isnan(whole))


def test_lazy_fading_rescales_without_changing_values() -> None:
    """alpha = 0.5: the lazy weight 2^(i-1) passes 1e100 at i = 334 and is rescaled."""
    rows = [("ab"[i % 3 == 0], "ab"[i % 2], "a", "b") for i in range(400)]
    faded = Faded(KappaTemporal(), 0.5)
    for i, row in enumerate(rows):
        faded.update(*row)
        if i in (300, 340, 399):
            weights = [0.5 ** (i - k) for k in range(i + 1)]
            want = fed(KappaTemporal, rows[: i + 1], weights).get()
            assert faded.get() == pytest.approx(want, rel=1e-12)
    cm = faded.metric.cm
    assert cm.unit < 1e100 and cm.n == pytest.approx(2.0, rel=1e-12)  # N_alpha -> 1/(1-alpha)


def test_shared_confusion_matrix_counts_once() -> None:
    """Metrics reading one matrix, updated once, equal each metric on its own."""
    rows = [
        ("a", "a", None, None),
        ("a", "b", "a", "a"),  # the window of 3 starts here
        ("b", "b", "a", "a"),
        ("c", "b", "b", "a"),
    ]
    cm = ConfusionMatrix()
    shared = [make(cm) for make in (Accuracy, CohenKappa, KappaTemporal, KappaM, KappaPlus, GMean)]
    window = Rolling(cm, 3)
    for row in rows:
        window.update(*row)
    assert cm.n == 3.0
    for metric in shared:
        alone = fed(type(metric), rows[1:]).get()
        assert_close(metric.get(), alone, (type(metric),))
    # by hand on the last three rows: only (b, b) is right, No-Change and Majority are right
    # once each (the first of them): p = p_per = p_maj = 1/3
    assert shared[0].get() == pytest.approx(1 / 3)
    assert shared[2].get() == pytest.approx(0.0)
    assert shared[3].get() == pytest.approx(0.0)
    assert shared[5].recall == {"a": 0.0, "b": 1.0, "c": 0.0}


def test_window_of_equal_losses_keeps_its_sum_exactly() -> None:
    """Sums.replace nets the leaving and arriving value: equal values leave S unchanged."""
    mean = Rolling(Mean(), 3)
    for x in (0.1, 0.2, 0.7, 0.1, 0.2, 0.7, 0.1):
        mean.update(x)
    assert mean.metric.sums[0] == 0.1 + 0.2 + 0.7
