"""Replay producer against a real broker: every event arrives, in order, intact."""

from __future__ import annotations

import io
import math
import time
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka_fixtures import kafka_bootstrap, kafka_prefix, kafka_settings  # noqa: F401
from streameval.agents import codec
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import ReplayError, replay
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.events import (
    EndOfStream,
    FeatureEvent,
    InputEvent,
    LabelEvent,
    event_from_dict,
)

pytestmark = pytest.mark.kafka


def schedule(streams: tuple[str, ...] = ("alpha", "beta", "gamma"), n: int = 40) -> list:
    """A small interleaved schedule: features at ts=i, labels 3 instances later."""
    events: list[InputEvent] = []
    seq = 0
    for i in range(n + 3):
        for s in streams:
            if i < n:
                x: dict[str, Any] = {"a": i * 0.5, "b": -i, "cat": f"c{i % 3}"}
                if i % 7 == 0:
                    x["missing"] = float("nan")
                events.append(FeatureEvent(s, f"{s}-{i}", float(i), x, seq))
                seq += 1
            if 3 <= i < n + 3:
                j = i - 3
                y: str | float = "pos" if j % 2 else "neg"
                if s == "gamma":
                    y = j * 1.25  # a regression stream
                events.append(LabelEvent(s, f"{s}-{j}", float(i), y, seq))
                seq += 1
    for s in streams:
        n_events = sum(1 for e in events if e.stream == s)
        events.append(EndOfStream(s, float(n + 3), seq, n_events))
        seq += 1
    return events


def read_back(conf: dict[str, Any], topics: list[str], expected: int, timeout: float = 20.0):
    """Every message of ``topics`` from the beginning (plain consumer, no group join)."""
    consumer = Consumer(
        {**conf, "group.id": "test-read-back", "enable.auto.commit": False,
         "enable.partition.eof": False}
    )  # fmt: skip
    try:
        md = consumer.list_topics(timeout=10)
        consumer.assign(
            [
                TopicPartition(t, p, OFFSET_BEGINNING)
                for t in topics
                for p in md.topics[t].partitions
            ]
        )
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append(msg)
        # nothing beyond the expected messages
        out.extend(m for m in consumer.consume(1000, timeout=0.3) if m.error() is None)
        return out
    finally:
        consumer.close()


def expected_wire(event: InputEvent) -> InputEvent:
    """The event as it should come back: NaN feature values are left out."""
    if isinstance(event, FeatureEvent):
        x = {k: v for k, v in event.x.items() if not (isinstance(v, float) and math.isnan(v))}
        return FeatureEvent(event.stream, event.id, event.ts, x, event.seq)
    return event


def test_replay_round_trip(kafka_settings: KafkaSettings, kafka_prefix: str) -> None:  # noqa: F811
    conf = kafka_settings.confluent_config()
    names = ensure_topics(conf, 3, prefix=kafka_prefix, kinds=["features", "labels"])
    events = schedule()
    stats = replay(events, kafka_settings, names, progress=False)
    n_end = 3
    assert stats.n_events == len(events) and stats.n_end == n_end
    assert stats.n_messages == len(events) + n_end  # markers go to both topics
    assert stats.n_delivered == stats.n_messages and stats.n_failed == 0

    msgs = read_back(conf, [names.features, names.labels], stats.n_messages)
    assert len(msgs) == stats.n_messages

    by_seq: dict[int, list[tuple[str, InputEvent]]] = defaultdict(list)
    partition_of: dict[tuple[str, str], int] = {}
    last_seq: dict[tuple[str, int], int] = {}
    for m in msgs:
        kind = "features" if m.topic() == names.features else "labels"
        message, reason = codec.decode(kind, m.value())
        assert reason is None, reason
        assert message is not None
        event = event_from_dict(message)
        assert m.key() == event.stream.encode()
        # one stream, one partition per topic
        assert partition_of.setdefault((m.topic(), event.stream), m.partition()) == m.partition()
        # in schedule order within each partition
        tp = (m.topic(), m.partition())
        assert event.seq > last_seq.get(tp, -1), "out of order within a partition"
        last_seq[tp] = event.seq
        by_seq[event.seq].append((kind, event))

    # every event arrived exactly once (markers once per topic), with the same content
    assert sorted(by_seq) == [e.seq for e in events]
    for original in events:
        got = by_seq[original.seq]
        if isinstance(original, EndOfStream):
            assert sorted(k for k, _ in got) == ["features", "labels"]
        else:
            assert len(got) == 1
            assert got[0][0] == ("features" if isinstance(original, FeatureEvent) else "labels")
        for _, event in got:
            assert event == expected_wire(original)
    # features and labels of a stream are co-partitioned
    for s in ("alpha", "beta", "gamma"):
        assert partition_of[(names.features, s)] == partition_of[(names.labels, s)]


def test_replay_paces_by_event_time(kafka_settings: KafkaSettings, kafka_prefix: str) -> None:  # noqa: F811
    names = ensure_topics(kafka_settings.confluent_config(), 1, prefix=kafka_prefix,
                          kinds=["features", "labels"])  # fmt: skip
    events = [FeatureEvent("s", str(i), 10.0 + i * 0.1, {"a": 1.0}, i) for i in range(7)]
    stats = replay(events, kafka_settings, names, speed=2.0, progress=False)
    assert 0.28 <= stats.seconds < 5.0  # 0.6 s of event time at 2x (+ connect and flush)
    # without a speed, event-time gaps (here 10^6 s) are not waited for
    spread = [FeatureEvent("s", str(i), i * 1e6, {"a": 1.0}, i) for i in range(3)]
    assert replay(spread, kafka_settings, names, speed=None, progress=False).seconds < 10.0
    with pytest.raises(ValueError, match="speed"):
        replay(events, kafka_settings, names, speed=0.0)


def test_replay_progress_and_bad_values(
    kafka_settings: KafkaSettings,  # noqa: F811
    kafka_prefix: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = TopicNames.for_prefix(kafka_prefix)
    ensure_topics(kafka_settings.confluent_config(), 1, prefix=kafka_prefix,
                  kinds=["features", "labels"])  # fmt: skip
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    replay(schedule(("s",), 5), kafka_settings, names, progress=True)
    assert "events" in err.getvalue()
    err.seek(0)
    err.truncate(0)
    replay(schedule(("s",), 5), kafka_settings, names, progress=None)  # not a tty: quiet
    assert err.getvalue() == ""
    bad = [FeatureEvent("s", "1", 0.0, {"a": float("inf")}, 0)]
    with pytest.raises(ValueError, match="infinit"):
        replay(bad, kafka_settings, names, progress=False)


def test_replay_to_an_unreachable_broker_raises() -> None:
    events = [FeatureEvent("s", "1", 0.0, {"a": 1.0}, 0)]
    start = time.monotonic()
    with pytest.raises(ReplayError, match=r"127\.0\.0\.1:1") as info:
        replay(
            events, "127.0.0.1:1", TopicNames.for_prefix("x."), progress=False,
            producer_config={"message.timeout.ms": 1500}, flush_timeout=5.0,
        )  # fmt: skip
    assert time.monotonic() - start < 15.0
    assert info.value.stats.n_failed == 1
