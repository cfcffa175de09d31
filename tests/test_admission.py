"""Admission by cost, and no message takes a worker down.

* :func:`~streameval.pipeline.cost.estimate` bounds the memory real experiments reach
  (measured with ``tracemalloc`` on full windows), within a sane factor;
* an experiment over budget is refused at once, whatever its size parameter, before
  anything is allocated; the worker's budget counts every stream it holds;
* an exception escaping a message's handling (``MemoryError`` while defining or pushing)
  dead-letters that message, stops that stream, and the worker serves the others.

Worker-level tests use the fake-producer harness of ``test_fuzz_ingest``; the guarantee on
the embedded broker is ``test_admission_kafka.py``.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from streameval.agents.admission import Admission, Budget
from streameval.agents.codec import encode, input_message
from streameval.pipeline.config import LIMITS, ExperimentConfig
from streameval.pipeline.cost import MiB, estimate
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.learners.baselines import NoChange
from streameval.pipeline.learners.registry import REGISTRY
from streameval.pipeline.runner import StreamRunner
from streameval.pipeline.spec import MAX_INT_PARAM
from test_fuzz_ingest import NAMES, Harness

from streameval import schemas

#: Small real experiments whose windows fill (4000 instances, label delay 40): each term
#: of the model is exercised (windows, bins, pairs, detectors, AUC, trees, kNN, wrappers).
CALIBRATION = {
    "metrics": {"learners": ["nochange", "majority", "nb"], "window": 2000},
    "bins": {
        "learners": ["nochange", "majority[window=500]"],
        "window": 1500,
        "fading": 0.99,
        "reeval_k": 5,
        "bins": 50,
    },
    "pairs": {"learners": [f"majority[window={w}]" for w in range(10, 70, 10)], "window": 2500},
    "detectors": {
        "learners": ["nochange", "nb"],
        "window": 500,
        "detectors": ["ph[estimator=window,w=2000]", "ratio_window[w1=2500,w2=500]", "adwin"],
    },
    "auc-tree": {"learners": ["nochange", "ht"], "window": 1000, "auc_window": 2000},
    "knn-wrapper": {"learners": ["ta2:nb", "knn[window_size=300]"], "window": 1000},
}


@pytest.mark.parametrize("name", sorted(CALIBRATION))
def test_estimate_bounds_the_memory_of_real_experiments(name: str) -> None:
    config = ExperimentConfig(
        "s", dataset="sea", limit=4000, delay="40", pending_cap=200, **CALIBRATION[name]
    )
    dataset, config = prepare(config)
    events = list(schedule(config, dataset))
    tracemalloc.start()
    try:
        experiment = Experiment(config)
        for event in events:
            experiment.process(event)
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    estimated = estimate(config).memory_bytes
    assert experiment.n_labelled == 4000 and config.positive is not None  # windows full, AUC on
    assert used <= estimated <= 8 * used, (name, used, estimated)


def test_each_term_grows_with_what_sizes_it() -> None:
    """Hand-computed differences: one more window slot, bin, pair or ensemble member."""
    base = {"stream": "s", "learners": ["nochange", "nb"], "window": 1000}

    def memory(**change: Any) -> dict[str, int]:
        return estimate(ExperimentConfig(**{**base, **change})).terms

    wider = memory(window=2000)
    assert wider["metrics"] - memory()["metrics"] == 2 * 1000 * 88  # two learners, 88 B a slot
    assert wider["pairs"] - memory()["pairs"] == 1 * 2 * 1000 * 80  # one pair, Q and McNemar
    binned = memory(reeval_k=1, bins=10)["binned"] - memory(reeval_k=1, bins=9)["binned"]
    assert binned == 2 * (2 * 88 + 1000 * 27)  # per learner and estimator a bin, 27 B a slot
    three = memory(learners=["nochange", "nb", "ht"])
    assert three["pairs"] == 3 * memory()["pairs"]  # 3 pairs instead of 1
    arf = memory(learners=["nochange", "arf[n_models=20]"])["learners"]
    assert arf - memory(learners=["nochange", "arf"])["learners"] == 10 * 3 * MiB


def test_a_huge_ensemble_parameter_is_refused_at_once() -> None:
    """Building ``arf[n_models=10000000]`` would block the worker for hours; within every
    limit, it is refused from the config alone, in well under a second."""
    config = ExperimentConfig("s", ["nochange", f"arf[n_models={MAX_INT_PARAM}]"])
    start = time.perf_counter()
    reason = Admission().refusal(config)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.1, elapsed
    assert reason is not None and "needs an estimated 28.6 TiB" in reason
    assert reason.endswith("over the per-stream memory budget of 256.0 MiB")


def generated_bombs(n: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """Experiments with every parameter at most its limit, over budget together."""
    import random

    rng = random.Random(seed)
    for i in range(n):
        learners = [
            f"majority[window={w}]" for w in rng.sample(range(1, 10**6), LIMITS["learners"])
        ]
        yield {
            "stream": f"bomb-{i}",
            "learners": learners[: rng.randint(8, LIMITS["learners"])],
            "window": rng.randint(10**5, LIMITS["window"]),
            "reeval_k": rng.randint(1, 10),
            "bins": rng.randint(0, LIMITS["bins"]),
            "max_lag": rng.randint(0, LIMITS["max_lag"]),
            "detectors": [f"ph[estimator=window,w={rng.randint(1, MAX_INT_PARAM)}]"],
        }


def test_generated_bombs_are_each_within_limits_and_over_budget() -> None:
    for message in generated_bombs(20):
        config = ExperimentConfig.from_dict(message)  # every single-parameter limit holds
        assert Admission().refusal(config) is not None


def test_the_worker_budget_counts_every_stream_it_holds() -> None:
    """Streams of 32.1 MiB each under a 100 MiB worker budget: three fit, the fourth is
    refused (and only it), with the worker's sum in its reason and a failed notice."""
    h = Harness(budget=Budget(stream_memory=64 * MiB, worker_memory=100 * MiB))
    for stream in "abcd":
        h.send("experiments", encode({"stream": stream, "learners": ["nochange"]}), b"x")
    assert sorted(h.worker.runners) == ["a", "b", "c"]
    [letter] = h.deadletters()
    assert letter["kind"] == "over_budget" and "stream 'd' refused" in letter["reason"]
    assert "with the 3 stream(s) this worker holds (96.2 MiB)" in letter["reason"]
    [notice] = [m for m in h.producer.on("metrics") if m["kind"] == "failed"]
    assert notice["stream"] == "d" and notice["reason"] == "over_budget"
    assert schemas.validate("metrics", notice) is None
    h.send("experiments", encode({"stream": "a", "learners": ["nochange"]}), b"x")
    assert len(h.deadletters()) == 1  # a definition read again is not charged twice
    # the refused stream's events are not parked to wait for a definition that was refused
    h.send("features", encode({"stream": "d", "id": "0", "ts": 0.0, "x": {"a": 1.0}, "seq": 0}))
    assert not h.worker.parking
    letter = h.deadletters()[-1]
    assert letter["kind"] == "over_budget" and letter["topic"] == NAMES.features
    assert letter["reason"].startswith("stream 'd' is not defined: stream 'd' refused")


