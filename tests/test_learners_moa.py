"""MOA's learners inside streameval (``moa:NAME``), checked against MOA itself (CapyMOA).

The reference is CapyMOA's ``prequential_evaluation`` -- MOA's own Java loop -- on an
ARFF of the very rows streameval evaluates (:mod:`streameval.bench.moa_peer`).
"""

from __future__ import annotations

import math
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.cost import MiB, learner_cost
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.events import PredictionEvent
from streameval.pipeline.learners import moa, moa_java
from streameval.pipeline.learners.base import StreamContext, argmax
from streameval.pipeline.learners.spec import build_learner, learner_lags
from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams.base import Instance

from streameval.bench.moa_peer import capymoa_prequential, load_rows

pytestmark = pytest.mark.moa  # a JVM with MOA (skipped without Java, but under CI)

N = 3000  # an Electricity prefix: some seconds per learner on a loaded machine


@pytest.fixture(scope="module")
def rows(data_dir: Path) -> list[Instance]:
    return load_rows("electricity", N, str(data_dir))


def _first_predictions(config: ExperimentConfig, data_dir: Path) -> tuple[dict, dict]:
    """The results of ``evaluate`` and each learner's first prediction of every instance."""
    outputs: list = []
    results = evaluate_config(config, data_dir=data_dir, on_output=outputs.append)
    preds: dict[str, list] = {spec: [] for spec in config.learners}
    for out in outputs:
        if isinstance(out, PredictionEvent) and out.kind == "first":
            preds[out.learner].append(out.y_pred)
    return results, preds


def test_moa_nb_and_ht_in_evaluate_make_capymoas_predictions_on_electricity(
    rows: list[Instance], data_dir: Path, tmp_path: Path
) -> None:
    """Every prediction after the first equals MOA's (CapyMOA's prequential_evaluation);
    the first is ``None`` here (no class known yet) where MOA, told the classes by its
    ARFF header, guesses the first one. The accuracies differ by exactly that instance
    (1/N: they agree to 4 decimals on the whole stream, N = 45,312)."""
    specs = {"moa:NaiveBayes": "NaiveBayes", "moa:HoeffdingTree": "HoeffdingTree"}
    config = ExperimentConfig("moa-elec", list(specs), dataset="electricity", limit=N)
    results, ours = _first_predictions(config, data_dir)
    for spec, name in specs.items():
        peer = capymoa_prequential(rows, name, tmp_path / f"{name}.arff")
        theirs = peer["predictions"]
        assert len(ours[spec]) == len(theirs) == N
        assert ours[spec][0] is None and theirs[0] == rows[0].y  # MOA's guess: class 0
        mismatches = [i for i in range(1, N) if ours[spec][i] != theirs[i]]
        assert mismatches == [], (spec, mismatches[:10])
        accuracy = results["learners"][spec]["accuracy"]
        correct = sum(p == r.y for p, r in zip(ours[spec], rows, strict=True))
        assert accuracy == pytest.approx(correct / N, abs=1e-12)
        # MOA's first guess was right: it scores one more hit, nothing else differs
        assert round(peer["accuracy"] * N) == correct + 1
        assert accuracy == pytest.approx(peer["accuracy"] - 1 / N, abs=1e-12)
    assert results["learners"]["moa:HoeffdingTree"]["accuracy"] > 0.85  # a tree that splits


