"""Byte budgets of the core: event footprints, the runner's door, the shared pool.

``footprint`` is checked against ``tracemalloc`` on events decoded as the worker decodes
them; the runner's budgets against hand-computed sizes, and against ``Experiment`` fed
only what was admitted (refusing an event changes nothing else in the evaluation).
"""

from __future__ import annotations

import gc
import json
import pickle
import tracemalloc
from typing import Any

import pytest
from streameval.agents.codec import input_events
from streameval.agents.parking import Parking
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.memory import EVENT_BYTES, VALUE_BYTES, BytePool, footprint
from streameval.pipeline.runner import StreamRunner


def _wire(kind: str, i: int) -> bytes:
    base: dict[str, Any] = {"stream": "s", "id": str(i), "ts": float(i), "seq": 2 * i}
    if kind == "numeric":
        base["x"] = {f"f{j}": i * 0.5 + j for j in range(10)}
    elif kind == "string":
        base["x"] = {"a": 1.0, "s": "x" * 1000 + str(i)}
    elif kind == "large":
        base["x"] = {"a": 1.0, "s": "x" * 100_000 + str(i)}
    else:
        base.update(y="a", seq=2 * i + 1)
    return json.dumps(base).encode()


@pytest.mark.parametrize("kind", ["numeric", "string", "large", "label"])
def test_footprint_is_an_upper_bound_of_what_decoded_events_hold(kind: str) -> None:
    n = 100 if kind == "large" else 2000
    raw = [_wire(kind, i) for i in range(n)]
    topic = "labels" if kind == "label" else "features"
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept: list[InputEvent] = []
        for message in raw:
            kept.extend(input_events(topic, message)[0])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    estimate = sum(footprint(e)[0] for e in kept)
    assert len(kept) == n
    assert held <= estimate <= 3 * held, (kind, held / n, estimate / n)


def test_footprint_by_hand() -> None:
    ev = FeatureEvent("s", "12", 0.0, {"a": 1.0, "b": "hello", "c": 3}, 0)
    assert footprint(ev) == (EVENT_BYTES + 2 + 3 * VALUE_BYTES + 5, 5)
    assert footprint(LabelEvent("s", "12", 0.0, "yes", 1)) == (EVENT_BYTES + 2 + 3, 3)
    assert footprint(LabelEvent("s", "1", 0.0, 2.5, 1)) == (EVENT_BYTES + 1, 0)


def features(i: int, size: int = 0) -> FeatureEvent:
    return FeatureEvent("s", str(i), float(i), {"x": float(i % 3), "s": "v" * size}, 2 * i)


def label(i: int, y: str | None = None) -> LabelEvent:
    return LabelEvent("s", str(i), float(i), y if y is not None else "ab"[i % 2], 2 * i + 1)


EACH = footprint(features(0, 1000))[0]  # ids of one digit


def runner(**kw: Any) -> StreamRunner:
    return StreamRunner(ExperimentConfig("s", ["nochange", "majority"]), **kw)


def test_features_over_the_stream_budget_are_refused_and_their_labels_with_them() -> None:
    r = runner(stream_bytes=3 * EACH)
    refused = []
    for i in range(5):  # no label yet: the features wait in the merge queue
        _, rej = r.push("features", features(i, 1000))
        refused += rej
    assert r.held == 3 * EACH
    assert [(x.kind, x.event.id) for x in refused] == [("over_budget", "3"), ("over_budget", "4")]
    assert refused[0].reason == (
        f"event of id '3' refused: stream 's' holds {3 * EACH} bytes: {EACH} more would "
        f"exceed its budget of {3 * EACH}"
    )
    _, rej = r.push("labels", label(3))  # the label of a refused instance: rejected at once
    assert [(x.kind, x.reason) for x in rej] == [
        ("over_budget", "label for id '3' whose features were refused (over_budget)")
    ]
    assert r.guard.n_orphans == 0
    for i in (0, 1, 2, 4):
        r.push("labels", label(i))
    r.push("features", EndOfStream("s", 9.0, 100))
    r.push("labels", EndOfStream("s", 9.0, 100))
    assert r.finished and r.held == 0
    counts = r.ingest_counts()
    assert counts["rejected_over_budget"] == 4 and counts["refused"] == 4
    assert counts["orphans_waiting"] == 0 and "rejected_orphan_label" not in counts
    # the evaluation is that of the admitted events alone
    alone = Experiment(ExperimentConfig("s", ["nochange", "majority"]), emit_predictions=True)
    for i in range(3):
        alone.process(features(i, 1000))
        alone.process(label(i))
    alone.process(EndOfStream("s", 9.0, 100))
    assert r.results() == alone.results()


