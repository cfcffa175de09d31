"""The learners as river estimators: river's own checks, river's own evaluation loop,
``clone()``, ``as_learner`` and binding to a stream context.

River's ``check_estimator`` picks its checks with ``river.checks.yield_checks``
from the estimator's type (classifier or regressor, wrapper, multiclass,
stochastic...). Every check it picks applies to these learners and is run:
none is skipped (``_unit_test_skips`` is empty for all of them). The
baselines ignore the features, which the feature checks (shuffled, emerging,
disappearing features) allow: their predictions must not depend on them.

Left out: adapters around :func:`~streameval.pipeline.learners.river_adapter.with_one_hot`
pipelines. River's checks fail on the pipeline itself (``seed_params`` takes the
``SelectType`` parameter ``(numbers.Number,)`` for a class parameter and indexes past its
end), whatever wraps it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable
from typing import Any

import pytest
from river import (
    base,
    checks,
    datasets,
    dummy,
    evaluate,
    linear_model,
    metrics,
    naive_bayes,
    preprocessing,
    tree,
)
from streameval.pipeline.learners import (
    Majority,
    MixedNB,
    NoChange,
    RiverClassifier,
    RiverRegressor,
    StreamContext,
    TargetMean,
    TemporalCorrection,
    TemporallyAugmented,
    as_learner,
    bind_context,
    build_learner,
)
from streameval.pipeline.learners.base import argmax
from streameval.pipeline.learners.naive_bayes import PointMassGaussianNB
from streameval.pipeline.learners.spec import CLASSIFIERS, REGRESSORS

PHISHING = list(datasets.Phishing())  # shipped with river: 1,250 instances, bool labels


def estimators() -> list[Any]:
    return [
        NoChange(),
        Majority(),
        Majority(window=10),
        TargetMean(),
        TargetMean(window=5),
        MixedNB(),
        RiverClassifier(naive_bayes.GaussianNB()),
        RiverClassifier(tree.HoeffdingTreeClassifier()),
        RiverClassifier(MixedNB()),
        RiverRegressor(tree.HoeffdingTreeRegressor()),
        RiverRegressor(preprocessing.StandardScaler() | linear_model.LinearRegression()),
        TemporallyAugmented(tree.HoeffdingTreeClassifier()),
        TemporallyAugmented(MixedNB(), n_labels=2, fill="predicted"),
        TemporalCorrection(naive_bayes.GaussianNB()),
        TemporalCorrection(tree.HoeffdingTreeClassifier(), alpha=0.01),
        TemporallyAugmented(TemporalCorrection(tree.HoeffdingTreeClassifier())),
    ]


@pytest.mark.parametrize("model", estimators(), ids=str)
def test_river_check_estimator(model: Any) -> None:
    assert model._unit_test_skips() == set()
    names = {check.__name__ for check in checks.yield_checks(model)}
    # the checks that matter most here are among those picked
    assert {"check_clone_is_idempotent", "check_repr_roundtrips_clone"} <= names
    assert {"check_get_params_matches_signature", "check_clone_is_independent"} <= names
    if isinstance(model, base.Classifier):
        assert {"check_predict_proba_one", "check_classifier_tracks_seen_labels"} <= names
    assert ("check_wrapper_accepts_kwargs" in names) == isinstance(model, base.Wrapper)
    checks.check_estimator(model)


@pytest.mark.parametrize(
    "cls", [RiverClassifier, RiverRegressor, TemporallyAugmented, TemporalCorrection]
)
def test_wrappers_have_unit_test_params(cls: type) -> None:
    params = list(cls._unit_test_params())
    assert len(params) == 2
    for p in params:
        model = cls(**p)
        assert model.model is p["model"] and isinstance(model, base.Wrapper)


# ------------------------------------------------------------ river's progressive_val_score


def accuracy(model: Any, data: list[tuple[dict[str, Any], Hashable]]) -> float:
    return evaluate.progressive_val_score(data, model, metrics.Accuracy()).get()


def test_nochange_accuracy_is_the_share_of_repeated_labels() -> None:
    labels = list("AABBBABAAA")
    data = [({"t": float(t)}, y) for t, y in enumerate(labels)]
    # pairs: AA AB BB BB BA AB BA AA AA -> 5 of 9 repeat (the first instance has no prediction)
    assert accuracy(NoChange(), data) == pytest.approx(5 / 9)
    ys = [y for _, y in PHISHING]
    repeated = sum(a == b for a, b in itertools.pairwise(ys)) / (len(ys) - 1)
    assert accuracy(NoChange(), PHISHING) == pytest.approx(repeated)
    assert accuracy(NoChange(), PHISHING) == accuracy(dummy.NoChangeClassifier(), PHISHING)


def test_majority_accuracy_by_hand() -> None:
    data = [({}, y) for y in "ABBAAB"]
    # predictions: none, A, A (1-1 tie: smallest), B (2-1), A (2-2 tie), A (3-2)
    # against        B, B,                    A,         A,           B: right at t=4 only
    assert accuracy(Majority(), data) == pytest.approx(1 / 5)
    # window 1 is NoChange
    assert accuracy(Majority(window=1), PHISHING) == accuracy(NoChange(), PHISHING)


def test_mixed_nb_is_the_point_mass_gaussian_nb_on_numbers_in_river_loop() -> None:
    expected = accuracy(PointMassGaussianNB(), PHISHING)
    assert 0.85 < expected < 0.9
    assert accuracy(MixedNB(), PHISHING) == expected
    assert accuracy(as_learner(MixedNB()), PHISHING) == expected
    assert accuracy(build_learner("nb", context=None), PHISHING) == expected


def test_temporally_augmented_equals_a_loop_that_appends_the_previous_label() -> None:
    ht, hits, scored, previous = tree.HoeffdingTreeClassifier(), 0, 0, None
    for x, y in PHISHING:
        z = {**x, "_y_lag1": "?" if previous is None else str(previous)}
        y_pred = ht.predict_one(z)
        if y_pred is not None:
            hits += y_pred == y
            scored += 1
        ht.learn_one(z, y)
        previous = y
    got = accuracy(TemporallyAugmented(tree.HoeffdingTreeClassifier()), PHISHING)
    assert got == hits / scored
    assert got != accuracy(tree.HoeffdingTreeClassifier(), PHISHING)  # the lag is used


def test_temporal_correction_equals_eq_3_by_hand() -> None:
    alpha, eps = 0.01, TemporalCorrection.eps
    keep = 1.0 - alpha
    ht = tree.HoeffdingTreeClassifier()
    prior: dict[Hashable, float] = {}
    rows: dict[Hashable, dict[Hashable, float]] = {}
    n, row_n = 0.0, {}
    hits = scored = 0
    previous = None
    for x, y in PHISHING:
        proba = ht.predict_proba_one(x)
        if proba and previous is not None and row_n.get(previous):
            scores = {
                c: p
                * (rows[previous].get(c, 0.0) / row_n[previous] + eps)
                / (prior.get(c, 0.0) / n + eps)
                for c, p in proba.items()
            }
            total = sum(scores.values())
            proba = {c: s / total for c, s in scores.items()}
        if proba:
            hits += argmax(proba) == y
            scored += 1
        for c in prior:
            prior[c] *= keep
        prior[y] = prior.get(y, 0.0) + 1.0
        n = keep * n + 1.0
        if previous is not None:
            row = rows.setdefault(previous, {})
            for c in row:
                row[c] *= keep
            row[y] = row.get(y, 0.0) + 1.0
            row_n[previous] = keep * row_n.get(previous, 0.0) + 1.0
        ht.learn_one(x, y)
        previous = y
    got = accuracy(TemporalCorrection(tree.HoeffdingTreeClassifier(), alpha=alpha), PHISHING)
    assert got == hits / scored
    assert got != accuracy(tree.HoeffdingTreeClassifier(), PHISHING)


def test_regression_baseline_in_river_loop() -> None:
    data = [({}, y) for y in (1.0, 3.0, 2.0, 6.0)]
    # predictions: none, 1, 2, 2 -> absolute errors 2, 0, 4
    got = evaluate.progressive_val_score(data, TargetMean(), metrics.MAE()).get()
    assert got == pytest.approx(2.0)
    window = evaluate.progressive_val_score(data, TargetMean(window=1), metrics.MAE()).get()
    assert window == pytest.approx((2.0 + 1.0 + 4.0) / 3)


# ------------------------------------------------------------ clone


SPECS = [
    *sorted(CLASSIFIERS),
    "majority[window=20]",
    "ta:ht",
    "ta3:ht",
    "ta2[fill=predicted]:nb",
    "tc[alpha=0.01]:nb",
    "ta:tc:knn",
    "ta:hat",
]


def _feed(learner: Any, n: int, context: StreamContext | None = None) -> list[Any]:
    """Test-then-train on the first ``n`` Phishing instances; the predicted labels."""
    out = []
    for at, (x, y) in enumerate(PHISHING[:n]):
        if context is not None:
            context.arrive()
        out.append(argmax(learner.predict_proba_one(x, at=at)))
        learner.learn_one(x, y, at=at)
        if context is not None:
            context.receive(at, y)
    return out


@pytest.mark.parametrize("spec", SPECS)
def test_clone_is_a_fresh_build(spec: str) -> None:
    context = StreamContext()
    learner = build_learner(spec, context=context, seed=7)
    _feed(learner, 150, context)
    fresh = learner.clone()
    assert type(fresh) is type(learner) and repr(fresh) == repr(learner)
    assert fresh.predict_proba_one(PHISHING[0][0], at=0) == {}
    assert getattr(fresh, "_context", None) is None  # the context is not a parameter
    # bound again, the clone does what a fresh build does, label for label
    built = build_learner(spec, context=None, seed=7)
    assert _feed(fresh, 300, built_context(fresh)) == _feed(built, 300, built_context(built))


def built_context(learner: Any) -> StreamContext:
    """A new context bound to ``learner`` (as the experiment binds a rebuilt learner)."""
    context = StreamContext()
    bind_context(learner, context)
    return context


@pytest.mark.parametrize("spec", sorted(REGRESSORS))
def test_regressor_clone(spec: str) -> None:
    learner = build_learner(spec, context=None, task="regression")
    for x, y in datasets.TrumpApproval().take(50):
        learner.learn_one(x, y)
    fresh = learner.clone()
    assert repr(fresh) == repr(learner)
    again = build_learner(spec, context=None, task="regression")
    for x, y in datasets.TrumpApproval().take(50):
        assert fresh.predict_one(x) == again.predict_one(x)
        fresh.learn_one(x, y)
        again.learn_one(x, y)


def test_params_are_the_constructor_arguments() -> None:
    ta = TemporallyAugmented(tree.HoeffdingTreeClassifier(grace_period=50), n_labels=3)
    params = ta._get_params()
    assert set(params) == {"model", "n_labels", "fill", "max_predictions"}
    assert params["n_labels"] == 3 and params["fill"] == "received"
    assert params["model"][0] is tree.HoeffdingTreeClassifier
    assert params["model"][1]["grace_period"] == 50
    assert TemporalCorrection(NoChange(), alpha=0.1)._get_params()["alpha"] == 0.1
    assert Majority(window=4).clone().window == 4
    assert ta.clone({"n_labels": 2}).n_labels == 2
    assert str(ta) == "TemporallyAugmented(HoeffdingTreeClassifier)"


# ------------------------------------------------------------ bind


class Labels:
    """A protocol learner that answers with the lag features it is given."""

    def learn_one(self, x: dict[str, Any], y: Hashable, *, at: int | None = None) -> None:
        pass

    def predict_proba_one(self, x: dict[str, Any], *, at: int | None = None) -> dict:
        return {"|".join(x[k] for k in sorted(x) if k.startswith("_y_lag")): 1.0}

    def predict_proba_many(self, xs: list, *, at: list | None = None) -> list[dict]:
        return [self.predict_proba_one(x) for x in xs]


def test_unbound_and_bound_agree_under_immediate_labels() -> None:
    unbound = TemporalCorrection(TemporallyAugmented(tree.HoeffdingTreeClassifier(), n_labels=2))
    bound = unbound.clone()
    context = built_context(bound)
    assert _feed(unbound, 400) == _feed(bound, 400, context)


def test_binding_reaches_every_wrapper_and_sizes_the_context() -> None:
    context = StreamContext(max_recent=1)
    inner = TemporallyAugmented(Labels(), n_labels=4)
    outer = TemporalCorrection(RiverClassifier(inner))  # through an adapter, too
    bind_context(outer, context)
    assert outer._context is context and inner._context is context
    assert context._recent.maxlen == 4
    bind_context(NoChange(), context)  # plain learners have nothing to bind
    bind_context(tree.HoeffdingTreeClassifier(), context)


def test_a_bound_wrapper_reads_the_released_labels_an_unbound_one_its_own() -> None:
    context = StreamContext(max_recent=2)
    for y in "abc":
        context.receive(context.arrive(), y)
    # a learner that starts mid-stream (a drift reset): bound, it sees the stream's labels
    bound = TemporallyAugmented(Labels(), n_labels=2)
    bound.bind(context)
    unbound = bound.clone()
    assert bound.predict_proba_one({}, at=3) == {"c|b": 1.0}
    assert unbound.predict_proba_one({}, at=3) == {"?|?": 1.0}
    unbound.learn_one({}, "z")
    bound.learn_one({}, "z", at=3)  # the context, not the learner, says what was released
    assert unbound.predict_proba_one({}) == {"z|?": 1.0}
    assert bound.predict_proba_one({}) == {"c|b": 1.0}


# ------------------------------------------------------------ as_learner


class Guesser:
    """Not a river estimator: ``learn_one`` and ``predict_one`` only."""

    def learn_one(self, x: dict[str, Any], y: Hashable) -> None:
        self.last = y

    def predict_one(self, x: dict[str, Any]) -> Hashable | None:
        return getattr(self, "last", None)


def test_as_learner_returns_learners_unchanged_and_wraps_the_rest() -> None:
    for learner in (NoChange(), Majority(), TemporallyAugmented(MixedNB()), Labels()):
        assert as_learner(learner) is learner
    for learner in (TargetMean(), RiverRegressor(linear_model.LinearRegression())):
        assert as_learner(learner, "regression") is learner
    assert isinstance(as_learner(MixedNB()), RiverClassifier)
    assert isinstance(as_learner(linear_model.LinearRegression(), "regression"), RiverRegressor)
    guesser = as_learner(Guesser())
    assert isinstance(guesser, RiverClassifier)
    assert guesser.predict_proba_one({"a": 1.0}, at=0) == {}
    guesser.learn_one({"a": 1.0}, "up", at=0)
    assert guesser.predict_proba_one({"a": 1.0}, at=1) == {"up": 1.0}  # predict_one's label


@pytest.mark.parametrize(
    ("obj", "task", "message"),
    [
        (object(), "classification", "is not a classification learner: it needs learn_one"),
        (42, "regression", "42 is not a regression learner: it needs learn_one and predict_one"),
        (preprocessing.StandardScaler(), "classification", "neither a river classifier"),
        (NoChange(), "regression", "NoChange () is a river classifier, not a regression"),
        (TargetMean(), "classification", "is a river regressor, not a classification"),
    ],
)
def test_as_learner_refuses_in_one_line(obj: Any, task: str, message: str) -> None:
    with pytest.raises(TypeError) as info:
        as_learner(obj, task)  # type: ignore[arg-type]
    assert message in str(info.value) and "\n" not in str(info.value)


CLASSIFIER_MODELS = [
    NoChange(),
    Majority(window=3),
    MixedNB(),
    naive_bayes.GaussianNB(),
    tree.HoeffdingTreeClassifier(),
    TemporallyAugmented(tree.HoeffdingTreeClassifier(), n_labels=2, fill="predicted"),
    TemporalCorrection(MixedNB()),
    Guesser(),
]


@pytest.mark.parametrize("model", CLASSIFIER_MODELS, ids=lambda m: type(m).__name__)
def test_what_as_learner_returns_speaks_the_protocol_with_at(model: Any) -> None:
    learner = as_learner(model)
    context = built_context(learner)
    rows = PHISHING[:60]
    for at, (x, y) in enumerate(rows[:50]):
        context.arrive()
        learner.predict_proba_one(x, at=at)
        learner.learn_one(x, y, at=at)
        context.receive(at, y)
    xs, ats = [x for x, _ in rows[50:]], list(range(50, 60))
    for _ in ats:
        context.arrive()
    probas = learner.predict_proba_many(xs, at=ats)
    labels = learner.predict_labels_many(xs, at=ats)
    assert labels == [argmax(p) for p in probas]
    assert all(math.isclose(sum(p.values()), 1.0) for p in probas)
    assert probas[0] == pytest.approx(learner.predict_proba_one(xs[0], at=ats[0]))
    assert learner.predict_one(xs[0], at=ats[0]) == labels[0]


@pytest.mark.parametrize(
    "model", [TargetMean(window=3), linear_model.LinearRegression(), tree.HoeffdingTreeRegressor()]
)
def test_regressors_speak_the_protocol_with_at(model: Any) -> None:
    learner = as_learner(model, "regression")
    data = list(datasets.TrumpApproval().take(40))
    for at, (x, y) in enumerate(data[:30]):
        learner.learn_one(x, y, at=at)
    xs, ats = [x for x, _ in data[30:]], list(range(30, 40))
    many = learner.predict_many(xs, at=ats)
    assert many == [learner.predict_one(x, at=i) for x, i in zip(xs, ats, strict=True)]
    assert all(isinstance(v, float) for v in many)