def test_ta_moa_nb_is_moa_nb_with_the_previous_label_as_a_nominal_feature(
    rows: list[Instance], data_dir: Path, tmp_path: Path
) -> None:
    """``ta:moa:NaiveBayes`` under immediate labels = MOA's NaiveBayes on the rows with
    ``_y_lag1`` (the previous label, ``?`` at first) as one more nominal attribute."""
    config = ExperimentConfig("moa-ta", ["ta:moa:NaiveBayes"], dataset="electricity", limit=N)
    assert learner_lags("ta:moa:NaiveBayes") == 1
    _, ours = _first_predictions(config, data_dir)
    lagged = [
        Instance(r.id, r.ts, {**r.x, "_y_lag1": rows[i - 1].y if i else "?"}, r.y)
        for i, r in enumerate(rows)
    ]
    theirs = capymoa_prequential(lagged, "NaiveBayes", tmp_path / "ta.arff")["predictions"]
    assert ours["ta:moa:NaiveBayes"][1:] == theirs[1:]
    # the lag feature helps on Electricity, as with every learner (the paper's sect. 6)
    plain = capymoa_prequential(rows, "NaiveBayes", tmp_path / "plain.arff")["predictions"]
    hits = lambda preds: sum(p == r.y for p, r in zip(preds, rows, strict=True))  # noqa: E731
    assert hits(theirs) > hits(plain)


def test_a_pickled_moa_learner_continues_exactly_where_it_stopped(
    rows: list[Instance],
) -> None:
    """Pickled mid-stream (Java serialisation inside), restored, it predicts what the
    uninterrupted learner predicts, new classes and nominal values included."""
    whole = build_learner("moa:HoeffdingTree[g=50]", context=None)
    half = build_learner("moa:HoeffdingTree[g=50]", context=None)
    extra = [Instance("x", 0.0, {**r.x, "day": "8"}, "FLAT") for r in rows[:40]]
    stream = rows[:1000] + extra + rows[1000:2000]
    ours, theirs = [], []
    for i, r in enumerate(stream):
        if i == 700:
            half = pickle.loads(pickle.dumps(half))
        ours.append(half.predict_proba_one(r.x))
        theirs.append(whole.predict_proba_one(r.x))
        half.learn_one(r.x, r.y)
        whole.learn_one(r.x, r.y)
    assert ours == theirs
    assert "FLAT" in ours[-1]
    fresh = pickle.loads(pickle.dumps(build_learner("moa:NaiveBayes", context=None)))
    assert fresh.predict_proba_one(rows[0].x) == {}


def test_batched_predictions_equal_one_by_one(rows: list[Instance]) -> None:
    learner = build_learner("moa:NaiveBayes", context=None)
    for r in rows[:500]:
        learner.learn_one(r.x, r.y)
    xs = [r.x for r in rows[500:800]]
    batch = learner.predict_proba_many(xs, at=list(range(300)))
    assert batch == [learner.predict_proba_one(x) for x in xs]
    assert [argmax(p) for p in batch].count("UP") not in (0, 300)  # both classes predicted


#: Every allow-listed class, ensembles small enough for some seconds.
SMALL = {
    "NaiveBayes": "",
    "HoeffdingTree": "[g=50]",
    "HoeffdingAdaptiveTree": "[g=50]",
    "EFDT": "[g=50]",
    "AdaptiveRandomForest": "[s=3]",
    "StreamingRandomPatches": "[s=3]",
    "OzaBag": "[s=3]",
    "LeveragingBag": "[s=3]",
    "kNN": "[w=100]",  # a full window: instances leave it
    "MajorityClass": "",
    "NoChange": "",
}


class _FreshInstances:
    """A ``moa:`` learner's Java learner driven with a new MOA instance per call: what
    MOA's learners see when none keeps (or changes) an instance it is given."""

    def __init__(self, spec: str) -> None:
        self.model = build_learner(spec, context=None)

    def _instance(self, values: list[Any]) -> Any:
        jpype = moa_java.jvm()
        inst = moa_java.dense_instance()(1.0, jpype.JArray(jpype.JDouble)(values))
        inst.setDataset(self.model._header)
        return inst

    def predict_proba_one(self, x: dict) -> dict:
        m = self.model
        if m._header is None:
            m._build_header(x)
        if not m._classes:
            return {}
        return m._proba(list(m._learner.getVotesForInstance(self._instance(m._values(x)))))

    def learn_one(self, x: dict, y: str) -> None:
        m = self.model
        if m._header is None:
            m._build_header(x)
        values = m._values(x)
        values[-1] = m._class_code(y)
        m._learner.trainOnInstance(self._instance(values))


