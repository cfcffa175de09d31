"""MOA's test-then-train over a block of rows in Java
(:meth:`~streameval.pipeline.learners.moa.MOAClassifier.predict_learn_many`): the same
answers, the same model (its Java serialisation, byte for byte) and the same failures
as the calls one by one, and the results of the per-event core when ``evaluate`` runs it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from streameval.pipeline.columnar import ColumnarExperiment
from streameval.pipeline.columnar.driver import drive_immediate
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.failure import LearnerFailed, StoppedAt
from streameval.pipeline.learners import moa, moa_java
from streameval.pipeline.learners.base import argmax
from streameval.pipeline.learners.moa import MOAClassifier
from streameval.pipeline.learners.spec import build_learner
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay
from streameval.pipeline.streams.schedule import replay_schedule
from test_columnar import document
from test_learners_moa import SMALL

from streameval.bench.moa_peer import load_rows

pytestmark = pytest.mark.moa  # a JVM with MOA (skipped without Java, but under CI)

BLOCK = 512


class Counted:
    """``loops()``'s Java class, counting the blocks it is given."""

    def __init__(self, helper: Any) -> None:
        self.helper, self.blocks, self.batches = helper, 0, 0

    def testThenTrain(self, *args: Any) -> int:
        self.blocks += 1
        return self.helper.testThenTrain(*args)

    def votes(self, *args: Any) -> None:
        self.batches += 1
        self.helper.votes(*args)


@pytest.fixture
def counted(monkeypatch) -> Counted:
    helper = moa_java.loops()
    assert helper is not None, "the Java class ships with the package and loads"
    spy = Counted(helper)
    monkeypatch.setattr(moa, "loops", lambda: spy)
    return spy


def in_blocks(learner: MOAClassifier, xs: list, ys: list) -> list[dict]:
    out: list[dict] = []
    for s in range(0, len(xs), BLOCK):
        out += learner.predict_learn_many(xs[s : s + BLOCK], ys[s : s + BLOCK])
    return out


def one_by_one(learner: MOAClassifier, xs: list, ys: list) -> list[dict]:
    out = []
    for x, y in zip(xs, ys, strict=True):
        out.append(learner.predict_proba_one(x))
        learner.learn_one(x, y)
    return out


