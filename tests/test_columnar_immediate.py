"""Test-then-train in two passes (:mod:`streameval.pipeline.columnar.immediate`): the
learners' calls for a block first, their evaluation after, against the same instances
evaluated one by one (``features`` then ``label``), and against the per-event core."""

from __future__ import annotations

import json
from typing import Any

import pytest
from river import tree
from streameval.pipeline.columnar import ColumnarExperiment
from streameval.pipeline.columnar import immediate as immediate_module
from streameval.pipeline.columnar.driver import drive_immediate
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.failure import LearnerFailed, StoppedAt
from streameval.pipeline.learners.baselines import Majority, NoChange
from streameval.pipeline.learners.mixins import ProbaMixin
from streameval.pipeline.learners.spec import build_learner
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay
from streameval.pipeline.streams.schedule import replay_schedule
from test_columnar import document, synthetic


class Recorder(ProbaMixin):
    """A learner (not a River model: the generic caller) that logs its calls and answers
    with the frequencies of the labels it learned; ``fail_at`` raises on that instance's
    prediction."""

    def __init__(self, log: list[tuple[str, int]], fail_at: int | None = None) -> None:
        self.log, self.fail_at = log, fail_at
        self.counts: dict[Any, int] = {}

    def predict_proba_one(self, x: Any, *, at: int | None = None, **kw: Any) -> dict:
        self.log.append(("predict", at))  # type: ignore[arg-type]
        if at == self.fail_at:
            raise ValueError("no answer")
        total = sum(self.counts.values())
        return {y: n / total for y, n in self.counts.items()}

    def learn_one(self, x: Any, y: Any, *, at: int | None = None, **kw: Any) -> None:
        self.log.append(("learn", at))  # type: ignore[arg-type]
        self.counts[y] = self.counts.get(y, 0) + 1

    def clone(self) -> Recorder:
        return Recorder([], self.fail_at)


def learners(log: list[tuple[str, int]], fail_at: int | None = None) -> dict[str, Any]:
    return {
        "nochange": NoChange(),
        "tree": tree.HoeffdingTreeClassifier(grace_period=50),
        "nb": build_learner("nb", context=None),  # the mixed naive Bayes (strings too)
        "rec": Recorder(log, fail_at),
        "majority": Majority(),
    }


def config(**settings: Any) -> ExperimentConfig:
    base = {"window": 50, "fading": 0.9, "positive": "up", "snapshot_every": 97}
    names = ["nochange", "tree", "nb", "rec", "majority"]
    return ExperimentConfig("s", names, **{**base, **settings})


def one_by_one(exp: ColumnarExperiment, rows: list[Instance]) -> dict[str, Any]:
    for inst in rows:
        exp.features(inst.id, inst.ts, inst.x)
        exp.label(inst.id, inst.ts, inst.y)
    exp.end(rows[-1].ts)
    return exp.results()


@pytest.mark.parametrize("block", [1, 7, 512])
def test_two_passes_give_the_results_and_the_calls_of_one_by_one(monkeypatch, block) -> None:
    # 1,500 instances: blocks that do not divide them, snapshots inside blocks, a third
    # class from the middle on, a learner that reads the features and one that does not
    monkeypatch.setattr(immediate_module, "BLOCK", block)
    monkeypatch.setattr("streameval.pipeline.columnar.driver.IMMEDIATE_BLOCK", block)
    rows = synthetic(1500, seed=3)
    log_1: list[tuple[str, int]] = []
    expected = one_by_one(ColumnarExperiment(config(), learners=learners(log_1)), rows)
    log_2: list[tuple[str, int]] = []
    exp = ColumnarExperiment(config(), learners=learners(log_2))
    assert exp.two_pass
    got = drive_immediate(exp, rows, None, False)
    assert document(got) == document(expected)
    assert log_2 == log_1 == [(step, i) for i in range(1500) for step in ("predict", "learn")]
    # and the per-event core, the reference of the columnar one
    reference = Experiment(config(), learners=learners([]))
    reference.run(list(replay_schedule("s", rows, InstanceDelay(0))))
    assert document(got) == document(reference.results())


def test_a_failing_learner_is_raised_after_the_instances_before_it() -> None:
    rows = synthetic(1500, seed=5)
    exp = ColumnarExperiment(config(), learners=learners([], fail_at=700))
    with pytest.raises(LearnerFailed) as failed:
        drive_immediate(exp, rows, None, False)
    assert (failed.value.name, failed.value.index, failed.value.step) == ("rec", 700, "predict")
    assert exp.n_labelled == 700  # the 700 instances before it were evaluated
    ref = ColumnarExperiment(config(), learners=learners([], fail_at=700))
    with pytest.raises(LearnerFailed):
        one_by_one(ref, rows)
    got, expected = exp.results(), ref.results()
    assert got["n_labelled"] == expected["n_labelled"] == 700
    for part in ("learners", "comparisons", "diagnostics"):
        assert json.dumps(got[part]) == json.dumps(expected[part])


