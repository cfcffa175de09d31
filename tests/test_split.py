"""A re-evaluation run on two processes gives the one-process results, number for number.

``streameval.pipeline.split`` moves the later half of the model learners to a helper
process, which sends their answers to the main process. Every case runs a configuration
with ``jobs=1`` and ``jobs=2`` (in a fresh process each, ``split_runs.py``) and compares
the whole results document (every metric, bin, comparison, counter and curve) and every
output event; the helper's own learners are named in ``runtime``.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
from multiprocessing.context import ForkProcess
from pathlib import Path
from typing import Any

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.split import Answers, RecordingCalls, offloaded_learners

HERE = Path(__file__).parent
BASE = {"stream": "s", "reeval_k": 10, "bins": 20, "delay": "150", "snapshot_every": 0}


def _both(config: dict[str, Any], fail_at: int | None = None) -> dict[str, Any]:
    argv = [sys.executable, str(HERE / "split_runs.py"), json.dumps(config)]
    if fail_at is not None:
        argv.append(str(fail_at))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _same(config: dict[str, Any], helper: list[str]) -> dict[str, Any]:
    runs = _both(config)
    one, two = runs["1"], runs["2"]
    assert "error" not in one and "error" not in two, (one.get("error"), two.get("error"))
    assert (one["processes"], two["processes"]) == (1, 2)
    assert two["helper"] == helper
    assert two["results"] == one["results"]
    assert two["outputs"] == one["outputs"]
    return one


def test_covtype_prefix_four_learners(data_dir: Path) -> None:
    """The bench's run (nochange, majority, nb, ht on Covertype), on a prefix: ht moves."""
    config = {
        **BASE,
        "dataset": "covtype",
        "limit": 2500,
        "learners": ["nochange", "majority", "nb", "ht"],
        "snapshot_every": 400,  # a snapshot makes the first predictions that wait
        "_data_dir": str(data_dir),
    }
    one = _same(config, ["ht"])
    assert one["results"]["overhead"]["n_repredictions"] > 30_000


def test_binary_stream_with_scores_outputs_wrappers_and_drift_resets() -> None:
    """AUC and prediction events (first predictions one by one, not deferred), the
    temporal wrappers, windows, fading, comparisons, snapshots, and a learner reset by
    its detector (the helper resets its copy on the same label)."""
    config = {
        **BASE,
        "dataset": "sea_drift[n=3000]",
        "delay": "90",
        "reeval_k": 4,
        "learners": ["nochange", "majority", "nb", "ht", "ta:nb", "tc:ht"],
        "window": 300,
        "fading": 0.99,
        "detectors": ["ph[estimator=raw,lambda=5]", "ddm"],
        "drift_reset": True,
        "snapshot_every": 500,
        "_outputs": True,
    }
    one = _same(config, ["ta:nb", "tc:ht"])
    assert sum(card.get("drift_resets", 0) for card in _cards(one)) > 0, "no learner was reset"
    assert {o.get("kind") for o in one["outputs"]} >= {"first", "repredict", "final"}


@pytest.mark.parametrize("protocol", ["papers", "moa"])
def test_one_model_learner_moves_alone(protocol: str) -> None:
    config = {
        **BASE,
        "dataset": "agrawal[n=2000]",
        "learners": ["nochange", "majority", "ht"],
        "protocol": protocol,
    }
    _same(config, ["ht"])


def test_a_learner_failing_in_the_helper_fails_the_run_as_in_one_process() -> None:
    """River's tree raises at its 700th ``learn_one``: in the helper under ``jobs=2``."""
    config = {**BASE, "dataset": "agrawal[n=2000]", "learners": ["nochange", "nb", "ht"]}
    runs = _both(config, fail_at=700)
    assert (
        runs["1"]
        == runs["2"]
        == {"error": "learner 'ht' failed on instance 699 (learn): ArithmeticError: the tree broke"}
    )


def test_the_helper_is_stopped_when_the_main_process_fails(monkeypatch) -> None:
    """The main process fails early in a long run: its helper is killed (not left to run
    the stream to its end) and reaped."""
    config = ExperimentConfig.from_dict(
        {**BASE, "dataset": "sea[n=100000]", "learners": ["nochange", "ht"]}
    )
    started: list[Any] = []
    start = ForkProcess.start

    def remember(process: Any) -> None:
        started.append(process)
        start(process)

    monkeypatch.setattr(ForkProcess, "start", remember)
    seen: list[Any] = []

    def stop(out: Any) -> None:
        seen.append(out)
        if len(seen) == 2000:
            raise KeyboardInterrupt

    children_before = set(multiprocessing.active_children())
    with pytest.raises(KeyboardInterrupt):
        evaluate_config(config, on_output=stop, jobs=2)
    assert [p.exitcode for p in started] == [-signal.SIGKILL]
    assert set(multiprocessing.active_children()) == children_before