@pytest.mark.parametrize("dataset", ["electricity", "airlines"])
@pytest.mark.parametrize("name", ["NaiveBayes", "HoeffdingTree"])
def test_a_block_in_java_answers_and_learns_as_the_calls_one_by_one(
    data_dir: Path, counted: Counted, dataset: str, name: str
) -> None:
    n = {"electricity": 4000, "airlines": 18_000}[dataset]
    rows = load_rows(dataset, n, str(data_dir))
    xs, ys = [r.x for r in rows], [r.y for r in rows]
    a, b = MOAClassifier(name), MOAClassifier(name)
    assert in_blocks(a, xs, ys) == one_by_one(b, xs, ys)
    assert a._java_bytes() == b._java_bytes()  # the same model, the same header
    # the first block meets the classes and the nominal values, and one of Airlines'
    # (rows 17,408-17,919) a new airline: those go call by call, every other to Java
    blocks = -(-n // BLOCK)
    assert counted.blocks == blocks - {"electricity": 1, "airlines": 2}[dataset]


def awkward(n: int) -> tuple[list[dict], list[Any]]:
    """Missing features, ``None``, a ``str`` in a numeric feature, an ``int`` in a nominal
    one, NaN, and labels that are not strings."""
    xs, ys = [], []
    for i in range(n):
        x: dict[str, Any] = {"a": (i * 7) % 11 / 3.0, "kind": "pq"[i % 2], "b": i % 5}
        if i % 13 == 0:
            x["a"] = None
        if i % 17 == 0:
            x["b"] = "n/a"
        if i % 19 == 0:
            del x["kind"]
        if i % 23 == 0:
            x["kind"] = 3
        if i % 29 == 0:
            x["a"] = float("nan")
        xs.append(x)
        ys.append((i // 7) % 3 if i > 40 else i % 2)
    return xs, ys


@pytest.mark.parametrize("name", ["NaiveBayes", "HoeffdingTree"])
def test_awkward_values_reach_moa_in_a_block_as_one_by_one(counted: Counted, name: str) -> None:
    xs, ys = awkward(3000)
    a, b = MOAClassifier(name), MOAClassifier(name)
    assert in_blocks(a, xs, ys) == one_by_one(b, xs, ys)
    assert a._java_bytes() == b._java_bytes()
    assert counted.blocks == 5  # all but the first, where the classes and "3" appear


def test_a_learner_that_throws_in_java_stops_where_one_by_one_stops(counted: Counted) -> None:
    """Class code -1 makes MOA's naive Bayes throw when it trains (its class counts are
    an array): both ways stop on that instance, at ``learn``, with MOA's exception."""
    xs, ys = awkward(1000)
    ys[700] = "bad"
    stops = []
    for run in (in_blocks, MOAClassifier._one_by_one):
        learner = MOAClassifier("NaiveBayes")
        for x, y in zip(xs[:100], ys[:100], strict=True):  # every class and value known
            learner.learn_one(x, y)
        learner._class_index["bad"] = -1  # a code MOA cannot count
        with pytest.raises(StoppedAt) as stopped:
            run(learner, xs[100:], ys[100:])
        stops.append(stopped.value)
    (java, python) = stops
    assert (java.done, java.step) == (600 - BLOCK, "learn")
    assert (python.done, python.step) == (600, "learn")
    assert java.answers == python.answers[BLOCK:]  # the block's, the failing one's included
    assert len(python.answers) == 601
    # the same exception; its message may be missing: from a hot compiled method HotSpot
    # may throw a preallocated one (-XX:+OmitStackTraceInFastThrow, on by default)
    assert type(java.cause).__name__ == type(python.cause).__name__
    assert type(java.cause).__name__ == "java.lang.ArrayIndexOutOfBoundsException"
    assert counted.blocks == 2


def test_evaluate_with_moa_learners_in_java_blocks_gives_the_per_event_cores_results(
    data_dir: Path, counted: Counted
) -> None:
    rows: list[Instance] = load_rows("electricity", 3000, str(data_dir))
    names = ["nochange", "majority", "moa:NaiveBayes", "moa:HoeffdingTree", "nb"]
    cfg = ExperimentConfig("m", names, window=100, fading=0.99, positive="UP", snapshot_every=500)
    exp = ColumnarExperiment(cfg)
    assert exp.two_pass
    got = drive_immediate(exp, rows, None, False)
    assert counted.blocks == 2 * (len(rows) // BLOCK)  # each MOA learner, every block but one
    reference = Experiment(cfg)
    reference.run(list(replay_schedule("m", rows, InstanceDelay(0))))
    assert document(got) == document(reference.results())


def test_a_moa_learner_failing_in_a_java_block_is_raised_as_one_by_one_raises_it(
    data_dir: Path, counted: Counted
) -> None:
    rows: list[Instance] = load_rows("electricity", 1500, str(data_dir))
    rows[1100] = rows[1100]._replace(y="bad")
    cfg = ExperimentConfig("m", ["nochange", "moa:NaiveBayes"], positive="UP")
    exps = [ColumnarExperiment(cfg), ColumnarExperiment(cfg)]
    failures = []
    for exp, drive in zip(exps, (two_pass, per_instance), strict=True):
        learner = exp.slots[1].learner
        learner.learn_one(rows[0].x, "UP")
        learner._class_index["bad"] = -1
        with pytest.raises(LearnerFailed) as failed:
            drive(exp, rows)
        failures.append(str(failed.value))
    says = "learner 'moa:NaiveBayes' failed on instance 1100 (learn): "
    assert all(f.startswith(says + "java.lang.ArrayIndexOutOfBoundsException") for f in failures)
    got, expected = (exp.results() for exp in exps)
    assert got["n_labelled"] == expected["n_labelled"] == 1101
    assert document(got) == document(expected)


def two_pass(exp: ColumnarExperiment, rows: list[Instance]) -> None:
    drive_immediate(exp, rows, None, False)


def per_instance(exp: ColumnarExperiment, rows: list[Instance]) -> None:
    for inst in rows:
        exp.features(inst.id, inst.ts, inst.x)
        exp.label(inst.id, inst.ts, inst.y)


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK here (javac): nothing to compile")
def test_the_committed_class_is_its_source_compiled(tmp_path: Path) -> None:
    """The bytecode that ships is what ``make java`` makes of the source beside it."""
    source = moa_java._JAVA_DIR / "streameval" / "moa" / "Loops.java"
    jar = str(moa_java.moa_jar())
    javac = ["javac", "--release", "8", "-Xlint:-options", "-d", str(tmp_path), "-cp", jar]
    subprocess.run([*javac, str(source)], check=True)

    def listing(root: Path) -> str:
        javap = ["javap", "-c", "-p", "-cp", str(root), "streameval.moa.Loops"]
        return subprocess.run(javap, capture_output=True, text=True, check=True).stdout

    assert "public static int testThenTrain(moa.classifiers.Classifier" in listing(
        moa_java._JAVA_DIR
    )
    assert listing(tmp_path) == listing(moa_java._JAVA_DIR)


@pytest.mark.parametrize("name", ["NaiveBayes", "HoeffdingTree"])
def test_without_the_java_class_the_rows_go_call_by_call_with_the_same_results(
    data_dir: Path, monkeypatch, name: str
) -> None:
    rows = load_rows("electricity", 2000, str(data_dir))
    xs, ys = [r.x for r in rows], [r.y for r in rows]
    java, python = MOAClassifier(name), MOAClassifier(name)
    got = [in_blocks(java, xs[:1500], ys[:1500]), java.predict_proba_many(xs[1500:])]
    monkeypatch.setattr(moa, "loops", lambda: None)
    expected = [in_blocks(python, xs[:1500], ys[:1500]), python.predict_proba_many(xs[1500:])]
    assert got == expected
    assert java._java_bytes() == python._java_bytes()


def test_a_batch_of_predictions_leaves_the_instance_a_learn_one_is_about_to_use(
    data_dir: Path, counted: Counted
) -> None:
    """Between ``predict_proba_one(x)`` and ``learn_one(x, y)`` (which reuses the values
    the prediction wrote) a batch of predictions of other rows changes nothing."""
    rows = load_rows("electricity", 1200, str(data_dir))
    plain, batched = MOAClassifier("HoeffdingTree"), MOAClassifier("HoeffdingTree")
    others = [r.x for r in rows[:50]]
    for i, r in enumerate(rows):
        assert plain.predict_proba_one(r.x) == batched.predict_proba_one(r.x)
        if i > 100 and i % 10 == 0:
            batched.predict_proba_many(others)
        plain.learn_one(r.x, r.y)
        batched.learn_one(r.x, r.y)
    assert counted.batches == 109
    assert plain._java_bytes() == batched._java_bytes()


def test_re_evaluation_with_moa_learners_gives_the_same_results_with_and_without_java_loops(
    data_dir: Path, monkeypatch
) -> None:
    names = ["nochange", "moa:NaiveBayes", "moa:HoeffdingTree"]
    cfg = ExperimentConfig("r", names, dataset="covtype", delay="300", limit=2500, reeval_k=10)
    real = moa_java.loops()
    spy = Counted(real)
    monkeypatch.setattr(moa, "loops", lambda: spy)
    got = evaluate_config(cfg, data_dir=data_dir)
    assert spy.batches > 2 * 200  # every K=10 labels, each MOA learner's pending instances
    monkeypatch.setattr(moa, "loops", lambda: None)
    assert document(evaluate_config(cfg, data_dir=data_dir)) == document(got)


NAN, INF = float("nan"), float("inf")
#: Rows of votes: ties (the first of the highest), zeros, NaN, infinities, negatives.
AWKWARD_VOTES = [
    [1.0, 1.0], [0.0, 0.0], [2.0, 1.0], [1.0, 2.0], [NAN, 1.0], [1.0, NAN], [INF, 1.0],
    [1.0, INF], [-1.0, 0.5], [0.5, -1.0], [3.0, 3.0, 1.0], [1.0, 3.0, 3.0], [0.0, 0.0, 0.0],
    [NAN, 2.0, 3.0], [2.0, NAN, 1.0], [1.0, INF, INF], [-2.0, -1.0, -3.0], [0.2, 0.3, 0.5],
]  # fmt: skip


@pytest.mark.parametrize("k", [2, 3])
def test_labels_of_a_batch_are_the_top_of_its_probabilities(k: int) -> None:
    learner = MOAClassifier("NaiveBayes")
    learner._classes = ["UP", "DOWN", "FLAT"][:k]
    rows = [row for row in AWKWARD_VOTES if len(row) == k]
    votes = [v for row in rows for v in row]
    assert learner._labels(votes, k) == [argmax(learner._proba(row)) for row in rows]


@pytest.mark.parametrize(("dataset", "n"), [("electricity", 3000), ("covtype", 3000)])
def test_predict_labels_many_is_the_argmax_of_predict_proba_many(
    data_dir: Path, counted: Counted, dataset: str, n: int
) -> None:
    rows = load_rows(dataset, n, str(data_dir))
    xs, ys = [r.x for r in rows], [r.y for r in rows]
    for name in ("NaiveBayes", "HoeffdingTree"):
        learner = MOAClassifier(name)
        in_blocks(learner, xs[:2000], ys[:2000])
        labels = learner.predict_labels_many(xs[2000:])
        assert labels == [argmax(p) for p in learner.predict_proba_many(xs[2000:])]
        assert labels == [argmax(learner.predict_proba_one(x)) for x in xs[2000:]]
        assert len(set(labels)) > 1


@pytest.mark.parametrize("name", sorted(moa_java.MOA_CLASSIFIERS))
def test_every_allowed_learner_answers_a_java_block_as_one_by_one(
    rows_electricity: list[Instance], counted: Counted, name: str
) -> None:
    spec = f"moa:{name}{SMALL[name]}"
    xs, ys = [r.x for r in rows_electricity], [r.y for r in rows_electricity]
    a, b = build_learner(spec, context=None), build_learner(spec, context=None)
    assert in_blocks(a, xs, ys) == one_by_one(b, xs, ys)
    assert counted.blocks == 2  # 1,500 rows: the first block meets the classes
    assert a.predict_proba_many(xs[:300]) == b.predict_proba_many(xs[:300])


@pytest.fixture(scope="module")
def rows_electricity(data_dir: Path) -> list[Instance]:
    return load_rows("electricity", 1500, str(data_dir))