@pytest.mark.parametrize("name", sorted(moa.MOA_CLASSIFIERS))
def test_one_reused_instance_predicts_what_fresh_instances_predict(
    name: str, rows: list[Instance]
) -> None:
    """The learner writes every instance into one Java array and one MOA instance: safe
    only if MOA's learner keeps no reference to it (kNN's window, ensembles' copies).
    Re-evaluation batches in between (their own instances) leave it alone."""
    assert set(SMALL) == set(moa.MOA_CLASSIFIERS)
    spec = f"moa:{name}{SMALL[name]}"
    ours, fresh = build_learner(spec, context=None), _FreshInstances(spec)
    for i, r in enumerate(rows[:600]):
        assert ours.predict_proba_one(r.x) == fresh.predict_proba_one(r.x), (name, i)
        if i % 50 == 49:
            ours.predict_proba_many([q.x for q in rows[i : i + 5]])
        ours.learn_one(r.x, r.y)
        fresh.learn_one(r.x, r.y)
    final = ours.predict_proba_many([r.x for r in rows[600:700]])
    assert final == [fresh.predict_proba_one(r.x) for r in rows[600:700]]
    constant = name in ("MajorityClass", "NoChange")  # one label for a whole batch
    assert len({max(p, key=p.__getitem__) for p in final}) == (1 if constant else 2)


def _buffer(learner: Any) -> list[float | None]:
    return [None if math.isnan(v) else v for v in learner._buffer]


def test_features_reach_moa_as_numbers_codes_or_missing() -> None:
    """Header ``a`` numeric, ``d`` nominal, ``b`` numeric, then the class (NaN when
    predicting): what lands in the Java array for each kind of value."""
    learner = build_learner("moa:NaiveBayes", context=None)
    learner.learn_one({"a": 1.5, "d": "x", "b": 2}, "P")
    assert _buffer(learner) == [1.5, 0.0, 2.0, 0.0]
    cases = [
        ({"a": 2.5, "d": "y", "b": True}, [2.5, 1.0, 1.0, None]),  # new value; True is 1
        ({"d": "x"}, [None, 0.0, None, None]),  # absent features are missing
        ({"a": None, "d": None, "b": "text"}, [None, None, None, None]),
        ({"b": np.int64(3), "a": np.float32(0.5), "d": 7, "extra": 1}, [0.5, 2.0, 3.0, None]),
        ({"a": float("nan"), "d": "7", "b": -1}, [None, 2.0, -1.0, None]),  # 7 is "7"
    ]
    for x, values in cases:
        learner.predict_proba_one(x)
        assert _buffer(learner) == values, x
    learner.learn_one({"a": 0.0, "d": "y", "b": 0}, "Q")
    assert _buffer(learner) == [0.0, 1.0, 0.0, 1.0]
    header = learner._header
    assert [str(v) for v in header.attribute(1).getAttributeValues()] == ["x", "y", "7"]
    assert [str(v) for v in header.attribute(3).getAttributeValues()] == ["P", "Q"]


@pytest.mark.parametrize(
    ("votes", "proba"),
    [
        ([1.0, 3.0], [0.25, 0.75]),
        ([2.0, 2.0], [math.nextafter(0.5, 1), 0.5]),  # a tie: MOA's first class
        ([0.0, 0.0], [math.nextafter(0.5, 1), 0.5]),  # no votes: uniform, the first
        ([0.0, math.inf], [0.5, math.nextafter(0.5, 1)]),  # not a distribution: uniform
        ([math.nan, 1.0], [math.nextafter(0.5, 1), 0.5]),  # MOA's maxIndex keeps index 0
        ([5.0], [1.0, 0.0]),  # a class MOA has no vote for yet
        ([1.0, 2.0, 1.0], [0.25, 0.5, 0.25]),
        ([1.0, 3.0, 3.0], [1 / 7, math.nextafter(3 / 7, 1), 3 / 7]),
        ([0.0, 0.0, 0.0], [math.nextafter(1 / 3, 1), 1 / 3, 1 / 3]),
        ([1.0, 2.0, 3.0, 4.0], [1 / 6, 2 / 6, 3 / 6]),  # more votes than classes
    ],
)
def test_votes_become_probabilities_with_moas_choice_on_top(
    votes: list[float], proba: list[float]
) -> None:
    learner = build_learner("moa:NaiveBayes", context=None)
    classes = ["UP", "DOWN", "FLAT"][: 2 if len(proba) == 2 else 3]
    learner._classes = classes
    assert learner._proba(votes) == dict(zip(classes, proba, strict=True))


