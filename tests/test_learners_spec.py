"""Learner specs: parsing, allow-lists, import refusal, pickling, rebuilding."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest
from river import forest, naive_bayes, neighbors, tree
from streameval.pipeline.learners.base import Classifier, Regressor, StreamContext
from streameval.pipeline.learners.baselines import Majority, NoChange, TargetMean
from streameval.pipeline.learners.naive_bayes import MixedNB
from streameval.pipeline.learners.river_adapter import RiverClassifier, RiverRegressor
from streameval.pipeline.learners.spec import (
    CLASSIFIERS,
    REGRESSORS,
    build_learner,
    learner_lags,
    learner_names,
)
from streameval.pipeline.learners.temporal import TemporalCorrection, TemporallyAugmented
from streameval.pipeline.spec import SpecError

WRAPPED = ["ta:ht", "ta3:ht", "ta2[fill=predicted]:nb", "tc:nb", "tc[alpha=0.01]:ht", "ta:tc:nb"]


def build(spec: str, **kwargs: Any) -> Any:
    return build_learner(spec, context=kwargs.pop("context", StreamContext()), **kwargs)


def test_plain_names() -> None:
    assert isinstance(build("nochange"), NoChange)
    assert build("majority").window is None
    assert build("majority[window=1000]").window == 1000
    nb = build("nb")
    assert isinstance(nb, RiverClassifier) and isinstance(nb.model, MixedNB)
    ht = build("ht[grace_period=50]")
    assert isinstance(ht.model, tree.HoeffdingTreeClassifier) and ht.model.grace_period == 50
    hat = build("hat", seed=7)
    assert isinstance(hat.model, tree.HoeffdingAdaptiveTreeClassifier) and hat.model.seed == 7
    assert build("hat[seed=3]", seed=7).model.seed == 3
    arf = build("arf", seed=5)
    assert isinstance(arf.model, forest.ARFClassifier)
    assert (arf.model.n_models, arf.model.seed) == (10, 5)
    knn = build("knn[n_neighbors=3,window_size=200]")
    last = list(knn.model.steps.values())[-1]
    assert isinstance(last, neighbors.KNNClassifier) and last.n_neighbors == 3
    assert last.engine.window_size == 200


def test_arf_max_features_forms() -> None:
    assert build("arf[max_features=3]").model.max_features == 3
    assert build("arf[max_features=0.5]").model.max_features == 0.5
    assert build("arf[max_features=log2]").model.max_features == "log2"


def test_tree_params_pass_through() -> None:
    ht = build("ht[delta=1e-5,leaf_prediction=mc,max_depth=4,nominal_attributes=day;period]")
    assert ht.model.delta == 1e-5
    assert ht.model.leaf_prediction == "mc"
    assert ht.model.max_depth == 4
    assert ht.model.nominal_attributes == ["day", "period"]


def test_wrappers_and_nesting() -> None:
    ctx = StreamContext()
    ta = build("ta:ht", context=ctx)
    assert isinstance(ta, TemporallyAugmented)
    assert (ta.n_labels, ta.fill, ta._context) == (1, "received", ctx)
    assert isinstance(ta.model, RiverClassifier)
    ta3 = build("ta3:ht", context=ctx)
    assert ta3.n_labels == 3 and ta3._get_params()["n_labels"] == 3
    assert ctx._recent.maxlen == 3  # binding asked the context to keep 3 labels
    ta2 = build("ta2[fill=predicted]:nb")
    assert (ta2.n_labels, ta2.fill) == (2, "predicted")
    tc = build("tc:nb", context=ctx)
    assert isinstance(tc, TemporalCorrection) and tc.alpha == 0.001 and tc._context is ctx
    assert build("tc[alpha=0.01]:ht").alpha == 0.01
    nested = build("ta:tc:nb", context=ctx)
    assert isinstance(nested.model, TemporalCorrection) and nested.model._context is ctx
    assert isinstance(nested.model.model.model, MixedNB)
    unbound = build_learner("ta:tc:nb", context=None)
    assert unbound._context is None and unbound.model._context is None


def test_regression_names() -> None:
    assert isinstance(build("mean[window=10]", task="regression"), TargetMean)
    assert isinstance(build("linreg[l2=0.1]", task="regression"), RiverRegressor)
    assert build("htr[grace_period=20]", task="regression").model.grace_period == 20
    assert learner_names("regression") == ["htr", "linreg", "mean"]
    with pytest.raises(SpecError, match="must be > 0"):
        build("linreg[lr=-1]", task="regression")


def test_lags() -> None:
    assert learner_lags("nochange") == 0
    assert learner_lags("ta:ht") == 1
    assert learner_lags("ta3:ht") == 3
    assert learner_lags("tc:nb") == 1
    assert learner_lags("ta2[fill=predicted]:tc:nb") == 2
    assert learner_lags("tc:ta4:ta2:nb") == 4
    assert learner_lags("linreg") == learner_lags("mean[window=5]", task="regression") == 0
    with pytest.raises(SpecError):
        learner_lags("ta:linreg")
    with pytest.raises(SpecError):
        learner_lags("svm")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("svm", "allowed: arf, hat, ht, knn, majority, nb, nochange"),
        ("mean", "unknown classification learner 'mean'"),
        ("ht[grace=5]", "unknown parameter 'grace'"),
        ("ht[grace_period=50,grace_period=10]", "parameter 'grace_period' is given twice"),
        ("ht[grace_period=0]", "must be an integer >= 1"),
        ("ht[delta=-1]", "must be in (0, 1)"),
        ("knn[n_neighbors=0]", "must be an integer >= 1"),
        ("arf[n_models=0]", "must be an integer >= 1"),
        ("arf[max_features=foo]", "sqrt or log2"),
        ("nb[alpha=0]", "must be > 0"),
        ("ht[grace_period=fast]", "wrong type"),
        ("ht[grace_period=true]", "must be an integer"),
        ("ht[leaf_prediction=magic]", "must be one of mc, nb, nba"),
        ("majority[window=0]", "window=0 must be an integer >= 1"),
        ("nochange[window=3]", "unknown parameter"),
        ("ta0:ht", "lags must be in 1..1000"),
        ("ta1001:ht", "lags must be in 1..1000"),
        ("ta[fill=guess]:ht", "must be one of predicted, received"),
        ("ta[lags=2]:ht", "unknown parameter 'lags'"),
        ("tc[alpha=2]:nb", "alpha=2.0 must be in (0, 1]"),
        ("ta", "ends with the wrapper"),
        ("ht:nb", "'ht' in 'ht:nb' is not a wrapper"),
        ("ta::nb", "empty component"),
        ("ht[", "cannot parse"),
    ],
)
def test_errors_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        build(spec)
    assert message in str(info.value)


def test_wrappers_are_classification_only() -> None:
    with pytest.raises(SpecError, match="classification only"):
        build("ta:htr", task="regression")
    with pytest.raises(SpecError, match="unknown task"):
        build("ht", task="clustering")


def test_import_is_refused_unless_allowed_locally() -> None:
    spec = "import[path=river.naive_bayes.GaussianNB]"
    with pytest.raises(SpecError, match="Kafka") as info:
        build(spec)
    assert "allow_import" in str(info.value)
    with pytest.raises(SpecError, match="disabled"):
        build("ta:" + spec)
    with pytest.raises(SpecError, match="disabled"):
        build("import[path=os.system,command=true]")
    model = build(spec, allow_import=True)
    assert isinstance(model, RiverClassifier)
    assert isinstance(model.model, naive_bayes.GaussianNB)
    own = build(
        "ta:import[path=streameval.pipeline.learners.baselines.Majority,window=5]",
        allow_import=True,
    )
    assert isinstance(own.model, Majority) and own.model.window == 5
    reg = build(
        "import[path=river.tree.HoeffdingTreeRegressor]", task="regression", allow_import=True
    )
    assert isinstance(reg, RiverRegressor)
    with pytest.raises(SpecError, match="is a river classifier, not a regression learner"):
        build(
            "import[path=river.tree.HoeffdingTreeClassifier]", task="regression", allow_import=True
        )
    mean = build(
        "import[path=streameval.pipeline.learners.baselines.TargetMean]",
        task="regression",
        allow_import=True,
    )
    assert isinstance(mean, TargetMean)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("import[path=nosuchmodule.Thing]", "No module named"),
        ("import[path=river.tree.NoSuchTree]", "has no attribute"),
        ("import[path=river.tree.HoeffdingTreeRegressor]", "is a river regressor, not a class"),
        ("import[path=collections.OrderedDict]", "not a classification learner"),
        ("import", "path=package.module.Class"),
    ],
)
def test_import_errors(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build(spec, allow_import=True)


def _stream(n: int, seed: int = 1) -> list[tuple[dict[str, Any], str]]:
    rng = random.Random(seed)
    rows = []
    y = "a"
    for _ in range(n):
        if rng.random() < 0.2:
            y = rng.choice("abc")
        x = {"num": rng.gauss({"a": 0, "b": 1, "c": 2}[y], 1.0), "cat": rng.choice("uvw" + y)}
        rows.append((x, y))
    return rows


def _drive(learner: Any, ctx: StreamContext, rows: list[tuple[dict[str, Any], str]]) -> None:
    for x, y in rows:
        at = ctx.arrive()
        learner.predict_proba_one(x, at=at)
        learner.learn_one(x, y, at=at)
        ctx.receive(at, y)


ALL_CLASSIFIERS = [*sorted(CLASSIFIERS), *WRAPPED, "ta:arf", "tc:hat", "ta2:knn"]


@pytest.mark.parametrize("spec", ALL_CLASSIFIERS)
def test_every_classifier_pickles_and_rebuilds(spec: str) -> None:
    rows = _stream(300)
    ctx = StreamContext()
    ctx.require_recent(learner_lags(spec))
    learner = build(spec, context=ctx)
    assert isinstance(learner, Classifier)
    _drive(learner, ctx, rows[:250])
    probe = [x for x, _ in rows[250:]]
    ats = [ctx.arrive() for _ in probe]
    before = learner.predict_proba_many(probe, at=ats)
    copy = pickle.loads(pickle.dumps(learner))
    same(copy.predict_proba_many(probe, at=ats), before, exact="hat" not in spec)
    # the same spec and seed, trained on the same stream, gives the same learner
    ctx2 = StreamContext()
    again = build(spec, context=ctx2)
    _drive(again, ctx2, rows[:250])
    after = again.predict_proba_many(probe, at=[ctx2.arrive() for _ in probe])
    same(after, before, exact="hat" not in spec)


def same(got: list[dict], expected: list[dict], *, exact: bool) -> None:
    """Equal probabilities; up to rounding for river's HAT, which normalises its
    probabilities summing over a *set* of classes, whose order can change with
    unpickling (and with the hash seed of the process)."""
    if exact:
        assert got == expected
    else:
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g == pytest.approx(e, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("spec", sorted(REGRESSORS))
def test_every_regressor_pickles(spec: str) -> None:
    learner = build(spec, task="regression")
    assert isinstance(learner, Regressor)
    rows = _stream(200)
    for x, y in rows:
        learner.learn_one(x, {"a": 0.0, "b": 1.0, "c": 2.0}[y])
    probe = [x for x, _ in rows[:20]]
    before = learner.predict_many(probe)
    assert all(isinstance(v, float) for v in before)
    assert pickle.loads(pickle.dumps(learner)).predict_many(probe) == before
