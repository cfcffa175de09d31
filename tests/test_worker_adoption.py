"""A stream a worker is given after a rebalance, without a broker.

Its new owner has no runner for it yet: the first events it reads wait in the parking
while the checkpoints topic is read again (at most once a second). The moment the
stream is restored, those parked events go into its runner, before the event that
triggered the restore: otherwise the later event moves the runner's Kafka positions
past the parked ones, which are then dropped as redeliveries -- events lost, the
results short of ``evaluate``'s.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from streameval.agents.checkpoint import CheckpointReader
from streameval.agents.codec import encode
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare
from test_columnar_worker import electricity_messages
from test_fuzz_ingest import Harness


def _without_runtime(results: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in results.items() if k != "runtime"}


def test_a_restored_stream_takes_its_parked_events_before_the_next_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = prepare(
        ExperimentConfig(
            "given", ["nochange", "nb"], dataset="electricity", limit=600, delay="24",
            window=100,
        )
    )[1]  # fmt: skip
    messages = electricity_messages(config)
    seen: Counter[str] = Counter()
    offsets = []  # each message's offset on its topic, as the broker numbers them
    for kind, _ in messages:
        offsets.append(seen[kind])
        seen[kind] += 1

    owner = Harness()  # defines the stream, takes a third of it, checkpoints, dies
    owner.send("experiments", encode(config.to_dict()), b"given")
    cut = len(messages) // 3
    for (kind, raw), offset in zip(messages[:cut], offsets[:cut], strict=True):
        owner.send(kind, raw, b"given", offset)
    owner.worker.checkpoint()
    records = owner.producer.on("checkpoints")  # the checkpoint records, tombstones left out

    heir = Harness()  # reads from the committed offsets: everything after the checkpoint
    reader = CheckpointReader()
    for record in records:
        reader.add(record)
    worker = heir.worker
    worker.checkpoints.reader = reader
    monkeypatch.setattr(worker, "_refresh_checkpoints", lambda: set(reader.latest))
    monkeypatch.setattr(worker.publisher, "find_emitted", lambda *args: -1)
    worker._refreshed = time.monotonic()  # the topic was read just now: the first is parked
    rest = list(zip(messages[cut:], offsets[cut:], strict=True))
    (kind, raw), offset = rest[0]
    heir.send(kind, raw, b"given", offset)
    assert "given" not in worker.runners and worker.parking.sizes() == {"given": 50}
    worker._refreshed = 0.0  # a second later: the next message restores the stream
    for (kind, raw), offset in rest[1:]:
        heir.send(kind, raw, b"given", offset)
    heir.finish()

    runner = worker.runners["given"]
    assert runner.finished and runner.n_redelivered == 0
    assert not heir.deadletters()
    results = runner.results()
    assert results["n_instances"] == results["n_labelled"] == 600
    assert _without_runtime(results) == _without_runtime(evaluate_config(config))