def test_decreasing_event_times_stop_after_the_instances_before() -> None:
    rows = synthetic(1300, seed=6)
    rows[1100] = rows[1100]._replace(ts=rows[1099].ts - 1.0)
    exp = ColumnarExperiment(config(), learners=learners([]))
    with pytest.raises(ValueError, match="event time must not decrease"):
        drive_immediate(exp, rows, None, False)
    assert exp.n_labelled == 1100


@pytest.mark.parametrize(
    ("learner_specs", "settings"),
    [
        (["ta:nb", "nb"], {}),  # a wrapper reads the released labels between the calls
        (["nb", "nochange"], {"detectors": ["ph[lambda=5]"], "drift_reset": True}),
    ],
)
def test_one_pass_where_the_evaluation_reaches_the_learners(learner_specs, settings) -> None:
    cfg = ExperimentConfig("s", learner_specs, positive="up", snapshot_every=97, **settings)
    rows = synthetic(1500, seed=7)
    exp = ColumnarExperiment(cfg)
    assert not exp.two_pass
    got = drive_immediate(exp, rows, None, False)
    assert document(got) == document(one_by_one(ColumnarExperiment(cfg), rows))


class Blocky(Recorder):
    """A :class:`Recorder` that also takes a whole block in one call (as MOA's learners
    do), counting the instances itself; it raises on instance ``fail_at`` at
    ``fail_step``, whichever way it is called."""

    def __init__(self, fail_at: int | None = None, fail_step: str = "predict") -> None:
        super().__init__([], None)
        self.seen, self.blocks, self.fail, self.fail_step = 0, 0, fail_at, fail_step

    def _check(self, at: int | None, step: str) -> None:
        if (at, step) == (self.fail, self.fail_step):
            raise KeyError("no")

    def predict_proba_one(self, x: Any, *, at: int | None = None, **kw: Any) -> dict:
        self._check(at, "predict")
        return super().predict_proba_one(x, at=at)

    def learn_one(self, x: Any, y: Any, *, at: int | None = None, **kw: Any) -> None:
        self._check(at, "learn")
        super().learn_one(x, y, at=at)

    def predict_learn_many(self, xs: list, ys: list) -> list[dict]:
        self.blocks += 1
        answers: list[dict] = []
        for done, (x, y) in enumerate(zip(xs, ys, strict=True)):
            step = "predict"
            try:
                answers.append(self.predict_proba_one(x, at=self.seen))
                step = "learn"
                self.learn_one(x, y, at=self.seen)
            except KeyError as exc:
                raise StoppedAt(done, step, exc, answers) from exc
            self.seen += 1
        return answers


def with_blocky(fail_at: int | None = None, blocky_at: int | None = None, step: str = "predict"):
    return {**learners([], fail_at), "blocky": Blocky(blocky_at, step)}


def test_a_learner_given_whole_blocks_gives_the_results_of_one_by_one() -> None:
    rows = synthetic(1500, seed=8)
    cfg = ExperimentConfig("s", [*config().learners, "blocky"], **config_settings())
    got_learners = with_blocky()
    got = drive_immediate(ColumnarExperiment(cfg, learners=got_learners), rows, None, False)
    expected = one_by_one(ColumnarExperiment(cfg, learners=with_blocky()), rows)
    assert document(got) == document(expected)
    assert got_learners["blocky"].blocks == 3  # 1,500 instances in blocks of 512


def config_settings() -> dict[str, Any]:
    return {"window": 50, "fading": 0.9, "positive": "up", "snapshot_every": 97}


@pytest.mark.parametrize(
    ("rec_at", "blocky_at", "step", "first"),
    [
        (700, 800, "predict", ("rec", 700, "predict")),
        (700, 600, "learn", ("blocky", 600, "learn")),
        (700, 700, "predict", ("rec", 700, "predict")),  # the same instance: order of the slots
        (None, 700, "learn", ("blocky", 700, "learn")),
        (701, 700, "learn", ("blocky", 700, "learn")),
    ],
)
def test_the_failure_raised_is_the_one_met_first_one_by_one(rec_at, blocky_at, step, first) -> None:
    rows = synthetic(1500, seed=9)
    cfg = ExperimentConfig("s", [*config().learners, "blocky"], **config_settings())
    exp = ColumnarExperiment(cfg, learners=with_blocky(rec_at, blocky_at, step))
    with pytest.raises(LearnerFailed) as failed:
        drive_immediate(exp, rows, None, False)
    assert (failed.value.name, failed.value.index, failed.value.step) == first
    ref = ColumnarExperiment(cfg, learners=with_blocky(rec_at, blocky_at, step))
    with pytest.raises(LearnerFailed) as failed_ref:
        one_by_one(ref, rows)
    assert (failed_ref.value.name, failed_ref.value.index, failed_ref.value.step) == first
    # the instance a learner failed to learn is evaluated: every learner answered it
    assert exp.n_labelled == ref.n_labelled == first[1] + (first[2] == "learn")
    got, expected = exp.results(), ref.results()
    for part in ("learners", "comparisons", "diagnostics"):
        assert json.dumps(got[part]) == json.dumps(expected[part])
