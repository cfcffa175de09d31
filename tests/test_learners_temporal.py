"""Temporally Augmented (eq. 4) and Temporal Correction (eq. 3) wrappers, by hand.

The fake base learner records every instance it is given, so the tests check
the exact features the wrappers build from a stream context driven by hand.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import pytest
from streameval.pipeline.learners.base import StreamContext, bind_context
from streameval.pipeline.learners.baselines import Majority
from streameval.pipeline.learners.temporal import MISSING, TemporalCorrection, TemporallyAugmented


class Recorder:
    """A base learner that predicts ``{x["guess"]: 1.0}`` (or a fixed answer) and records."""

    def __init__(self, fixed: dict[Hashable, float] | None = None) -> None:
        self.fixed = fixed
        self.learned: list[tuple[int | None, dict[str, Any], Hashable]] = []
        self.predicted: list[tuple[int | None, dict[str, Any]]] = []

    def learn_one(self, x: dict[str, Any], y: Hashable, *, at: int | None = None) -> None:
        self.learned.append((at, dict(x), y))

    def predict_proba_one(self, x: dict[str, Any], *, at: int | None = None) -> dict:
        self.predicted.append((at, dict(x)))
        if self.fixed is not None:
            return dict(self.fixed)
        return {x["guess"]: 1.0} if "guess" in x else {}

    def predict_proba_many(
        self, xs: Sequence[dict[str, Any]], *, at: Sequence[int] | None = None
    ) -> list[dict]:
        ats = list(at) if at is not None else [None] * len(xs)
        return [self.predict_proba_one(x, at=i) for x, i in zip(xs, ats, strict=True)]


def lags_of(x: dict[str, Any]) -> tuple[str, ...]:
    return tuple(x[k] for k in sorted(k for k in x if k.startswith("_y_lag")))


def bound(model: Any, context: StreamContext) -> Any:
    """``model`` bound to ``context``, as the experiment does."""
    bind_context(model, context)
    return model


# ------------------------------------------------------------ Temporally Augmented


def test_standalone_uses_its_own_learned_labels() -> None:
    base = Recorder()
    model = TemporallyAugmented(base, n_labels=2)
    for y in ["UP", "DOWN", "DOWN"]:
        model.predict_proba_one({"a": 1.0})
        model.learn_one({"a": 1.0}, y)
    got = [lags_of(x) for _, x in base.predicted]
    assert got == [(MISSING, MISSING), ("UP", MISSING), ("DOWN", "UP")]
    assert [lags_of(x) for _, x, _ in base.learned] == got  # same features at training
    assert base.learned[2][1] == {"a": 1.0, "_y_lag1": "DOWN", "_y_lag2": "UP"}


def test_labels_become_strings_and_inputs_are_not_mutated() -> None:
    base = Recorder()
    model = TemporallyAugmented(base)
    x = {"a": 1.0}
    model.learn_one(x, 7)
    model.predict_proba_one(x)
    assert x == {"a": 1.0}
    assert base.predicted[-1][1]["_y_lag1"] == "7"


def _delayed_run(fill: str) -> tuple[Recorder, TemporallyAugmented, StreamContext]:
    """A crafted stream with delayed, out-of-order labels (see the test below)."""
    ctx = StreamContext()
    base = Recorder()
    model = bound(TemporallyAugmented(base, n_labels=2, fill=fill), ctx)  # type: ignore[arg-type]
    xs = {i: {"f": float(i), "guess": g} for i, g in enumerate("ABCD")}

    a0 = ctx.arrive()
    model.predict_proba_one(xs[a0], at=a0)  # first prediction of 0
    a1 = ctx.arrive()
    model.predict_proba_one(xs[a1], at=a1)
    a2 = ctx.arrive()
    model.predict_proba_one(xs[a2], at=a2)
    # the label of instance 1 arrives first: test-then-train
    model.predict_proba_one(xs[1], at=1)
    model.learn_one(xs[1], "b", at=1)
    ctx.receive(1, "b")
    a3 = ctx.arrive()
    model.predict_proba_one(xs[a3], at=a3)
    # then the label of instance 0
    model.predict_proba_one(xs[0], at=0)
    model.learn_one(xs[0], "a", at=0)
    ctx.receive(0, "a")
    # re-prediction of the pending instances, given out of order on purpose
    model.predict_proba_many([xs[3], xs[2]], at=[3, 2])
    return base, model, ctx


def test_fill_received_reads_the_most_recent_labels_at_call_time() -> None:
    base, _, _ = _delayed_run("received")
    predicted = [(at, lags_of(x)) for at, x in base.predicted]
    assert predicted == [
        (0, ("?", "?")),
        (1, ("?", "?")),
        (2, ("?", "?")),
        (1, ("?", "?")),  # test-then-train of 1: nothing received yet
        (3, ("b", "?")),
        (0, ("b", "?")),  # the label of a *later* instance, the newest one received
        (3, ("a", "b")),  # re-prediction: newest first
        (2, ("a", "b")),
    ]
    learned = [(at, lags_of(x), y) for at, x, y in base.learned]
    assert learned == [(1, ("?", "?"), "b"), (0, ("b", "?"), "a")]


def test_fill_predicted_uses_true_labels_else_own_predictions() -> None:
    base, model, _ = _delayed_run("predicted")
    predicted = [(at, lags_of(x)) for at, x in base.predicted]
    assert predicted == [
        (0, ("?", "?")),
        (1, ("A", "?")),  # instance 0 not labelled: its own prediction "A"
        (2, ("B", "A")),
        (1, ("A", "?")),
        (3, ("C", "b")),  # 2 predicted "C", 1 labelled "b"
        (0, ("?", "?")),  # nothing arrived before 0
        (2, ("b", "a")),  # re-prediction in arrival order: both predecessors labelled
        (3, ("C", "b")),
    ]
    learned = [(at, lags_of(x), y) for at, x, y in base.learned]
    assert learned == [(1, ("A", "?"), "b"), (0, ("?", "?"), "a")]
    # predictions of labelled instances are forgotten, of pending ones kept
    assert sorted(model._predicted) == [2, 3]


def test_many_returns_answers_in_the_order_asked() -> None:
    ctx = StreamContext()
    model = bound(TemporallyAugmented(Recorder(), fill="predicted"), ctx)
    xs = [{"guess": g} for g in "PQR"]
    ats = [ctx.arrive() for _ in xs]
    out = model.predict_proba_many([xs[2], xs[0], xs[1]], at=[ats[2], ats[0], ats[1]])
    assert out == [{"R": 1.0}, {"P": 1.0}, {"Q": 1.0}]


def test_fill_predicted_memory_is_bounded() -> None:
    ctx = StreamContext()
    model = bound(TemporallyAugmented(Recorder(), fill="predicted", max_predictions=3), ctx)
    for _ in range(10):
        at = ctx.arrive()
        model.predict_proba_one({"guess": "g"}, at=at)
    assert sorted(model._predicted) == [7, 8, 9]


def test_context_is_asked_to_keep_enough_labels() -> None:
    ctx = StreamContext(max_recent=1)
    model = TemporallyAugmented(Recorder(), n_labels=3)
    model.bind(ctx)
    for y in "abcd":
        ctx.receive(ctx.arrive(), y)
    assert model.previous_labels() == ["d", "c", "b"]


@pytest.mark.parametrize(
    "kwargs", [{"n_labels": 0}, {"n_labels": True}, {"fill": "guess"}, {"max_predictions": 0}]
)
def test_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        TemporallyAugmented(Recorder(), **kwargs)


# ------------------------------------------------------------ Temporal Correction


def _by_hand(labels: list[str], alpha: float, base: dict[str, float]) -> dict[str, float]:
    """Eq. 3 with closed-form exponentially weighted estimates (no recursion)."""
    f = 1.0 - alpha
    n = len(labels)
    weights = [f ** (n - 1 - t) for t in range(n)]
    prior = {c: sum(w for w, y in zip(weights, labels, strict=True) if y == c) for c in base}
    total = sum(weights)
    prior = {c: v / total for c, v in prior.items()}
    previous = labels[-1]
    out_of_prev = [labels[t] for t in range(1, n) if labels[t - 1] == previous]
    m = len(out_of_prev)
    tw = [f ** (m - 1 - k) for k in range(m)]
    trans = {
        c: sum(w for w, y in zip(tw, out_of_prev, strict=True) if y == c) / sum(tw) for c in base
    }
    scores = {c: base[c] * trans[c] / prior[c] for c in base}
    z = sum(scores.values())
    return {c: s / z for c, s in scores.items()}


def test_correction_on_a_crafted_two_class_sequence() -> None:
    labels = ["A", "A", "B", "A", "B", "B"]
    base = {"A": 0.6, "B": 0.4}
    model = TemporalCorrection(Recorder(fixed=base), alpha=0.1)
    for y in labels:
        model.learn_one({}, y)
    # priors: weights 0.9^5 .. 0.9^0, P(A) = (0.59049 + 0.6561 + 0.81) / 4.68559
    assert model.prior("A") == pytest.approx(2.05659 / 4.68559)
    # transitions out of B: B->A then B->B, weights 0.9 and 1
    assert model.transition("B", "A") == pytest.approx(0.9 / 1.9)
    assert model.transition("B", "B") == pytest.approx(1 / 1.9)
    expected = _by_hand(labels, 0.1, base)
    got = model.predict_proba_one({})
    assert got == pytest.approx(expected, rel=1e-6)
    assert got == pytest.approx({"A": 0.633127, "B": 0.366873}, abs=1e-6)
    assert sum(got.values()) == pytest.approx(1.0)
    assert model.predict_proba_many([{}, {}]) == [got, got]


def test_correction_reads_the_context_in_label_arrival_order() -> None:
    ctx = StreamContext()
    model = bound(TemporalCorrection(Recorder(fixed={"A": 0.5, "B": 0.5}), alpha=0.5), ctx)
    ats = [ctx.arrive() for _ in range(4)]
    # labels arrive out of order: 1 (A), 0 (B), 3 (B), 2 (A)
    for at, y in [(1, "A"), (0, "B"), (3, "B"), (2, "A")]:
        model.learn_one({}, y, at=ats[at])
        ctx.receive(ats[at], y)
    # arrival-order transitions: A->B, B->B, B->A; the newest label is A
    assert model.previous_label() == "A"
    assert model.transition("B", "B") == pytest.approx(1 / 3)  # weights 0.5, 1 -> B, A
    assert model.transition("A", "B") == pytest.approx(1.0)
    proba = model.predict_proba_one({}, at=ats[-1])
    assert proba["B"] > 0.99  # after A, only B was ever seen


def test_correction_without_evidence_leaves_the_base_alone() -> None:
    base = {"A": 0.7, "B": 0.3}
    model = TemporalCorrection(Recorder(fixed=base))
    assert model.predict_proba_one({}) == base  # no label yet
    model.learn_one({}, "A")
    assert model.predict_proba_one({}) == base  # no transition out of A yet
    assert TemporalCorrection(Recorder(fixed={})).predict_proba_one({}) == {}


def test_correction_unseen_and_zero_classes_do_not_divide_by_zero() -> None:
    model = TemporalCorrection(Recorder(fixed={"A": 0.5, "B": 0.25, "C": 0.25}), alpha=0.5)
    for y in ["A", "A", "B"]:
        model.learn_one({}, y)
    # previous B has no transition yet -> unchanged
    assert model.predict_proba_one({}) == {"A": 0.5, "B": 0.25, "C": 0.25}
    model.learn_one({}, "A")  # B -> A
    proba = model.predict_proba_one({})
    # previous A: A->A then A->B. C was never seen: factor (0+eps)/(0+eps) = 1
    assert set(proba) == {"A", "B", "C"}
    assert all(0.0 <= p <= 1.0 for p in proba.values())
    assert sum(proba.values()) == pytest.approx(1.0)
    # a base that puts all its mass on a class never seen after A
    zero = TemporalCorrection(Recorder(fixed={"Z": 1.0}), alpha=0.5)
    for y in ["A", "A"]:
        zero.learn_one({}, y)
    assert zero.predict_proba_one({}) == {"Z": 1.0}
    # scores summing to zero: the base answer comes back unchanged
    flat = TemporalCorrection(Recorder(fixed={"A": 0.0, "B": 0.0}), alpha=0.5)
    for y in ["A", "B", "A"]:
        flat.learn_one({}, y)
    assert flat.predict_proba_one({}) == {"A": 0.0, "B": 0.0}


def test_correction_with_new_class_mid_stream() -> None:
    model = TemporalCorrection(Majority(), alpha=0.01)
    for y in ["a"] * 20 + ["b"] * 3 + ["new"] + ["new"]:
        model.predict_proba_one({})
        model.learn_one({}, y)
    proba = model.predict_proba_one({})
    assert set(proba) == {"a", "b", "new"}
    assert max(proba, key=proba.__getitem__) == "new"


@pytest.mark.parametrize("alpha", [0.0, -0.1, 1.5])
def test_correction_bad_alpha(alpha: float) -> None:
    with pytest.raises(ValueError):
        TemporalCorrection(Majority(), alpha=alpha)
