"""A worker's output producer: numbered outputs, duplicate flags, deadletter records.

:class:`Publisher` produces, with one confluent-kafka producer, what the runners of a
worker's streams emit: predictions (collected and sent in bulk, a JSON array per input
message and stream), metric snapshots and drift alarms (one message each), a stream's
last output on the metrics topic (its results document, or the notice that it failed),
the deadletter records of input that could not be used, and checkpoint parts. Every
message is encoded by :mod:`streameval.agents.codec`.

Every output carries ``seq``, its number among the stream's outputs. After a restore,
an output whose ``seq`` the crashed predecessor had already delivered (found on the
output topics by :func:`~streameval.agents.outputs.scan_emitted`) is published again
flagged ``"duplicate": true`` and counted (:mod:`streameval.agents.outputs`). Delivery
reports advance the :class:`~streameval.agents.outputs.OutputPositions` that each
checkpoint records.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from streameval.agents.codec import (
    encode,
    failed_message,
    output_message,
    results_message,
)
from streameval.agents.config import KafkaSettings
from streameval.agents.delivery import DeliveryWatch
from streameval.agents.first_delivery import ask_metadata
from streameval.agents.health import PRODUCER_QUEUE, BrokerHealth
from streameval.agents.outputs import OutputPositions, partition_of, scan_emitted
from streameval.agents.topics import OUTPUT_KINDS, PARTITIONER, TopicNames
from streameval.pipeline.events import Output
from streameval.pipeline.runner import StreamRunner
from streameval.schemas import deadletter_record

log = logging.getLogger(__name__)

#: Producer settings of a worker. With the pipeline's partitioner a stream's outputs land
#: on the partition of its inputs, which a restarted worker can compute
#: (:mod:`streameval.agents.outputs`).
PRODUCER_DEFAULTS = {"linger.ms": 20, "enable.idempotence": True, "acks": "all", **PARTITIONER}
#: Most predictions one predictions-topic message carries (a JSON array, like packed input):
#: well under ``codec.MAX_PACKED_EVENTS`` and, at ~150 bytes each, under 1 MiB.
PREDICTIONS_PER_MESSAGE = 500
#: Delivery errors kept for the message of the error a checkpoint raises.
ERRORS_KEPT = 20
#: Seconds :meth:`Publisher.know_topics` waits for a topic's metadata.
METADATA_TIMEOUT = 5.0


def watched_producer(settings: KafkaSettings, health: BrokerHealth) -> Any:
    """A worker's output producer that reports broker errors to ``health``, its queue sized
    for the outputs of what was taken before an outage was noticed
    (:mod:`streameval.agents.health`)."""
    from confluent_kafka import Producer

    return Producer(
        {**settings.confluent_config(), **PRODUCER_DEFAULTS, **PRODUCER_QUEUE,
         "error_cb": health.on_kafka_error}
    )  # fmt: skip


class Publisher:
    """Produces the outputs of a worker's streams; counts into ``counts``.

    Parameters
    ----------
    producer
        A confluent-kafka ``Producer`` (or anything with ``produce``/``poll``/``flush``).
    names
        The topic names.
    counts
        The worker's counters: ``deadletter_<kind>`` and ``delivery_errors`` are counted here.
    """

    def __init__(self, producer: Any, names: TopicNames, counts: Counter[str]) -> None:
        self.producer = producer
        self.names = names
        self.counts = counts
        self.topics = {kind: getattr(names, kind) for kind in OUTPUT_KINDS}  # kind -> topic
        self.positions = OutputPositions()
        # per restored stream: output kind -> highest seq already on that topic
        self.emitted: dict[str, dict[str, int]] = {}
        # predictions made since the last flush, per stream: published in bulk
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.delivery_errors: list[str] = []
        self.waiting = DeliveryWatch()  # produced, not yet reported: stalled deliveries
        self.fatal: str | None = None  # why the producer can deliver nothing any more
        self.clock = time.monotonic
        self.partition_counts: dict[str, int] = {}

    # -- recovery -------------------------------------------------------------------------

    def start(self, consumer_config: dict[str, Any]) -> None:
        """Take the output partitions' current ends as the first positions (worker start)."""
        self.positions.start(consumer_config, self.topics.values())
        self.know_topics()

    def know_topics(
        self, kinds: tuple[str, ...] = OUTPUT_KINDS, timeout: float = METADATA_TIMEOUT
    ) -> None:
        """Have the producer fetch the cluster's metadata, then that of the output topics of
        ``kinds``, now.

        The first gets an idempotent producer its id at once
        (:mod:`~streameval.agents.first_delivery`). librdkafka also holds a message to a topic
        it has no metadata for until that metadata arrives. A broker that does not answer
        within ``timeout`` s only leaves the id and the topics to be learned on first use.
        """
        if not hasattr(self.producer, "list_topics"):
            return
        ask_metadata(self.producer, timeout)  # its producer id: see agents.first_delivery
        for kind in kinds:
            try:
                self.producer.list_topics(self.topics[kind], timeout=timeout)
            except KafkaException as exc:
                log.debug("no metadata of %s yet: %s", self.topics[kind], exc)

    def find_emitted(
        self, consumer_config: dict[str, Any], stream: str, marks: dict[str, tuple[int, int]]
    ) -> int:
        """Read what a predecessor delivered of a restored ``stream``; return its highest seq."""
        self.emitted[stream] = scan_emitted(consumer_config, stream, self.topics, marks)
        return max(self.emitted[stream].values(), default=-1)

    def marks(self, stream: str) -> dict[str, tuple[int, int]]:
        """Where ``stream``'s next outputs can land at the earliest (kept in its checkpoint)."""
        return self.positions.marks(stream, self.topics)

    # -- producing --------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        key: str,
        value: dict[str, Any] | list[Any] | None,
        partition: int | None = None,
    ) -> None:
        """Produce one message, a tombstone if ``value`` is None, to ``partition`` if given
        (else the key's); waits while the producer's local queue is full."""
        data = None if value is None else encode(value)
        where = {} if partition is None else {"partition": partition}
        while self.fatal is None:
            try:
                self.producer.produce(
                    topic, data, key.encode("utf-8"), on_delivery=self._delivered, **where
                )
                self.waiting.produced(self.clock())
                return
            except BufferError:
                self.poll(0.05)
            except KafkaException as exc:
                self._failed(exc)
        self._not_delivered(f"{topic}: not produced, {self.fatal}")

    def poll(self, timeout: float = 0.0) -> None:
        """Serve delivery reports for up to ``timeout`` s; a fatal error is kept, not raised."""
        try:
            self.producer.poll(timeout)
        except KafkaException as exc:
            self._failed(exc)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for what was produced; how many messages are left."""
        try:
            return self.producer.flush(timeout)
        except KafkaException as exc:
            self._failed(exc)
            return len(self.producer) if hasattr(self.producer, "__len__") else 1

    def _failed(self, exc: KafkaException) -> None:
        """Keep a fatal producer error in :attr:`fatal`; raise any other.

        An idempotent producer fails fatally when the broker no longer knows its producer
        id (a broker that restarted empty): it can produce nothing more, so every output
        from then on is not delivered, which ``/health`` reports and the next checkpoint
        refuses (the worker then exits, and a restart resumes from the last checkpoint).
        """
        err = exc.args[0] if exc.args else None
        if not isinstance(err, KafkaError) or not (err.fatal() or err.code() == KafkaError._FATAL):
            raise exc
        if self.fatal is None:
            self.fatal = f"the output producer failed: {err.str()}"
            log.error("%s; no output can be delivered any more", self.fatal)

    def _not_delivered(self, reason: str) -> None:
        self.counts["delivery_errors"] += 1
        if len(self.delivery_errors) < ERRORS_KEPT:
            self.delivery_errors.append(reason)

    def produce_checkpoint(self, key: str, value: dict[str, Any] | None, stream: str) -> None:
        """A record of ``stream``'s checkpoint (or a tombstone), on the stream's partition:
        a checkpoint's records are keyed one by one, but stay in order with each other
        (:mod:`streameval.agents.checkpoint`)."""
        topic = self.names.checkpoints
        n = self._partitions(topic)
        self.produce(topic, key, value, None if n is None else partition_of(stream, n))

    def _partitions(self, topic: str) -> int | None:
        """The partition count of ``topic`` (asked once), None if the producer cannot tell."""
        if topic not in self.partition_counts:
            count = None
            try:
                meta = self.producer.list_topics(topic, timeout=10)
                found = meta.topics.get(topic)
                if found is not None and found.error is None and found.partitions:
                    count = len(found.partitions)
            except Exception as exc:  # a test double, or no answer: the key's partition
                log.debug("partitions of %s unknown (%s): partitioned by key", topic, exc)
            if count is None:
                return None
            self.partition_counts[topic] = count
        return self.partition_counts[topic]

    def _delivered(self, err: Any, msg: Any) -> None:
        self.waiting.reported(self.clock(), ok=err is None)
        if err is not None:
            self._not_delivered(f"{msg.topic()}: {err}")
            return
        offset = msg.offset()
        if offset is not None and offset >= 0:
            self.positions.delivered(msg.topic(), msg.partition(), offset)

    def _flag(self, kind: str, value: dict[str, Any], runner: StreamRunner) -> None:
        """Flag ``value`` a duplicate if the stream's predecessor delivered its seq already."""
        emitted = self.emitted.get(value["stream"])
        if emitted and value["seq"] <= emitted.get(kind, -1):
            value["duplicate"] = True
            runner.n_duplicates_marked += 1

    def publish(self, outputs: list[Output], runner: StreamRunner) -> None:
        """Produce ``outputs`` of ``runner`` (numbered from ``runner.n_outputs - len``).

        Predictions are collected and published by :meth:`flush_predictions` (one message
        per input message, at most :data:`PREDICTIONS_PER_MESSAGE` each); the other
        outputs are produced one message each, at once.
        """
        seq = runner.n_outputs - len(outputs)
        for out in outputs:
            kind, value = output_message(out, seq)
            self._flag(kind, value, runner)
            if kind == "predictions":
                self.pending.setdefault(value["stream"], []).append(value)
            else:
                self.produce(self.topics[kind], value["stream"], value)
            seq += 1
        if outputs:
            self.poll(0)

    def flush_predictions(self) -> None:
        """Produce the collected predictions: a JSON array per stream and chunk, in seq order."""
        if not self.pending:
            return
        topic = self.topics["predictions"]
        for stream, values in self.pending.items():
            for i in range(0, len(values), PREDICTIONS_PER_MESSAGE):
                self.produce(topic, stream, values[i : i + PREDICTIONS_PER_MESSAGE])
        self.pending = {}
        self.poll(0)

    def publish_results(self, stream: str, runner: StreamRunner) -> None:
        """The results document of a finished ``stream``, its last output."""
        self.flush_predictions()  # every prediction is on its way before the results
        results = runner.results()
        results["ingest"] = runner.ingest_counts()
        seq = runner.take_seq()
        results["runtime"] = {
            "driver": "worker",
            "outputs": runner.n_outputs,
            "duplicates_marked": runner.n_duplicates_marked
            + int(seq <= self.emitted.get(stream, {}).get("metrics", -1)),
            "restores": runner.n_restores,
        }
        if runner.path is not None:
            results["runtime"]["path"] = runner.path
        value = results_message(stream, results, runner.experiment.last_ts, seq)
        self._flag("metrics", value, runner)
        self.produce(self.topics["metrics"], stream, value)

    def publish_failure(self, stream: str, runner: StreamRunner) -> None:
        """Tell the metrics topic that ``stream`` stopped, in place of its results.

        No results document is made of a half-updated experiment; this notice
        lets whoever waits for the results (``run --dashboard``, a user's
        consumer) stop waiting and find the event that failed in the deadletter
        topic.
        """
        self.flush_predictions()
        value = failed_message(
            stream,
            n_labelled=runner.experiment.n_labelled,
            ts=runner.experiment.last_ts,
            error=runner.failed,
            deadletter=self.names.deadletter,
            seq=runner.take_seq(),
        )
        self._flag("metrics", value, runner)
        self.produce(self.topics["metrics"], stream, value)

    def publish_refusal(self, stream: str, error: str, reason: str = "checkpoint_refused") -> None:
        """The ``failed`` notice of a stream that has no runner here (its checkpoint was
        refused, its experiment was over budget: no output number), with ``reason``."""
        value = failed_message(
            stream, n_labelled=0, ts=None, error=error, deadletter=self.names.deadletter, seq=0
        )
        del value["seq"]  # no runner, no output count
        value["reason"] = reason
        self.produce(self.topics["metrics"], stream, value)

    def deadletter(
        self,
        kind: str,
        reason: str,
        topic: str,
        partition: int,
        offset: int,
        payload: Any,
        key: Any,
    ) -> None:
        """A deadletter record of input that could not be used, with its source position."""
        if isinstance(payload, dict):
            payload = encode(payload).decode("utf-8")
        if isinstance(key, bytes):
            key = key.decode("utf-8", errors="replace")
        record = deadletter_record(
            reason,
            kind=kind,
            topic=topic,
            partition=partition,
            offset=offset,
            payload=payload,
            key=key,
            ts=time.time(),
        )
        self.produce(self.names.deadletter, key or "", record)
        self.counts[f"deadletter_{kind}"] += 1

    # -- delivery ---------------------------------------------------------------------------

    def confirm(self, timeout: float = 30.0) -> None:
        """Wait until everything produced is delivered; ``RuntimeError`` if anything was not."""
        self.flush_predictions()
        remaining = self.flush(timeout)
        if remaining or self.delivery_errors or self.fatal:
            errors = self.delivery_errors or ([self.fatal] if self.fatal else [])
            raise RuntimeError(f"outputs not delivered ({remaining} queued): " + "; ".join(errors))

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (at most ``timeout`` seconds) and let the producer go."""
        if self.producer is None:
            return
        self.flush_predictions()
        self.flush(timeout)
        self.producer = None

    def undelivered(self) -> str | None:
        """Why outputs are not being delivered (see :mod:`streameval.agents.delivery`), or
        None. Delivery reports that wait to be served are served first."""
        if self.fatal is None and self.producer is not None:
            self.poll(0)
        if self.fatal is not None:
            return self.fatal
        if self.producer is None or not hasattr(self.producer, "__len__"):
            return None  # gone, or a producer that cannot say what it holds
        if len(self.producer) == 0:  # librdkafka holds nothing: none waits
            self.waiting.clear()
        return self.waiting.problem(self.clock())

    @property
    def healthy(self) -> bool:
        """False once an output was not delivered, or while outputs wait undelivered for
        longer than :data:`~streameval.agents.delivery.UNDELIVERED_SECONDS`, or once the
        producer failed fatally."""
        return not self.counts["delivery_errors"] and self.undelivered() is None
