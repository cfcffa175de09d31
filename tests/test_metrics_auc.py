"""PrequentialAUC against a brute-force pair count over the same window."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.metrics import PrequentialAUC


def brute_auc(window: list[tuple[float, bool]]) -> float:
    """O(d^2): positive above negative counts 1, a tie 1/2, over p * n pairs."""
    pos = [s for s, y in window if y]
    neg = [s for s, y in window if not y]
    if not pos or not neg:
        return 1.0
    # twice the credit, to stay in integers; int / int is correctly rounded
    credit2 = sum(2 if sp > sn else 1 if sp == sn else 0 for sp in pos for sn in neg)
    return float(Fraction(credit2, 2 * len(pos) * len(neg)))


def run(scores: list[float], labels: list[bool], window: int | None) -> None:
    auc = PrequentialAUC(window)
    for t, (s, y) in enumerate(zip(scores, labels, strict=True)):
        auc.update(s, y)
        lo = 0 if window is None else max(0, t + 1 - window)
        assert auc.get() == brute_auc(list(zip(scores, labels, strict=True))[lo : t + 1]), t


@pytest.mark.parametrize("window", [1, 2, 3, 17, 1000, None])
def test_matches_brute_force_with_many_ties(window: int | None) -> None:
    rng = random.Random(window or 0)
    n = 300
    labels = [rng.random() < 0.3 for _ in range(n)]
    # scores rounded to one decimal: ties within and across classes everywhere
    scores = [round(min(1.0, max(0.0, rng.gauss(0.6 if y else 0.4, 0.25))), 1) for y in labels]
    run(scores, labels, window)


def test_hand_computed_paper_ordering_and_ties() -> None:
    auc = PrequentialAUC(window=3)
    auc.update(0.8, True)
    assert auc.get() == 1.0  # no negative yet
    auc.update(0.8, False)
    assert auc.get() == 0.5  # one tied pair
    auc.update(0.2, True)
    assert auc.get() == 0.25  # (1/2 + 0) / (2 * 1)
    auc.update(0.1, False)  # (0.8, +) leaves: 0.2 > 0.1 -> 1, 0.2 < 0.8 -> 0
    assert auc.get() == 0.5
    assert auc.counts == (1, 2)
    auc.update(0.5, False)  # (0.8, -) leaves: window 0.2+, 0.1-, 0.5-
    assert auc.get() == 0.5
    auc.update(0.0, False)  # (0.2, +) leaves: no positive -> 1 (prequential-auc.txt, l. 479)
    assert auc.get() == 1.0


def test_no_negatives_is_one_and_empty_is_one() -> None:
    auc = PrequentialAUC(window=2)
    assert auc.get() == 1.0
    for s in (0.1, 0.9, 0.3):
        auc.update(s, True)
    assert auc.get() == 1.0


def test_whole_history_and_validation() -> None:
    auc = PrequentialAUC(window=None)
    for s, y in [(0.9, True), (0.1, False)] * 600:  # never evicted
        auc.update(s, y)
    auc.update(0.95, False)
    assert auc.counts == (600, 601)
    assert auc.get() == (600 * 600) / (600 * 601)
    with pytest.raises(ValueError):
        auc.update(float("nan"), True)
    with pytest.raises(ValueError):
        PrequentialAUC(window=0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=60),
    st.one_of(st.none(), st.integers(1, 12)),
)
def test_property_equals_brute_force(rows: list[tuple[int, bool]], window: int | None) -> None:
    scores = [s / 5 for s, _ in rows]
    labels = [y for _, y in rows]
    run(scores, labels, window)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=40))
def test_property_label_swap_symmetry(rows: list[tuple[int, bool]]) -> None:
    """AUC(scores, labels) == AUC(-scores, not labels), including the one-class windows."""
    a, b = PrequentialAUC(window=5), PrequentialAUC(window=5)
    for s, y in rows:
        a.update(s, y)
        b.update(-s, not y)
        assert a.get() == b.get()
