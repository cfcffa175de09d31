"""The ``moa`` target of ``streameval bench``: its verdicts, and the River bare loop peer."""

from __future__ import annotations

from pathlib import Path

import pytest

from streameval.bench import cli
from streameval.bench.harness import Measured
from streameval.bench.target1 import child_river
from streameval.bench.target_moa import _row, child_river_loop


def _measured(seconds: list[float], accuracy: object) -> Measured:
    m = Measured("k", {}, "label")
    m.runs = [{"seconds": s, "cpu_seconds": s, "accuracy": accuracy} for s in seconds]
    return m


def test_the_moa_target_can_be_selected_alone() -> None:
    assert cli._targets(["moa"]) == ["moa"]
    assert cli._targets(["1,moa"]) == ["1", "moa"]


@pytest.mark.parametrize(
    ("ours", "acc", "ratio", "result"),
    [
        ([2.6, 2.5, 9.0], 0.8123, 0.8, "PASS"),  # median 2.6 vs CapyMOA's 2.08: 0.8
        ([2.7, 2.7, 2.7], 0.8123, 0.77, "FAIL"),  # too slow
        ([1.0, 1.0, 1.0], 0.8124, 2.08, "FAIL"),  # fast, but not MOA's accuracy
    ],
)
def test_the_target_needs_the_speed_and_capymoas_accuracy(
    ours: list[float], acc: float, ratio: float, result: str
) -> None:
    peer = _measured([2.08, 1.0, 3.0], 0.81234)
    row = _row("m1a", "w", "x", 1000, _measured(ours, {"moa:NaiveBayes": acc}), peer, "NaiveBayes",
               "moa:NaiveBayes")  # fmt: skip
    assert row.ratio == pytest.approx(ratio, abs=0.005)
    assert row.result == result
    peer_row = _row("m1d", "w", "x", 1000, _measured(ours, acc), peer, "NaiveBayes", "loop")
    assert peer_row.result == "n/a" and peer_row.ratio == row.ratio


def test_the_bare_loop_scores_what_progressive_val_score_scores(data_dir: Path) -> None:
    """Same predictions as River's own loop: River skips the first (empty) prediction,
    the bare loop counts it as a miss, so their hits are equal."""
    job = {"dataset": "electricity", "limit": 800, "data_dir": str(data_dir), "delay": "0"}
    for learner in ("nb", "ht"):
        loop = child_river_loop({**job, "learner": learner})
        river = child_river({**job, "learner": learner})
        assert loop["n_instances"] == 800 and river["n_instances"] == 799
        assert round(loop["accuracy"] * 800) == round(river["accuracy"] * 799)


@pytest.mark.moa
def test_the_python_side_of_the_split_runs_the_adapter_on_python_stand_ins(data_dir: Path) -> None:
    """The profile's "python" part: the adapter's code with a list for the Java buffer, a
    fixed array of votes and no training: every prediction is those votes' probabilities,
    and the rows land in the list."""
    from streameval.pipeline.streams.datasets import load

    from streameval.bench.moa_split import python_only

    rows = list(load("electricity", data_dir=str(data_dir)).iter_instances(600))
    model = python_only("NaiveBayes", rows[:500])
    frozen = model._proba(list(model._votes(None)))
    assert sorted(frozen) == ["DOWN", "UP"] and sum(frozen.values()) == pytest.approx(1.0)
    for r in rows[500:]:
        assert model.predict_proba_one(r.x) == frozen
        model.learn_one(r.x, r.y)
    last = rows[-1]
    assert model._buffer[:-1] == model._values(last.x)[:-1]
    assert model._buffer[-1] == model._classes.index(last.y)


@pytest.mark.moa
def test_moa_loops_compares_the_same_results_with_and_without_the_java_loops(
    data_dir: Path,
) -> None:
    """The profile's A/B: both sides run (the loops restored after) and give equal results."""
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.learners import moa, moa_java

    from streameval.bench.moa_loops import compare

    cfg = ExperimentConfig(
        "a", ["moa:NaiveBayes"], dataset="covtype", delay="200", limit=1500, reeval_k=10
    )
    got = compare(cfg, 1, str(data_dir))
    assert got["equal"] is True and got["loops"] > 0 and got["call by call"] > 0
    assert moa.loops is moa_java.loops
