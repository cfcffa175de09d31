"""Batched ``predict_proba_many`` gives what a loop over ``predict_proba_one`` gives.

Naive Bayes (``MixedNB``) and river's Hoeffding trees predict whole batches
with numpy (``streameval.pipeline.learners.tree_batch``); the temporal wrappers pass batches
through. Everything is checked against the loop on prefixes of the real
streams: same classes in the same order, probabilities within 1e-9
(relative), the same :func:`~streameval.pipeline.learners.base.argmax`.
"""

from __future__ import annotations

import itertools
import math
import pickle
import random
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import pytest
from river.tree.nodes.hatc_nodes import AdaBranchClassifier
from streameval.pipeline.learners.base import StreamContext, argmax
from streameval.pipeline.learners.frame import NumericFrame
from streameval.pipeline.learners.naive_bayes import MixedNB
from streameval.pipeline.learners.river_adapter import RiverClassifier, clean
from streameval.pipeline.learners.spec import build_learner, learner_lags
from streameval.pipeline.learners.temporal import TemporalCorrection, TemporallyAugmented
from streameval.pipeline.learners.tree_batch import TreeBatch
from streameval.pipeline.streams.datasets import load

Row = tuple[dict[str, Any], str]
Proba = dict[Hashable, float]

_ROWS: dict[tuple[str, int], list[Row]] = {}


def rows(data_dir: Path, name: str, n: int) -> list[Row]:
    """The first ``n`` instances of a real stream (read once per test session)."""
    key = (name, n)
    if key not in _ROWS:
        dataset = load(name, data_dir=data_dir)
        _ROWS[key] = [(i.x, str(i.y)) for i in itertools.islice(dataset.iter_instances(), n)]
    return _ROWS[key]


def trained(spec: str, data: Sequence[Row]) -> tuple[Any, StreamContext]:
    """A learner for ``spec`` after learning ``data`` in stream order, and its context."""
    context = StreamContext()
    context.require_recent(learner_lags(spec))
    learner = build_learner(spec, context=context)
    for x, y in data:
        at = context.arrive()
        learner.learn_one(x, y, at=at)
        context.receive(at, y)
    return learner, context


def assert_same(loop: list[Proba], batch: list[Proba]) -> int:
    """Batch answers equal the loop's; returns how many are equal to the last bit."""
    assert len(loop) == len(batch)
    exact = 0
    for one, many in zip(loop, batch, strict=True):
        assert list(one) == list(many)
        assert all(type(p) is float for p in many.values())
        for label, p in one.items():
            assert many[label] == pytest.approx(p, rel=1e-9, abs=1e-300)
        assert argmax(one) == argmax(many)
        exact += one == many
    return exact


def compare(learner: Any, xs: list[dict[str, Any]], start: int = 0) -> int:
    """Loop and batch on the pending instances ``xs`` (arrival indices from ``start``)."""
    ats = list(range(start, start + len(xs)))
    loop = [learner.predict_proba_one(x, at=at) for x, at in zip(xs, ats, strict=True)]
    return assert_same(loop, learner.predict_proba_many(xs, at=ats))


