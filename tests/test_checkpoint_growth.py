"""Checkpoints grow with the state's change, not its size (streameval.agents.checkpoint).

A worker (in this process, a real producer, the embedded broker) holds a stream whose
pending instances carry large text features (16 x 200,000 characters: a 3.2 MB state),
then takes a few small instances between each of a dozen checkpoints. The checkpoints
topic, read back record by record:

* holds each large text exactly once (the value records' data add up to 16 x 200,000
  bytes), while a whole pickle of the runner is larger than all of them;
* grows per checkpoint by less than a twentieth of the state (what changed: the small
  instances and the learners), not by the state's size;
* restores (a fresh reader of the whole topic) a runner that ends with the results of the
  one that never stopped; and so does what a compacting broker keeps of the topic (the
  last record per key, tombstoned keys gone), which is about one checkpoint's bytes.

Once half of the large instances are labelled (they leave the state), the next confirmed
checkpoint tombstones exactly their eight values. And values, which lie outside the signed
pickle, are taken only when their bytes hash to what the pickle names.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import random
import string
from dataclasses import replace
from typing import Any

import pytest
from kafka_fixtures import topic_to_end
from streameval.agents.checkpoint import CheckpointReader, StreamCheckpoints
from streameval.agents.codec import parse
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.agents.worker import StreamWorker
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent
from streameval.pipeline.runner import StreamRunner

pytestmark = [pytest.mark.kafka]

KEY = b"growth-checkpoint-key-0123456789abcdef"
BIG = 200_000  # characters of each large text feature (kept apart: >= LARGE_BYTES; the
# workers here take strings of any length, beyond the default --max-string)
N_BIG = 16
CHECKPOINTS = 12
SMALL_PER_CHECKPOINT = 20


def records(settings: Any, topic: str) -> list[tuple[str, bytes | None]]:
    """Every (key, value) of ``topic``, in order per partition."""
    return [(m.key().decode(), m.value()) for m in topic_to_end(settings, topic)]


def size(recs: list[tuple[str, bytes | None]]) -> int:
    return sum(len(k) + len(v or b"") for k, v in recs)


def compacted(recs: list[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    """What a compacting broker keeps: the last record of each key, tombstoned keys gone."""
    last: dict[str, tuple[int, bytes | None]] = {}
    for i, (k, v) in enumerate(recs):
        last[k] = (i, v)
    return [(k, v) for k, (_, v) in sorted(last.items(), key=lambda kv: kv[1][0]) if v]


def restore(recs: list[tuple[str, bytes | None]], stream: str) -> StreamRunner:
    reader = CheckpointReader()
    for k, v in recs:
        if v is None:
            reader.deleted(k)
        else:
            reader.add(parse(v))
    checkpoints = StreamCheckpoints(KEY)
    checkpoints.reader = reader
    runner = checkpoints.take(stream)
    assert runner is not None
    return runner


class Feed:
    """Numbered input events of one stream, and the worker that takes them."""

    def __init__(self, worker: StreamWorker, stream: str) -> None:
        self.worker, self.stream = worker, stream
        self.seq = 0
        self.offsets = {"features": 0, "labels": 0}
        self.log: list[tuple[str, InputEvent, tuple[int, int, int]]] = []

    def send(self, kind: str, event: InputEvent) -> None:
        position = (0, self.offsets[kind], 0)
        self.offsets[kind] += 1
        self.log.append((kind, event, position))
        raw = json.dumps(event.to_dict()).encode()
        self.worker.handle(kind, raw, self.stream.encode(), 0, position[1])

    def features(self, iid: str, x: dict[str, Any]) -> None:
        self.seq += 1
        self.send("features", FeatureEvent(self.stream, iid, float(self.seq), x, self.seq))

    def label(self, iid: str, y: str) -> None:
        self.seq += 1
        self.send("labels", LabelEvent(self.stream, iid, float(self.seq), y, self.seq))


@pytest.fixture
def workers() -> Any:
    """Workers made by a test, their producers closed after it."""
    made: list[StreamWorker] = []
    yield made
    for worker in made:
        worker.publisher.close()


def test_checkpoints_grow_with_the_change_not_the_state_size(kafka_settings, kafka_prefix, workers):
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(settings.confluent_config(), 1, prefix=kafka_prefix)
    names = TopicNames.for_prefix(kafka_prefix)
    stream = "big-text"
    rng = random.Random(3)
    texts = ["".join(rng.choices(string.ascii_letters, k=BIG)) for _ in range(N_BIG)]
    worker = StreamWorker(settings, key=KEY, checkpoint_every=10**9, max_string=None)
    workers.append(worker)
    worker.restore()
    config = ExperimentConfig(stream, ["nochange", "majority"], bins=0)
    worker.handle("experiments", json.dumps(config.to_dict()).encode(), stream.encode(), 0, 0)
    feed = Feed(worker, stream)
    for i, text in enumerate(texts):  # pending all along: the large, unchanging state
        feed.features(f"big-{i}", {"text": text, "v": float(i)})
    worker.checkpoint()
    first = size(records(settings, names.checkpoints))
    whole = len(pickle.dumps(worker.runners[stream], protocol=pickle.HIGHEST_PROTOCOL))
    for c in range(CHECKPOINTS - 1):  # a little change between checkpoints
        for j in range(SMALL_PER_CHECKPOINT):
            iid = f"small-{c}-{j}"
            feed.features(iid, {"text": "short", "v": float(j)})
            feed.label(iid, "ab"[(c + j) % 2])
        worker.checkpoint()
    recs = records(settings, names.checkpoints)
    growth = (size(recs) - first) / (CHECKPOINTS - 1)

    values = [parse(v) for _, v in recs if v is not None and b'"value"' in v[:200]]
    texts = [m for m in values if m["type"] == "s"]  # the rest: chunks of the pickles
    value_bytes = sum(len(base64.b64decode(m["data"])) for m in texts)
    assert whole > N_BIG * BIG  # what each checkpoint wrote before: the whole state
    assert value_bytes == N_BIG * BIG  # each large text written once
    assert growth < whole / 20, (growth, whole, first)
    print(f"\ncheckpoints topic: {first} B after the first, +{growth:.0f} B per checkpoint "
          f"(whole state {whole} B)")  # fmt: skip

    # restored from the whole topic, and from what compaction keeps: identical results
    kept = compacted(recs)
    assert size(kept) < first + 2 * growth + 4096, (size(kept), first, growth)
    original = worker.runners[stream]
    twins = [restore(recs, stream), restore(kept, stream)]
    end = EndOfStream(stream, float(feed.seq + 1), feed.seq + 1, len(feed.log) + 1)
    tail = [("labels", LabelEvent(stream, f"big-{i}", float(feed.seq + 1), "a", feed.seq + 1))
            for i in range(N_BIG)]  # fmt: skip
    for n, (kind, event) in enumerate([*tail, ("features", end), ("labels", end)]):
        for runner in (original, *twins):
            runner.push(kind, event, (0, 10_000 + n, 0))
    assert twins[0].results() == original.results() == twins[1].results()
    assert original.results()["n_labelled"] == N_BIG + (CHECKPOINTS - 1) * SMALL_PER_CHECKPOINT


def test_values_no_checkpoint_names_are_tombstoned(kafka_settings, kafka_prefix, workers):
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(settings.confluent_config(), 1, prefix=kafka_prefix)
    names = TopicNames.for_prefix(kafka_prefix)
    stream = "leaving"
    worker = StreamWorker(settings, key=KEY, checkpoint_every=10**9, max_string=None)
    workers.append(worker)
    worker.restore()
    config = ExperimentConfig(stream, ["nochange"], bins=0)
    worker.handle("experiments", json.dumps(config.to_dict()).encode(), stream.encode(), 0, 0)
    feed = Feed(worker, stream)
    for i in range(N_BIG):
        feed.features(f"big-{i}", {"text": str(i) * BIG})
    worker.checkpoint()
    for i in range(N_BIG // 2):  # labelled: these instances leave the state
        feed.label(f"big-{i}", "a")
    feed.features("after", {"text": "short"})  # lets the merger pass the labels
    feed.label("after", "a")
    worker.checkpoint()
    recs = records(settings, names.checkpoints)
    digests = [hashlib.sha256((str(i) * BIG).encode()).hexdigest() for i in range(N_BIG)]
    gone = {k.split("/")[-2] for k, v in recs if v is None and "/value/" in k}
    # the labelled ones' texts (one part each: 200,000 bytes < PART_BYTES), and pickle
    # chunks the second checkpoint no longer has; never a text still held
    assert set(digests[: N_BIG // 2]) <= gone and not set(digests[N_BIG // 2 :]) & gone
    reader = CheckpointReader()
    for k, v in recs:
        reader.deleted(k) if v is None else reader.add(parse(v))
    reader.prune()
    kept = {d for d, v in reader.values[stream].items() if v.stored[0] == "s"}
    assert kept == set(digests[N_BIG // 2 :])
    assert not reader.missing(stream)


def test_a_value_is_taken_only_when_it_is_the_one_the_signed_pickle_names() -> None:
    """Values are outside the HMAC'd pickle: one whose bytes do not hash to the SHA-256
    the pickle names, or one missing, is refused; the intact set loads."""
    from streameval.agents.checkpoint import CheckpointError, to_messages
    from streameval.agents.checkpoint_topic import value_messages
    from streameval.agents.snapshot import split_dumps

    state = {"a": "x" * BIG, "b": b"y" * BIG, "n": 3}
    blob, signature, large = split_dumps(state, KEY)
    assert len(large) == 2 and len(blob) < 1000

    def reader_with(values: dict[str, Any]) -> CheckpointReader:
        reader = CheckpointReader()
        for digest, value in values.items():
            for m in value_messages("s", digest, value):
                reader.add(m)
        for m in to_messages("s", 1, blob, signature, refs=list(large)):
            reader.add(m)
        return reader

    assert reader_with(large).load("s", KEY) == state
    text_digest = next(d for d, v in large.items() if isinstance(v, str))
    forged = {**large, text_digest: "z" * BIG}
    with pytest.raises(CheckpointError, match="does not match its hash"):
        reader_with(forged).load("s", KEY)
    partial = {d: v for d, v in large.items() if d != text_digest}
    reader = reader_with(partial)
    assert reader.missing("s") == [text_digest]
    with pytest.raises(CheckpointError, match="is not on the topic"):
        reader.load("s", KEY)


def test_a_state_of_small_values_writes_only_the_chunks_it_changed() -> None:
    """A sliding window of 100,000 small ids (the ingest guard's kind of state): 1,000 ids
    later, the second checkpoint writes under a fifth of the first's bytes (the chunks
    around the two ends: cut points of such regular data lie tens of KB apart), and the
    records of both restore the second state exactly."""
    from collections import OrderedDict

    checkpoints = StreamCheckpoints(KEY)
    window = OrderedDict((str(i), None) for i in range(100_000))
    first = checkpoints.parts("s", window)  # type: ignore[arg-type]
    checkpoints.saved()
    for i in range(100_000, 101_000):
        window[str(i)] = None
        window.popitem(last=False)
    second = checkpoints.parts("s", window)  # type: ignore[arg-type]
    checkpoints.saved()

    def data_bytes(recs: list[tuple[str, dict[str, Any]]]) -> int:
        return sum(len(base64.b64decode(m["data"])) for _, m in recs)

    assert data_bytes(second) < data_bytes(first) / 5, (data_bytes(second), data_bytes(first))
    reader = CheckpointReader()
    for _, m in [*first, *second]:
        reader.add(m)
    restored = reader.load("s", KEY)
    assert restored == window and next(iter(restored)) == "1000"