@pytest.mark.parametrize(
    ("dataset", "extra"),
    [("led[n=1500]", {"snapshot_every": 300}), ("agrawal[n=1500]", {"stop_at_labels": 900})],
)
def test_an_experiment_without_scoring_makes_the_same_calls(
    dataset: str, extra: dict[str, Any]
) -> None:
    """The helper's experiment (``scoring=False``) asks its learners what a scoring one
    asks, in the same order (first predictions waiting for a round on the multi-class
    stream, one by one for the AUC on the binary one), and keeps no prediction."""
    config = ExperimentConfig.from_dict(
        {**BASE, "dataset": dataset, "learners": ["nochange", "nb", "ht"], **extra}
    )
    dataset_, config = prepare(config, None)
    answers: dict[bool, list[Any]] = {True: [], False: []}
    experiments = {}
    for scoring in (True, False):
        exp = Experiment(config, scoring=scoring)
        exp.calls = RecordingCalls(exp.calls, _ListSink(answers[scoring]))
        for event in schedule(config, dataset_):
            exp.process(event)
        experiments[scoring] = exp
    assert len(answers[True]) > 1000
    assert answers[False] == answers[True]
    scored = [e.slots[0].card.n_scored for e in experiments.values()]
    assert scored == [experiments[True].n_labelled, 0]
    assert experiments[True].max_held > 0 and experiments[False].max_held == 0
    with pytest.raises(ValueError, match="without scoring cannot reset learners on drift"):
        Experiment(ExperimentConfig("s", ["nb"], drift_reset=True), scoring=False)


class _ListSink:
    def __init__(self, out: list[Any]) -> None:
        self.out = out

    def put(self, answer: Any) -> None:
        self.out.append(answer)


def test_jobs_are_checked() -> None:
    reeval = ExperimentConfig("s", ["nochange", "nb"], dataset="sea[n=100]", reeval_k=5)
    with pytest.raises(ValueError, match="jobs must be 1 or 2"):
        evaluate_config(reeval, jobs=3)
    plain = ExperimentConfig("s", ["nochange", "nb"], dataset="sea[n=100]", delay="5")
    with pytest.raises(ValueError, match="jobs=2: only a run with re-evaluation"):
        evaluate_config(plain, jobs=2)
    baselines = ExperimentConfig("s", ["nochange", "majority"], dataset="sea[n=100]", reeval_k=5)
    with pytest.raises(ValueError, match="jobs=2: no learner besides the baselines"):
        evaluate_config(baselines, jobs=2)
    moa = ExperimentConfig("s", ["nb", "moa:NaiveBayes"], dataset="sea[n=100]", reeval_k=5)
    with pytest.raises(ValueError, match="jobs=2: moa: learners run in a Java VM"):
        evaluate_config(moa, jobs=2)


def test_the_later_half_of_the_model_learners_moves() -> None:
    def moved(*names: str) -> list[str]:
        return offloaded_learners(ExperimentConfig("s", list(names), reeval_k=5))

    assert moved("nochange", "majority", "nb", "ht") == ["ht"]
    assert moved("nb", "nochange", "ht", "ta:nb") == ["ht", "ta:nb"]
    assert moved("a", "b", "c") == ["b", "c"]
    assert moved("nochange", "majority") == []


def test_answers_refuse_a_diverged_run() -> None:
    """The main process checks each answer's kind and size against its own call, and
    that the helper gave no answer more and ended as it should."""
    answers, send = _pipe()
    send.send(("answers", [("many", ["a", "b"]), ("one", ("a", {"a": 1.0}))]))
    assert answers.next("many", 2) == ["a", "b"]
    with pytest.raises(RuntimeError, match="answered a one call for 1 instance"):
        answers.next("many", 1)
    answers, send = _pipe()
    send.send(("answers", [("many", ["a"])]))
    send.send(("done", {}))
    with pytest.raises(RuntimeError, match="more answers than were asked"):
        answers.close()
    answers, send = _pipe()
    send.send(("done", {"cpu_seconds": 1.0}))
    with pytest.raises(RuntimeError, match="finished before the main process"):
        answers.next("one", 1)
    answers, send = _pipe()
    send.close()
    with pytest.raises(RuntimeError, match="ended without its answers"):
        answers.next("one", 1)


def _pipe() -> tuple[Answers, Any]:
    receive, send = multiprocessing.Pipe(duplex=False)
    return Answers(receive), send


def _cards(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["results"]["learners"].values())