class Hungry(NoChange):
    """A learner whose construction runs out of memory."""

    def __init__(self, **params: Any) -> None:
        raise MemoryError("cannot allocate the model")


@pytest.fixture
def hungry() -> Iterator[str]:
    REGISTRY.register("hungry", Hungry)
    yield "hungry"
    REGISTRY.unregister("hungry")


def _labelled(h: Harness, stream: str, n: int) -> None:
    for i in range(n):
        event = {"stream": stream, "id": str(i), "ts": float(i)}
        h.send("features", encode({**event, "x": {"a": float(i)}, "seq": 2 * i}))
        h.send("labels", encode({**event, "y": "ab"[i % 3 == 0], "seq": 2 * i + 1}))
    end = {"stream": stream, "end": True, "ts": float(n), "seq": 2 * n, "n_events": 2 * n}
    h.send("features", encode(end))
    h.send("labels", encode(end))


def test_memory_error_while_defining_dead_letters_the_definition(hungry: str) -> None:
    h = Harness()
    offset = h.send("experiments", encode({"stream": "bad", "learners": ["nochange", hungry]}))
    h.send("experiments", encode({"stream": "good", "learners": ["nochange", "nb"]}), b"good")
    _labelled(h, "good", 6)
    [letter] = h.deadletters()
    assert letter["kind"] == "worker_error" and letter["offset"] == offset
    assert letter["topic"] == NAMES.experiments
    assert letter["reason"] == (
        "handling this message failed: MemoryError: cannot allocate the model; "
        "stream 'bad' was stopped"
    )
    assert "bad" not in h.worker.runners and h.worker.stopped["bad"][0] == "worker_error"
    failed = [m for m in h.producer.on("metrics") if m["kind"] == "failed"]
    assert [(m["stream"], m["reason"]) for m in failed] == [("bad", "worker_error")]
    results = [m for m in h.producer.on("metrics") if m["kind"] == "results"]
    assert [m["stream"] for m in results] == ["good"]
    assert results[0]["results"]["n_labelled"] == 6


