"""The two shuffles of sect. 6.9: permutations, positions kept, dependence kept or gone."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.datasets import load
from streameval.pipeline.streams.shuffle import (
    ShuffledSource,
    full_order,
    shuffle_instances,
    within_class_order,
)
from streameval.pipeline.streams.synthetic import make_synthetic


def p_same(labels: list[str]) -> float:
    return sum(a == b for a, b in itertools.pairwise(labels)) / (len(labels) - 1)


@given(st.integers(0, 200), st.integers(0, 10))
def test_full_order_is_a_permutation(n: int, seed: int) -> None:
    assert sorted(full_order(n, seed)) == list(range(n))


@given(st.lists(st.sampled_from("abc"), max_size=60), st.integers(0, 10))
def test_within_class_order_keeps_labels(labels: list[str], seed: int) -> None:
    order = within_class_order(labels, seed)
    assert sorted(order) == list(range(len(labels)))
    assert [labels[j] for j in order] == labels


def test_positions_keep_id_and_time() -> None:
    items = [Instance(str(i), 10.0 * i, {"v": float(i)}, "ab"[i % 3 == 0]) for i in range(30)]
    for kind in ("full", "within-class"):
        out = list(shuffle_instances(items, kind, seed=1))
        assert [(i.id, i.ts) for i in out] == [(i.id, i.ts) for i in items]
        assert sorted((i.x["v"], i.y) for i in out) == sorted((i.x["v"], i.y) for i in items)
        assert [i.x for i in out] != [i.x for i in items]


def test_full_shuffle_kills_dependence_within_class_keeps_it() -> None:
    spec = "markov[k=2,p_stay=0.95,n=4000,seed=1"
    plain = [i.y for i in load(spec + "]").iter_instances()]
    full = [i.y for i in load(spec + ",shuffle=full]").iter_instances()]
    within = [i.y for i in load(spec + ",shuffle=within-class]").iter_instances()]
    assert p_same(plain) > 0.93
    assert abs(p_same(full) - 0.5) < 0.05 and Counter(full) == Counter(plain)
    assert within == plain


def test_within_class_removes_drift() -> None:
    """SEA drift moves the class border; within-class shuffling spreads both concepts out."""
    spec = "sea_drift[n=4000,drift_at=2000,seed=2"
    ds = load(spec + ",shuffle=within-class]")
    assert ds.drift_points == []
    rows = list(ds.iter_instances())

    def high(part: list[Instance]) -> float:  # share of class 1 with x0 + x1 <= 9
        ones = [i for i in part if i.y == "1"]
        return sum(i.x["x0"] + i.x["x1"] <= 9 for i in ones) / len(ones)

    # variant 0 (before) has such instances, variant 1 (after) none; shuffled: both halves mixed
    assert abs(high(rows[:2000]) - high(rows[2000:])) < 0.05
    assert high(rows[2000:]) > 0.05


def test_shuffled_source_is_deterministic_and_seeded() -> None:
    base = make_synthetic("led[n=500,seed=0]").source
    a = list(ShuffledSource(base, "full", seed=5).records())
    assert a == list(ShuffledSource(base, "full", seed=5).records())
    assert a != list(ShuffledSource(base, "full", seed=6).records())
    assert [ts for ts, _ in a] == [float(i) for i in range(500)]