def damaged(xs: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Copies of ``xs`` where some features are NaN, infinite, None or absent."""
    rng = random.Random(seed)
    out = [dict(x) for x in xs]
    for x in out[::5]:
        x[rng.choice(list(x))] = rng.choice([math.nan, math.inf, -math.inf, None])
    for x in out[2::7]:
        del x[rng.choice(list(x))]
    return out


# ------------------------------------------------------------ real streams

COVTYPE_SPECS = [
    "nb",
    "ht",
    "hat",
    "ta:nb",
    "ta:ht",
    "tc:nb",
    "ht[leaf_prediction=nb]",
    "ht[leaf_prediction=mc]",
    "hat[leaf_prediction=nb]",
    "hat[leaf_prediction=mc]",
]


@pytest.mark.parametrize("spec", COVTYPE_SPECS)
def test_covtype(spec: str, data_dir: Path) -> None:
    data = rows(data_dir, "covtype", 3300)
    learner, _ = trained(spec, data[:3000])
    xs = damaged([x for x, _ in data[3000:]], seed=1)
    exact = compare(learner, xs, start=3000)
    if spec.split(":")[-1].startswith(("ht", "hat")):
        # Same operations in the same order, but for ``(x - mu) ** 2`` (libm's pow)
        # computed as ``d * d``: all but a few answers are equal to the last bit.
        assert exact >= 0.99 * len(xs)


@pytest.mark.parametrize(
    "spec",
    ["nb", "ht[grace_period=30]", "hat[grace_period=30]", "ta:nb", "ta:ht[grace_period=30]"],
)
@pytest.mark.parametrize("name", ["electricity", "airlines"])
def test_deeper_trees_and_str_features(spec: str, name: str, data_dir: Path) -> None:
    """Trees with numeric and nominal splits, missing split features, unseen categories."""
    data = rows(data_dir, name, 3400)
    learner, _ = trained(spec, data[:3000])
    xs = damaged([x for x, _ in data[3000:]], seed=2)
    for x in xs[1::9]:
        for key, value in list(x.items()):
            if isinstance(value, str):
                x[key] = "never-seen"
    compare(learner, xs, start=3000)


def test_hat_alternate_trees(data_dir: Path) -> None:
    data = rows(data_dir, "electricity", 6300)
    learner, _ = trained("hat[grace_period=20]", data[:6000])
    model = learner.model
    alternates = [
        node
        for node in model._root.iter_dfs()
        if isinstance(node, AdaBranchClassifier) and node._alternate_tree
    ]
    assert alternates, "the test needs a tree with alternate subtrees"
    xs = damaged([x for x, _ in data[6000:]], seed=3)
    routes = [TreeBatch._route_adaptive(model._root, clean(x), {}) for x in xs]
    assert any(route is not None and len(route) > 1 for route in routes)
    compare(learner, xs, start=6000)


def test_predictions_track_learning(data_dir: Path) -> None:
    """Interleaved learning: cached leaf parameters follow every change of the tree."""
    data = rows(data_dir, "electricity", 2400)
    for spec in ("ht[grace_period=20]", "hat[grace_period=20]", "nb"):
        learner, _ = trained(spec, data[:200])
        for start in range(200, 2200, 40):
            for at, (x, y) in enumerate(data[start : start + 40], start=start):
                learner.learn_one(x, y, at=at)
            pending = [x for x, _ in data[start + 40 : start + 100]]
            compare(learner, pending, start=start + 40)


def test_river_state_evolves_as_after_a_loop(data_dir: Path) -> None:
    """River's nominal observers make a count table for every class a naive
    Bayes prediction asks about; the batch does the same, so that both models
    keep learning with the same dict orders."""
    spec = "ht[grace_period=20,leaf_prediction=nb]"
    # Electricity with four classes (direction and time of day): splits, a str feature (day).
    data = [
        (x, y + ("-night" if x["period"] < 0.3 else "-day"))
        for x, y in rows(data_dir, "electricity", 2000)
    ]
    by_loop, _ = trained(spec, data[:500])
    by_batch, _ = trained(spec, data[:500])
    for start in range(500, 2000, 5):
        pending = [x for x, _ in data[start : start + 20]]
        loop = [by_loop.predict_proba_one(x) for x in pending]
        assert_same(loop, by_batch.predict_proba_many(pending))
        for x, y in data[start : start + 5]:
            by_loop.learn_one(x, y)
            by_batch.learn_one(x, y)
    assert observer_tables(by_batch.model) == observer_tables(by_loop.model)


def observer_tables(model: Any) -> list[tuple[Hashable, list[Hashable]]]:
    """For every leaf and nominal observer: the classes of its count tables, in order."""
    out = []
    for leaf in model._root.iter_leaves():
        for feature, splitter in (leaf.splitters or {}).items():
            if hasattr(splitter, "_att_values"):
                out.append((feature, list(splitter._att_dist_per_class)))
    assert out
    return out


# ------------------------------------------------------------ edge cases


@pytest.mark.parametrize("spec", ["nb", "ht", "hat", "ta:nb", "ta:ht", "tc:nb", "tc:ht"])
def test_empty_model_single_instance_and_empty_batch(spec: str, data_dir: Path) -> None:
    data = rows(data_dir, "airlines", 40)
    learner, _ = trained(spec, [])
    xs = [x for x, _ in data]
    assert learner.predict_proba_many(xs, at=list(range(len(xs)))) == [{} for _ in xs]
    assert learner.predict_proba_many([], at=[]) == []
    learner, _ = trained(spec, data[:30])
    for x in damaged(xs[30:], seed=4):
        compare(learner, [x], start=30)


@pytest.mark.parametrize("spec", ["nb", "ht[grace_period=20]", "hat[grace_period=20]", "ta:nb"])
def test_a_class_appears(spec: str, data_dir: Path) -> None:
    data = rows(data_dir, "electricity", 1200)
    learner, _ = trained(spec, data[:1000])
    xs = [x for x, _ in data[1000:]]
    compare(learner, xs, start=1000)
    for at, (x, _) in enumerate(data[1000:1010], start=1000):
        learner.learn_one(x, "NEW", at=at)  # a third class, seen ten times
    compare(learner, xs, start=1000)
    assert "NEW" in learner.predict_proba_many(xs[:1], at=[1000])[0]


def test_values_of_other_types_are_left_to_river() -> None:
    model = RiverClassifier(MixedNB())
    rich = [
        ({"a": 1, "b": True, "c": "u"}, "x"),
        ({"a": 3, "b": False, "c": "v"}, "y"),
        ({"a": 2, "b": True, "c": "u"}, "x"),
        ({"a": 5, "b": False, "c": "v"}, "y"),
    ]
    for x, y in rich:
        model.learn_one(x, y)
    xs = [{"a": 2.5, "b": True}, {"a": 10**30, "c": "w"}, {"a": [1, 2]}, {"b": None, "c": "u"}]
    assert_same([model.predict_proba_one(x) for x in xs], model.predict_proba_many(xs))


def test_pickled_learner_predicts_the_same(data_dir: Path) -> None:
    data = rows(data_dir, "electricity", 1300)
    learner, _ = trained("hat[grace_period=30]", data[:1200])
    xs = [x for x, _ in data[1200:]]
    before = learner.predict_proba_many(xs)  # fills the leaf cache
    copy = pickle.loads(pickle.dumps(learner))
    assert copy._trees._cache == {}
    assert copy.predict_proba_many(xs) == before


# ------------------------------------------------------------ wrappers pass batches through


class Counting:
    """A base learner that counts ``predict_proba_many`` calls and answers by feature ``g``."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def learn_one(self, x: dict[str, Any], y: Hashable, *, at: int | None = None) -> None:
        pass

    def predict_proba_one(self, x: dict[str, Any], *, at: int | None = None) -> Proba:
        return {"a": x["g"], "b": 1.0 - x["g"]}

    def predict_proba_many(
        self, xs: Sequence[dict[str, Any]], *, at: Sequence[int] | None = None
    ) -> list[Proba]:
        self.calls.append(list(xs))
        return [self.predict_proba_one(x) for x in xs]


def test_wrappers_make_one_base_call_per_batch() -> None:
    context = StreamContext(max_recent=2)
    base = Counting()
    model = TemporalCorrection(TemporallyAugmented(base, n_labels=2))
    model.bind(context)  # binds the inner wrapper too
    for at, y in enumerate(["a", "b", "b", "a"]):
        context.arrive()
        model.learn_one({"g": 0.5}, y, at=at)
        context.receive(at, y)
    xs = [{"g": 0.1 * k} for k in range(1, 10)]
    ats = list(range(4, 13))
    many = model.predict_proba_many(xs, at=ats)
    assert len(base.calls) == 1
    assert [x["_y_lag1"] for x in base.calls[0]] == ["a"] * len(xs)
    assert [x["_y_lag2"] for x in base.calls[0]] == ["b"] * len(xs)
    assert many == [model.predict_proba_one(x, at=at) for x, at in zip(xs, ats, strict=True)]


def test_numeric_frame_reads_numbers_strings_and_odd_values() -> None:
    frame = NumericFrame([{"a": 1, "s": "x", "b": 2.5}, {"b": True, "a": -1.0}, {"o": None}])
    assert frame.index == {"a": 0, "b": 1}
    assert frame.values.tolist() == [[1.0, 2.5], [-1.0, 1.0], [0.0, 0.0]]
    assert frame.present.tolist() == [[True, True], [True, True], [False, False]]
    assert frame.strings == [[("s", "x")], [], []]
    assert frame.odd and frame.text == {"s"}