def test_an_orphan_label_waiting_for_refused_features_is_rejected_when_they_are() -> None:
    r = runner(stream_bytes=3 * EACH)
    r.push("features", features(0, 1000))
    r.push("labels", label(0))  # releases features 0
    r.push("labels", LabelEvent("s", "5", 0.5, "a", 3))
    r.push("features", features(1, 1000))  # releases labels 0 and 5 (ts 0.5): 5 an orphan
    assert r.guard.n_orphans == 1 and r.guard.orphan_nbytes == footprint(label(5))[0]
    _, rej = r.push("features", FeatureEvent("s", "5", 2.0, {"x": 1.0, "s": "v" * 5000}, 6))
    assert [(x.kind, x.event.id, x.event.kind) for x in rej] == [
        ("over_budget", "5", "features"),
        ("over_budget", "5", "label"),
    ]
    assert r.guard.n_orphans == 0 and r.guard.orphan_nbytes == 0
    assert r.held == EACH  # features 1, queued


def test_a_label_whose_features_the_stream_holds_passes_a_full_budget() -> None:
    r = runner(stream_bytes=2 * EACH)
    for i in range(2):  # both queued: the label topic has shown nothing
        r.push("features", features(i, 1000))
    assert r.held == 2 * EACH
    _, rej = r.push("labels", LabelEvent("s", "9", 0.0, "a", 1))  # features never seen
    assert [x.kind for x in rej] == ["over_budget"]
    for i in range(2):  # features queued, then pending: their labels free them
        _, rej = r.push("labels", label(i))
        assert rej == []
    assert r.experiment.n_labelled == 1 and len(r.experiment.buffer) == 1
    assert r.held == EACH + footprint(label(1))[0]  # features 1 pending, label 1 queued
    r.push("features", EndOfStream("s", 9.0, 9))
    assert r.experiment.n_labelled == 2 and r.held == 0


def test_strings_longer_than_the_limit_are_too_long() -> None:
    r = runner(max_string=100)
    _, rej = r.push("features", features(0, 101))
    assert [(x.kind, x.reason) for x in rej] == [
        ("too_long", "feature value of 101 characters in id '0': the limit is 100 per string")
    ]
    _, rej = r.push("labels", label(1, "y" * 101))
    assert [x.kind for x in rej] == ["too_long"]
    _, rej = r.push("features", features(2, 100))
    assert rej == [] and r.n_refused == 2


def test_runners_share_the_worker_pool_and_checkpoints_leave_it_out() -> None:
    pool = BytePool(3 * EACH)
    a, b = runner(), runner()
    a.bind(pool, None, None)
    b.bind(pool, None, None)
    for i in range(2):
        a.push("features", features(i, 1000))
    _, rej = b.push("features", features(0, 1000))
    assert rej == [] and pool.held == 3 * EACH
    _, rej = b.push("features", features(1, 1000))
    assert [x.kind for x in rej] == ["over_budget"]
    assert "the worker holds" in rej[0].reason
    restored = pickle.loads(pickle.dumps(a))
    assert restored.pool is None and restored.held == 2 * EACH
    a.bind(None, None, None)  # a leaves the pool: its bytes with it
    assert pool.held == EACH
    restored.bind(pool, None, None)
    assert pool.held == 3 * EACH
    for i in range(2):
        restored.push("labels", label(i))
    restored.push("features", EndOfStream("s", 9.0, 9))
    restored.push("labels", EndOfStream("s", 9.0, 9))
    assert pool.held == EACH  # labels of held features pass a full pool, by their bytes:
    assert pool.peak == 3 * EACH + footprint(label(0))[0]


def test_the_parking_is_bounded_per_stream_and_by_the_pool() -> None:
    pool = BytePool(4 * EACH)
    parking = Parking(stream_bytes=2 * EACH, pool=pool)
    assert parking.park("features", features(0, 1000), (0, 0, 0)) is None
    assert parking.park("features", features(1, 1000), (0, 1, 0)) is None
    kind, reason = parking.park("features", features(2, 1000), (0, 2, 0))
    assert (kind, reason) == (
        "over_budget",
        f"event of id '2' not parked: the parking of stream 's' holds {2 * EACH} bytes: "
        f"{EACH} more would exceed its budget of {2 * EACH}",
    )
    other = FeatureEvent("t", "0", 0.0, {"x": 0.0, "s": "v" * 1000}, 0)
    assert parking.park("features", other, (1, 0, 0)) is None
    pool.charge(EACH)  # a runner holds the rest
    kind, reason = parking.park("features", other, (1, 1, 0))
    assert kind == "over_budget" and "the worker holds" in reason
    assert parking.nbytes == 3 * EACH and pool.held == 4 * EACH
    assert [p.event.id for p in parking.take("s")] == ["0", "1"]
    assert parking.nbytes == EACH and pool.held == 2 * EACH
