"""The user's own topics into the pipeline: map, restore event-time order, re-key, repartition.

A worker configured with a :class:`~streameval.agents.mapping.SourceMapping` runs one
:class:`SourceRepartition` beside its agent. It reads every partition of the user's
features and labels topics (its own consumer group, ``<app id>-source``; the user's
topics are only read, never written), turns each message into a feature or label event
(:mod:`streameval.agents.mapping`), and writes the events to the pipeline's own
``features`` and ``labels`` topics keyed by stream id. Those are the repartition topics,
as in Kafka Streams: whatever the user keyed by (customer, order id), a stream's
features and labels now land on the same partition number, so the usual agent
(:mod:`streameval.agents.app`) evaluates them, and the user need not co-partition anything.

Order. A user topic with several partitions holds each partition in order, not the topic.
:class:`PartitionOrder` restores event-time order across the partitions of one topic
with a watermark: the earliest queued event goes out once every other partition has an
event queued or has been read to its end. A partition read to its end holds nothing
back, so an event written later to it with an earlier time than events already passed
enters the experiment at the newest time admitted (counted as ``retimed`` by the ingest
guard, :mod:`streameval.pipeline.ingest`).

Nothing lost. A message that does not fit the mapping (a missing field, a value of the
wrong type, not JSON) goes to the deadletter topic with the field named
(kind ``bad_record``). A user-topic offset is committed only after the events (or the
deadletter record) of every message before it were confirmed by the broker, so a
restart reads again what was not; an instance's features or label written twice is
dropped by the ingest guard (``already_labelled``, ``duplicate_label``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from streameval.agents.codec import encode, input_message
from streameval.agents.first_delivery import ready_producer
from streameval.agents.mapping import RecordError, SourceMapping
from streameval.agents.topics import PARTITIONER, TopicNames
from streameval.pipeline.events import FeatureEvent, LabelEvent
from streameval.schemas import deadletter_record

log = logging.getLogger(__name__)

Mapped = FeatureEvent | LabelEvent


@dataclass
class _Partition:
    queue: deque[tuple[Mapped, int]] = field(default_factory=deque)  # (event, offset)
    at_end: bool = False
    next_offset: int | None = None  # one past the last offset read


class PartitionOrder:
    """Event-time order across the partitions of one topic (see the module docstring).

    >>> from streameval.pipeline.events import LabelEvent
    >>> order = PartitionOrder([0, 1])
    >>> order.push(0, LabelEvent("s", "a", 5.0, "y", 1), offset=0)
    >>> order.ready()  # partition 1 has shown nothing yet
    []
    >>> order.push(1, LabelEvent("s", "b", 3.0, "n", 1), offset=0)
    >>> [e.id for e in order.ready()]  # b (ts 3) goes; a waits for partition 1 to pass 5
    ['b']
    >>> order.end(1)
    >>> [e.id for e in order.ready()]
    ['a']
    """

    def __init__(self, partitions: list[int]) -> None:
        self.parts = {p: _Partition() for p in partitions}

    def push(self, partition: int, event: Mapped | None, offset: int) -> None:
        """A message read at ``offset``; ``event`` ``None`` when it was dead-lettered."""
        part = self.parts[partition]
        part.at_end = False
        part.next_offset = offset + 1
        if event is not None:
            part.queue.append((event, offset))

    def end(self, partition: int) -> None:
        """``partition`` was read to its end."""
        self.parts[partition].at_end = True

    def ready(self) -> list[Mapped]:
        """Every event that can go out now, in event-time order."""
        out = []
        while True:
            heads = [(p.queue[0][0].ts, i) for i, p in self.parts.items() if p.queue]
            if not heads:
                return out
            if any(not p.queue and not p.at_end for p in self.parts.values()):
                return out
            _, first = min(heads)
            out.append(self.parts[first].queue.popleft()[0])

    def commit_points(self) -> dict[int, int]:
        """Per partition, the offset to commit: every message before it has gone out."""
        points = {}
        for i, p in self.parts.items():
            if p.queue:
                points[i] = p.queue[0][1]
            elif p.next_offset is not None:
                points[i] = p.next_offset
        return points

    @property
    def queued(self) -> int:
        return sum(len(p.queue) for p in self.parts.values())


class SourceRepartition:
    """Reads the user's topics and writes the mapped events to the pipeline's topics."""

    def __init__(
        self,
        config: dict[str, Any],
        mapping: SourceMapping,
        names: TopicNames,
        *,
        group_id: str,
        commit_every: float = 1.0,
    ) -> None:
        from confluent_kafka import Consumer

        self.mapping = mapping
        self.names = names
        self.counts: Counter[str] = Counter()
        self.commit_every = commit_every
        self.consumer = Consumer(
            {
                **config,
                "group.id": group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
            }
        )
        self.producer = ready_producer(  # its first events go at once (agents.first_delivery)
            {**config, "enable.idempotence": True, "acks": "all", "linger.ms": 20, **PARTITIONER}
        )
        self.kind_of = {mapping.features_topic: "features", mapping.labels_topic: "labels"}
        self.order: dict[str, PartitionOrder] = {}
        self.failures: list[str] = []
        self._last_commit = time.monotonic()
        self._committed: dict[tuple[str, int], int] = {}

    def assign(self, timeout: float = 30.0) -> None:
        """Take every partition of both topics, from the group's committed offsets."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        wanted = []
        for topic in self.kind_of:
            meta = self.consumer.list_topics(topic, timeout=timeout).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise RuntimeError(f"source topic {topic!r} does not exist")
            parts = sorted(meta.partitions)
            self.order[topic] = PartitionOrder(parts)
            wanted += [TopicPartition(topic, p) for p in parts]
        committed = self.consumer.committed(wanted, timeout=timeout)
        start = [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            )
            for tp in committed
        ]
        self.consumer.assign(start)

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; commit what went out (see :meth:`poll_once`)."""
        self.assign()
        try:
            while not stop.is_set():
                self.poll_once(0.2)
        finally:
            self.commit()
            self.consumer.close()

    def poll_once(self, timeout: float) -> int:
        """Read what is there, map it, pass what is in order; commit every ``commit_every`` s."""
        messages = self.consumer.consume(500, timeout)
        for msg in messages:
            self._take(msg)
        for order in self.order.values():
            for event in order.ready():
                self._forward(event)
        if time.monotonic() - self._last_commit >= self.commit_every:
            self.commit()
        self.producer.poll(0)
        return len(messages)

    def _take(self, msg: Any) -> None:
        from confluent_kafka import KafkaError

        topic, partition = msg.topic(), msg.partition()
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self.order[topic].end(partition)
            else:
                log.warning("source topic %s: %s", topic, error)
            return
        event = self._map(msg)
        self.order[topic].push(partition, event, msg.offset())

    def _map(self, msg: Any) -> Mapped | None:
        kind = self.kind_of[msg.topic()]
        _, stamp = msg.timestamp()
        try:
            value = json.loads(msg.value() or b"")
            if kind == "features":
                return self.mapping.feature_event(value, msg.key(), stamp)
            return self.mapping.label_event(value, msg.key(), stamp)
        except RecordError as exc:
            self._deadletter(msg, f"field {exc}")
        except (ValueError, UnicodeDecodeError) as exc:
            self._deadletter(msg, f"not JSON: {exc}")
        return None

    def _forward(self, event: Mapped) -> None:
        kinds, data = input_message(event)
        self._produce(getattr(self.names, kinds[0]), data, event.stream.encode("utf-8"))
        self.counts[f"source_{kinds[0]}"] += 1

    def _deadletter(self, msg: Any, reason: str) -> None:
        record = deadletter_record(
            reason,
            kind="bad_record",
            topic=msg.topic(),
            partition=msg.partition(),
            offset=msg.offset(),
            payload=msg.value(),
            key=msg.key(),
            ts=time.time(),
        )
        self._produce(self.names.deadletter, encode(record), msg.key() or b"")
        self.counts["deadletter_bad_record"] += 1

    def _produce(self, topic: str, data: bytes, key: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, data, key, on_delivery=self._delivered)
                return
            except BufferError:
                self.producer.poll(0.05)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}: {err}")

    def commit(self) -> None:
        """Confirm everything produced, then commit the user topics' offsets up to it."""
        from confluent_kafka import TopicPartition

        self._last_commit = time.monotonic()
        if self.producer.flush(30) or self.failures:
            raise RuntimeError("source events not delivered: " + "; ".join(self.failures[:5]))
        points = {
            (topic, partition): offset
            for topic, order in self.order.items()
            for partition, offset in order.commit_points().items()
        }
        if points and points != self._committed:
            offsets = [TopicPartition(t, p, o) for (t, p), o in points.items()]
            self.consumer.commit(offsets=offsets, asynchronous=False)
            self._committed = points