def test_ties_go_to_moas_choice_not_to_the_smallest_label() -> None:
    """A majority-class leaf with one UP and one DOWN: MOA picks its first class (UP,
    seen first); the probabilities make streameval's argmax pick it too."""
    learner = build_learner("moa:HoeffdingTree[l=MC]", context=None)
    learner.learn_one({"a": 1.0}, "UP")
    learner.learn_one({"a": 2.0}, "DOWN")
    proba = learner.predict_proba_one({"a": 1.5})
    assert argmax(proba) == "UP"
    assert proba["UP"] == pytest.approx(0.5) and proba["DOWN"] == 0.5


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("moa:Runtime", "unknown MOA classifier 'Runtime'"),
        ("moa:java.lang.Runtime", "unknown MOA classifier"),
        ("moa:HoeffdingTree[n=GaussianNumericAttributeClassObserver]", "ClassOption"),
        ("moa:OzaBag[l=trees.HoeffdingTree]", "ClassOption"),
        ("moa:AdaptiveRandomForest[j=4]", "may not be set"),
        ("moa:HoeffdingTree[g=-1]", "out of range"),
        ("moa:HoeffdingTree[l=Oracle]", "must be one of"),
        ("moa:HoeffdingTree[nope=1]", "unknown option 'nope'"),
        ("moa:HoeffdingTree[b=1]", "is a flag"),
        ("moa", "names no MOA class"),
        ("moa[x=1]:NaiveBayes", "moa takes no parameters"),
    ],
)
def test_names_and_options_outside_the_allow_list_are_refused(spec: str, says: str) -> None:
    with pytest.raises(SpecError, match=r".*" + says.replace("[", r"\[")):
        build_learner(spec, context=StreamContext())


def test_moa_learners_are_classifiers_only() -> None:
    with pytest.raises(SpecError, match="moa: learners are classifiers"):
        build_learner("moa:NaiveBayes", context=None, task="regression")


def test_options_reach_moa() -> None:
    learner = build_learner("moa:HoeffdingTree[g=50,splitConfidence=0.01,b=true]", context=None)
    java = learner._learner
    assert java.gracePeriodOption.getValue() == 50
    assert java.splitConfidenceOption.getValue() == pytest.approx(0.01)
    assert java.binarySplitsOption.isSet()
    assert not build_learner("moa:HoeffdingTree", context=None)._learner.binarySplitsOption.isSet()


def test_without_the_extra_the_error_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(moa_java, "_java", None)
    monkeypatch.setitem(sys.modules, "capymoa", None)  # import capymoa -> ImportError
    with pytest.raises(SpecError, match=r"moa extra \(pip install 'streameval\[moa\]'\)"):
        build_learner("moa:NaiveBayes", context=None)


def test_admission_estimates_moa_learners_like_their_river_kin() -> None:
    assert learner_cost("moa:NaiveBayes") == learner_cost("nb")
    assert learner_cost("moa:HoeffdingTree") == learner_cost("ht")
    assert learner_cost("moa:AdaptiveRandomForest")[0] >= 100 * 3 * MiB  # MOA's 100 trees
    assert learner_cost("moa:AdaptiveRandomForest[s=10]") == learner_cost("arf[n_models=10]")
    assert learner_cost("ta:moa:NaiveBayes") == learner_cost("ta:nb")
