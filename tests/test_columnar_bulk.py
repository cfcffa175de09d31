"""The second pass of test-then-train in bulk (:mod:`streameval.pipeline.columnar.bulk`):
the blocks it scores give, value for value, what the instance-by-instance pass and the
per-event core give, and the blocks it cannot score are left to the instance-by-instance
pass untouched."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from streameval.pipeline.columnar import ColumnarExperiment, bulk
from streameval.pipeline.columnar import experiment as experiment_module
from streameval.pipeline.columnar import labels as labels_module
from streameval.pipeline.columnar.driver import drive_immediate
from streameval.pipeline.columnar.references import ReferenceScores
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.learners.mixins import ProbaMixin
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay
from streameval.pipeline.streams.schedule import replay_schedule
from test_columnar import document, synthetic
from test_columnar_immediate import config, learners, one_by_one


class Ghost(ProbaMixin):
    """Answers labels it never learned ("ghost-0".."ghost-4", one per 300 instances seen):
    codes that are not labels appear inside blocks, in the middle of the stream."""

    def __init__(self) -> None:
        self.n = 0

    def predict_proba_one(self, x: Any, **kw: Any) -> dict:
        return {f"ghost-{self.n // 300}": 0.75, "up": 0.25} if self.n else {}

    def learn_one(self, x: Any, y: Any, **kw: Any) -> None:
        self.n += 1

    def clone(self) -> Ghost:
        return Ghost()


def with_ghost() -> dict[str, Any]:
    return {**learners([]), "ghost": Ghost()}


def spy(monkeypatch) -> list[bool]:
    """What every call of the bulk pass answered."""
    verdicts: list[bool] = []
    real = bulk.score_in_bulk

    def recorded(*args: Any) -> bool:
        verdicts.append(real(*args))
        return verdicts[-1]

    monkeypatch.setattr(experiment_module, "score_in_bulk", recorded)
    return verdicts


@pytest.mark.parametrize("every", [97, 100, None])
def test_bulk_blocks_give_the_values_of_one_by_one_and_of_the_per_event_core(
    monkeypatch, every
) -> None:
    monkeypatch.setattr("streameval.pipeline.columnar.driver.IMMEDIATE_BLOCK", 100)
    rows = synthetic(1500, seed=11)
    names = ["nochange", "tree", "nb", "rec", "majority", "ghost"]
    cfg = ExperimentConfig("s", names, window=50, fading=0.9, positive="up", snapshot_every=every)
    expected = one_by_one(ColumnarExperiment(cfg, learners=with_ghost()), rows)
    verdicts = spy(monkeypatch)
    got = drive_immediate(ColumnarExperiment(cfg, learners=with_ghost()), rows, None, False)
    # 15 blocks: the first meets new labels, and so does the one where a third class
    # comes, in the middle of the stream; they go one by one, every other block in bulk
    assert len(verdicts) == 15 and verdicts[0] is False and verdicts.count(False) == 2
    assert document(got) == document(expected)
    reference = Experiment(cfg, learners=with_ghost())
    reference.run(list(replay_schedule("s", rows, InstanceDelay(0))))
    assert document(got) == document(reference.results())
    assert got["learners"]["ghost"]["n_scored"] == 1500


def test_a_block_with_a_label_not_yet_learned_is_left_untouched() -> None:
    exp = ColumnarExperiment(config(), learners=learners([]))
    rows = synthetic(40, seed=2)
    before = (exp.n_instances, exp.n_labelled, len(exp.codes))
    assert bulk.score_in_bulk(exp, rows, [[{}] * 40, [{}] * 40, [{}] * 40]) is False
    assert (exp.n_instances, exp.n_labelled, len(exp.codes)) == before


@pytest.mark.parametrize(("second", "in_bulk"), [(2, True), ("1", False)])
def test_labels_that_share_a_str_are_left_to_the_one_by_one_pass(second, in_bulk) -> None:
    # 1 and "1" are two classes with one str: which one Majority takes on a tie is the
    # instance-by-instance rule's to say
    exp = ColumnarExperiment(ExperimentConfig("s", ["majority"]))
    labels = [1, second, 1]
    for i, y in enumerate(labels):
        exp.features(str(i), float(i), {})
        exp.label(str(i), float(i), y)
    rows = [Instance(str(i + 3), float(i + 3), {}, y) for i, y in enumerate(labels)]
    assert bulk.score_in_bulk(exp, rows, []) is in_bulk
    assert exp.n_labelled == (6 if in_bulk else 3)


def test_the_reference_scores_in_bulk_are_those_of_reference_scores_float_for_float() -> None:
    # three classes, the positive one learned second: the shares summed in learning order
    rng = np.random.default_rng(5)
    labels = ["c", "a", "b"]
    y = rng.choice(3, size=400, p=[0.5, 0.3, 0.2])
    y[:3] = [0, 1, 2]
    refs, counts = ReferenceScores("a"), [0, 0, 0]
    expected = []
    for code in y.tolist():
        if counts[code] == 0:
            refs.learned(code, labels)
        counts[code] += 1
        refs.update(code, counts)
        expected.append(refs.maj)
    running = np.cumsum(np.eye(3, dtype=np.int64)[y], axis=0)
    assert labels_module.share(running, refs.order, refs.code).tolist() == expected
    ties = labels_module.majority(np.array([[2, 2, 1], [1, 3, 3], [1, 2, 3], [0, 0, 0]]), labels)
    assert ties.tolist() == [1, 1, 2, -1]  # ties to "a"; "b" the most; nothing learned


def state(exp: ColumnarExperiment) -> tuple:
    counts = list(exp._counts)
    while counts and counts[-1] == 0:  # the bulk pass sizes the counts by the codes
        counts.pop()
    refs = exp._refs
    return (
        exp.n_instances, exp.n_labelled, exp.last_ts, exp.max_pending,
        exp._per, exp._maj, counts, refs.per, refs.maj,
    )  # fmt: skip


def test_a_bulk_block_leaves_the_experiment_as_one_by_one_leaves_it() -> None:
    # Majority turns from "a" to "b" inside the block, and No-Change ends on "c"
    head = [Instance(str(i), float(i), {}, "b" if i % 2 else "a") for i in range(301)]
    block = [Instance(str(301 + i), 301.0 + i, {}, "c" if i == 99 else "b") for i in range(100)]
    cfg = ExperimentConfig("s", ["nochange", "majority"], positive="b", snapshot_every=1000)
    exps = [ColumnarExperiment(cfg) for _ in range(2)]
    for exp in exps:
        for inst in [*head, Instance("c0", 300.5, {}, "c")]:
            exp.features(inst.id, inst.ts, inst.x)
            exp.label(inst.id, inst.ts, inst.y)
    for inst in block:
        exps[0].features(inst.id, inst.ts, inst.x)
        exps[0].label(inst.id, inst.ts, inst.y)
    assert bulk.score_in_bulk(exps[1], block, []) is True
    assert exps[0]._maj == exps[0].codes.index["b"] and exps[0]._per == exps[0].codes.index["c"]
    assert state(exps[1]) == state(exps[0])
    assert document(exps[1].results()) == document(exps[0].results())
