"""Where a stream's outputs are, and which ones a restarted worker has already emitted.

Every output of a stream (prediction, metric snapshot, drift alarm, the results
message) carries ``seq``, its number among the stream's outputs
(:class:`~streameval.pipeline.runner.StreamRunner` counts them; the numbers depend only on
the input order, so they are the same in an uninterrupted run and after any
restart). A worker killed after its last checkpoint may have delivered some of
the outputs its successor will produce again. To mark those ``duplicate``, the
successor must know how far the dead worker got on each output topic:

* outputs are produced with the ``murmur2_random`` partitioner (the Java
  client's, the replay's), so a stream's outputs on a topic all land on
  partition ``murmur2(stream) % partitions`` (:func:`partition_of`), in order
  (the idempotent producer never reorders nor leaves gaps within a partition):
  what the dead worker delivered on a topic is a prefix of what it produced;
* every checkpoint records, per output topic, an offset at or below the first
  output produced after it (:class:`OutputPositions`: the highest offset this
  worker had delivered to that partition, else the partition's high watermark
  when the worker started -- Tansu's watermarks lag behind the records, which
  only makes the bound lower);
* on restore the worker reads each output topic from that offset to its end
  (:func:`scan_emitted`) and keeps the highest ``seq`` of the stream found there
  (a predictions message is a JSON array of predictions, each with its own
  ``seq``; a single object is read as well).
  An output produced again with a ``seq`` at or below it was delivered before
  the crash: it is published again, flagged ``"duplicate": true``, and counted.

Consumers that want each output once drop the flagged ones, or deduplicate by
``(stream, seq)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streameval.agents.codec import parse
from streameval.agents.topics import messages_to_end


def partition_of(key: str, partitions: int) -> int:
    """The partition ``murmur2_random`` gives ``key`` (Kafka's Java default partitioner).

    >>> partition_of("k", 2)
    0
    """
    from aiokafka.partitioner import murmur2

    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


class OutputPositions:
    """Lower bounds of the next offset on each output partition, for checkpoints."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.partitions: dict[str, int] = {}

    def start(self, consumer_config: dict[str, Any], topics: Iterable[str]) -> None:
        """Take every partition's high watermark as its first bound (at worker start)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                **consumer_config,
                "group.id": "streameval-output-positions",
                "enable.auto.commit": False,
            }
        )
        try:
            for topic in topics:
                meta = consumer.list_topics(topic, timeout=10)
                if topic not in meta.topics or meta.topics[topic].error is not None:
                    continue
                parts = meta.topics[topic].partitions
                self.partitions[topic] = len(parts)
                for p in parts:
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                    key = (topic, p)
                    self.offsets[key] = max(self.offsets.get(key, 0), max(high, 0))
        finally:
            consumer.close()

    def delivered(self, topic: str, partition: int, offset: int) -> None:
        """A delivery report: nothing produced later can land at or below ``offset``."""
        key = (topic, partition)
        if offset > self.offsets.get(key, -1):
            self.offsets[key] = offset

    def marks(self, stream: str, topics: dict[str, str]) -> dict[str, tuple[int, int]]:
        """``kind -> (partition, offset)`` for ``stream`` on each output topic it may use.

        ``topics`` maps an output kind to its topic name. A topic whose partition
        count is unknown (the worker never looked) gets no mark: a restore then
        reads that topic from its beginning.
        """
        out: dict[str, tuple[int, int]] = {}
        for kind, topic in topics.items():
            n = self.partitions.get(topic)
            if not n:
                continue
            p = partition_of(stream, n)
            out[kind] = (p, self.offsets.get((topic, p), 0))
        return out


def scan_emitted(
    consumer_config: dict[str, Any],
    stream: str,
    topics: dict[str, str],
    marks: dict[str, tuple[int, int]],
    *,
    idle: float = 1.0,
    timeout: float = 120.0,
) -> dict[str, int]:
    """The highest output ``seq`` of ``stream`` on each output topic, read from ``marks`` on.

    ``topics`` maps kind -> topic name; a kind without a mark is read from the
    beginning of the stream's partition. The end of a topic is where its high
    watermark says *and* nothing came for ``idle`` seconds (Tansu's watermarks
    count record batches). Kinds with no output of the stream are absent.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {**consumer_config, "group.id": "streameval-output-scan", "enable.auto.commit": False}
    )
    kind_of = {topic: kind for kind, topic in topics.items()}
    found: dict[str, int] = {}
    try:
        assignment = []
        ends: dict[tuple[str, int], int] = {}
        for kind, topic in topics.items():
            meta = consumer.list_topics(topic, timeout=10)
            if topic not in meta.topics or not meta.topics[topic].partitions:
                continue
            n = len(meta.topics[topic].partitions)
            partition, offset = marks.get(kind, (partition_of(stream, n), OFFSET_BEGINNING))
            tp = TopicPartition(topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            if high <= low:
                continue
            start = max(offset, low) if offset >= 0 else low
            ends[(topic, partition)] = high
            assignment.append(TopicPartition(topic, partition, start))
        if not assignment:
            return found
        consumer.assign(assignment)
        key = stream.encode("utf-8")
        scan = messages_to_end(
            consumer, ends, timeout=timeout, idle=idle, what=f"output topics of {stream!r}"
        )
        try:
            for msg in scan:
                if msg.key() != key:
                    continue
                try:
                    value = parse(msg.value())
                except ValueError:
                    continue
                # a predictions message is a JSON array of predictions (seq in order), or one
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, dict):
                        continue
                    seq = item.get("seq")
                    if isinstance(seq, int) and item.get("stream") == stream:
                        kind = kind_of[msg.topic()]
                        found[kind] = max(found.get(kind, -1), seq)
        except TimeoutError as exc:
            raise RuntimeError(str(exc)) from exc
        return found
    finally:
        consumer.close()