def test_memory_error_while_pushing_stops_only_that_stream(monkeypatch: Any) -> None:
    """Outside the experiment's own guard (here: the runner itself runs out of memory),
    the event's message is dead-lettered, the stream fails with a notice, later events of
    it are counted after the failure, and the other stream finishes."""
    h = Harness()
    for stream in ("bad", "good"):
        h.send("experiments", encode({"stream": stream, "learners": ["nochange"]}), b"x")
    runner = h.worker.runners["bad"]
    push = StreamRunner.push_message
    calls = [0]

    def exhausted(self: StreamRunner, *args: Any) -> Any:
        if self is runner:
            calls[0] += 1
            if calls[0] == 3:
                raise MemoryError()
        return push(self, *args)

    monkeypatch.setattr(StreamRunner, "push_message", exhausted)
    _labelled(h, "bad", 4)
    _labelled(h, "good", 4)
    [letter] = h.deadletters()
    assert letter["kind"] == "worker_error" and letter["topic"] == NAMES.features
    assert letter["offset"] == 1 and letter["reason"].endswith("stream 'bad' was stopped")
    assert runner.failed == "MemoryError: " and not runner.finished
    # the label of instance 0, queued (dropped when the stream stopped), and the events
    # after the third, ends too
    assert runner.ingest_counts()["after_failure"] == 8
    kinds = [(m["stream"], m["kind"]) for m in h.producer.on("metrics")]
    assert ("bad", "failed") in kinds and ("good", "results") in kinds
    assert ("bad", "results") not in kinds
    assert h.worker.runners["good"].finished


def test_admitted_streams_still_equal_evaluate() -> None:
    """Admission adds a check, nothing else: the worker's results are evaluate's."""
    config = prepare(ExperimentConfig("e", ["nochange", "nb"], dataset="sea", limit=300))[1]
    h = Harness()
    h.send("experiments", encode(config.to_dict()), b"e")
    for event in schedule(config, prepare(config)[0]):
        kinds, raw = input_message(event)
        for kind in kinds:
            h.send(kind, raw)
    [message] = [m for m in h.producer.on("metrics") if m["kind"] == "results"]
    reference = json.loads(json.dumps(evaluate_config(config)))
    assert message["results"]["learners"] == reference["learners"]
    assert message["results"]["comparisons"] == reference["comparisons"]
