"""River models in the two-pass test-then-train (:mod:`streameval.pipeline.columnar.river_loop`):
one tight loop per block, the same results and failures as the instances one by one, and
no object per instance held for the garbage collector between the two passes."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from river import base, naive_bayes, tree
from streameval.pipeline.columnar import ColumnarExperiment
from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.columnar.callers import callers_for
from streameval.pipeline.columnar.driver import drive_immediate
from streameval.pipeline.columnar.immediate import ask_and_learn
from streameval.pipeline.columnar.river_loop import Answered
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.failure import LearnerFailed
from streameval.pipeline.learners.baselines import NoChange
from streameval.pipeline.learners.river_adapter import RiverClassifier
from test_columnar import document, synthetic
from test_columnar_immediate import one_by_one


class Faulty(naive_bayes.GaussianNB):
    """River's Gaussian naive Bayes that raises on its ``n``-th call of ``step``."""

    def __init__(self, step: str = "predict", n: int = -1) -> None:
        super().__init__()
        self.step, self.n, self.calls = step, n, {"predict": 0, "learn": 0}

    def _count(self, step: str) -> None:
        if self.calls[step] == self.n and step == self.step:
            raise ArithmeticError(f"{step} {self.n}")
        self.calls[step] += 1

    def predict_proba_one(self, x: dict) -> dict:
        self._count("predict")
        return super().predict_proba_one(x)

    def learn_one(self, x: dict, y: Any) -> None:
        self._count("learn")
        super().learn_one(x, y)


class LabelsOnly(base.Classifier):
    """A River classifier with ``predict_one`` only: River's ``predict_proba_one`` raises
    ``NotImplementedError``; it predicts the label it learned last."""

    def __init__(self) -> None:
        self.last: Any = None

    def learn_one(self, x: dict, y: Any) -> None:
        self.last = y

    def predict_one(self, x: dict) -> Any:
        return self.last


NUMERIC = {"window": 50, "fading": 0.9, "positive": "up", "snapshot_every": 97}


def numeric(n: int, seed: int) -> list[Any]:
    """:func:`synthetic` without its ``str`` feature (River's Gaussian naive Bayes)."""
    return [
        inst._replace(x={k: v for k, v in inst.x.items() if k != "kind"})
        for inst in synthetic(n, seed)
    ]


def experiment(model: Any) -> ColumnarExperiment:
    cfg = ExperimentConfig("s", ["nochange", "m", "tree"], **NUMERIC)
    learners = {
        "nochange": NoChange(),
        "m": model,
        "tree": tree.HoeffdingTreeClassifier(grace_period=50),
    }
    return ColumnarExperiment(cfg, learners=learners)


def test_a_river_model_is_called_in_blocks_with_the_results_of_one_by_one() -> None:
    rows = numeric(1500, seed=11)
    exp = experiment(naive_bayes.GaussianNB())
    assert [c.block is not None for c in exp._callers] == [False, True, True]
    got = drive_immediate(exp, rows, None, False)
    expected = one_by_one(experiment(naive_bayes.GaussianNB()), rows)
    assert document(got) == document(expected)
    assert got["learners"]["m"]["accuracy"] > 0.6  # it learned: the answers were read right


@pytest.mark.parametrize(("step", "n"), [("predict", 700), ("learn", 700), ("predict", 0)])
def test_a_river_model_failing_in_a_block_fails_where_one_by_one_does(step, n) -> None:
    rows = numeric(1500, seed=12)
    exp = experiment(Faulty(step, n))
    with pytest.raises(LearnerFailed) as failed:
        drive_immediate(exp, rows, None, False)
    ref = experiment(Faulty(step, n))
    with pytest.raises(LearnerFailed) as failed_ref:
        one_by_one(ref, rows)
    where = (failed.value.name, failed.value.index, failed.value.step)
    assert where == (failed_ref.value.name, failed_ref.value.index, failed_ref.value.step)
    assert where == ("m", n, step)
    assert isinstance(failed.value.cause, ArithmeticError)
    # the instance a learner failed to learn is evaluated: every learner answered it
    assert exp.n_labelled == ref.n_labelled == n + (step == "learn")
    got, expected = exp.results(), ref.results()
    for part in ("learners", "comparisons", "diagnostics"):
        assert json.dumps(got[part]) == json.dumps(expected[part])


def test_a_river_model_without_probabilities_is_answered_by_its_label() -> None:
    rows = numeric(1200, seed=13)
    got = drive_immediate(experiment(LabelsOnly()), rows, None, False)
    expected = one_by_one(experiment(LabelsOnly()), rows)
    assert document(got) == document(expected)
    # it predicts the last label: No-Change's predictions, so the same accuracy
    assert got["learners"]["m"]["accuracy"] == got["learners"]["nochange"]["accuracy"]


def test_a_block_keeps_no_object_per_instance_for_the_collector() -> None:
    # CPython runs its collector when the objects it counts (every dict and tuple made
    # and not yet freed) pass 700: the two passes over a block of 512 instances must hold
    # no more of them than River's own loop over the same model does
    rows = numeric(3000, seed=14)
    model, again = naive_bayes.GaussianNB(), naive_bayes.GaussianNB()
    caller = callers_for([_Slot("m", RiverClassifier(model))], "up", label_only_ok=True)
    ask_and_learn(caller, InstanceBlock.of(rows[:2000]), 0, None)  # the model's state made
    for inst in rows[:2000]:
        again.predict_proba_one(inst.x)
        again.learn_one(inst.x, inst.y)
    block = InstanceBlock.of(rows[2000:2512])
    probas: list[dict] = []

    def river_loop() -> None:
        for inst in rows[2000:2512]:
            probas.append(again.predict_proba_one(inst.x))
            again.learn_one(inst.x, inst.y)
        probas.clear()  # River's loop keeps no answer: count what the model holds

    river_grown, _ = _held_objects(river_loop)
    grown, (asked, done, failure) = _held_objects(lambda: ask_and_learn(caller, block, 2000, None))
    assert (done, failure) == (512, None)
    assert isinstance(asked[0], Answered) and len(asked[0]) == 512
    assert grown - river_grown < 32, f"{grown} held by a block of 512, River's loop {river_grown}"
    # the answers read are those of the model's own dicts
    fresh = naive_bayes.GaussianNB()
    for inst in rows[:2000]:
        fresh.learn_one(inst.x, inst.y)
    for inst in rows[2000:2512]:
        probas.append(fresh.predict_proba_one(inst.x))
        fresh.learn_one(inst.x, inst.y)
    assert asked[0].labels == [max(sorted(p), key=p.get) if p else None for p in probas]
    assert asked[0].scores == [p.get("up", 0.0) / sum(p.values()) for p in probas]


def _held_objects(run: Any) -> tuple[int, Any]:
    """How many more objects the collector counts after ``run()`` than before, and what
    it returned (the collector off meanwhile)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        before = gc.get_count()[0]
        out = run()
        return gc.get_count()[0] - before, out
    finally:
        if enabled:
            gc.enable()


class _Slot:
    def __init__(self, name: str, learner: Any) -> None:
        self.name, self.learner = name, learner
