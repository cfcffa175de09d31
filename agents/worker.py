"""What a worker does with each message: decode, route to the stream's runner, publish.

:class:`StreamWorker` is the Kafka glue between the Faust agent
(:mod:`streameval.agents.app`) and the pure core: it decodes and validates messages
(``schemas``), keeps one :class:`~streameval.pipeline.runner.StreamRunner` per stream,
publishes what the runners produce (predictions, metrics, drift alarms, the
final results document) with a confluent-kafka producer, sends bad input to
``deadletter`` with its reason and source offset, and writes authenticated
checkpoints (:mod:`streameval.agents.checkpoint`). No metric or learner logic lives here.

Delivery guarantee: the agent acknowledges input messages only after a
checkpoint that contains their effect has been written (and every output
before it flushed), so the committed offsets never run ahead of the saved
state; what is redelivered after a crash is dropped by the runners' Kafka
positions. Outputs produced after the last checkpoint of a crashed worker are
produced again by its successor (at-least-once on the output topics), with the
same output ``seq``; those the crashed worker had delivered are flagged
``"duplicate": true`` and counted (:mod:`streameval.agents.outputs`).

A stream is checkpointed as soon as it is defined, before any of its events,
so a worker killed before the stream's first regular checkpoint leaves its
successor a checkpoint (and the output positions) to resume from.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from typing import Any

from streameval.agents.checkpoint import CheckpointError, dumps, read_checkpoints, to_messages
from streameval.agents.config import KafkaSettings
from streameval.agents.dashboard import DashboardHistory
from streameval.agents.health import PRODUCER_QUEUE, BrokerHealth
from streameval.agents.idle import IdleClock
from streameval.agents.outputs import OUTPUT_KINDS, OutputPositions, scan_emitted
from streameval.agents.topics import TopicNames
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import DriftEvent, InputEvent, PredictionEvent, event_from_dict
from streameval.pipeline.experiment import MetricSnapshot, Output, clean
from streameval.pipeline.ingest import Rejection
from streameval.pipeline.merge import FEATURES, LABELS
from streameval.pipeline.runner import StreamRunner
from streameval.pipeline.spec import SpecError
from streameval.schemas import deadletter_record, decode, decode_events, encode

log = logging.getLogger(__name__)

# murmur2_random: a stream's outputs land on the partition of its inputs (co-partitioned),
# a partition a restarted worker can compute (streameval.agents.outputs)
PRODUCER_DEFAULTS = {
    "linger.ms": 20,
    "enable.idempotence": True,
    "acks": "all",
    "partitioner": "murmur2_random",
}
#: Most predictions one predictions-topic message carries (a JSON array, like packed input):
#: well under ``schemas.MAX_PACKED_EVENTS`` and, at ~150 bytes each, under 1 MiB.
PREDICTIONS_PER_MESSAGE = 500


def failure_text(stream: str, error: Any, deadletter: str) -> str:
    """What ``run`` and the readers of the metrics topic say of a stream that failed."""
    return (
        f"stream {stream!r} stopped: {error} (the event that failed is in the deadletter "
        f"topic {deadletter}, reason experiment_error)"
    )


def watched_producer(settings: KafkaSettings, health: BrokerHealth) -> Any:
    """A worker's output producer that reports broker errors to ``health``, its queue sized
    for the outputs of what was taken before an outage was noticed
    (:mod:`streameval.agents.health`)."""
    from confluent_kafka import Producer

    return Producer(
        {**settings.confluent_config(), **PRODUCER_DEFAULTS, **PRODUCER_QUEUE,
         "error_cb": health.on_kafka_error}
    )  # fmt: skip


class StreamWorker:
    """The state of one worker process: its streams, its producer, its counters."""

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        key: bytes,
        checkpoint_every: int = 20_000,
        orphan_ttl: float = 3600.0,
        idle_timeout: float = 30.0,
        rejoin_grace: float = 60.0,
        park_limit: int = 100_000,
        park_timeout: float = 60.0,
        predictions: bool = True,
        producer: Any = None,
        checkpoints: bool = True,
    ) -> None:
        from confluent_kafka import Producer

        self.settings = settings
        self.names = TopicNames.for_prefix(settings.topic_prefix)
        self.key = key
        self.checkpoint_every = checkpoint_every
        self.orphan_ttl = orphan_ttl
        self.idle_timeout = idle_timeout
        self.park_limit = park_limit
        self.park_timeout = park_timeout
        # make and publish predictions for the streams this worker defines (a restored stream
        # keeps the choice of the worker that defined it, and so its output numbering)
        self.predictions = predictions
        # False for a worker that is never restarted (streameval.agents.inline): it writes no
        # checkpoint
        self.checkpoints = checkpoints
        self.producer = producer or Producer({**settings.confluent_config(), **PRODUCER_DEFAULTS})
        self.runners: dict[str, StreamRunner] = {}
        self.parked: dict[str, list[tuple[str, InputEvent, float, tuple[int, int, int]]]] = {}
        self.counts: Counter[str] = Counter()
        self.dirty: set[str] = set()
        self.checkpoint_ids: dict[str, int] = {}
        self.published_results: set[str] = set()
        self.since_checkpoint = 0
        self.last_event = time.monotonic()
        # silence of the input topics for the idle release: only time the worker could read
        self.idle = IdleClock(grace=rejoin_grace)
        # per stream and input topic (monotonic, never checkpointed): when the topic last
        # brought an event of the stream (the stream's definition counts as one), and since
        # which housekeeping tick the stream's events on it have been queued, waiting for
        # the other topic (a queue drains only when that topic brings events, or at a release)
        self.heard: dict[str, dict[str, float]] = {}
        self.queued_since: dict[str, dict[str, float]] = {}
        self.delivery_errors: list[str] = []
        self.history = DashboardHistory()  # what the dashboard shows (bounded, in memory)
        self.output_topics = {kind: getattr(self.names, kind) for kind in OUTPUT_KINDS}
        self.positions = OutputPositions()
        # per restored stream: output kind -> highest seq already on that topic
        self.emitted: dict[str, dict[str, int]] = {}
        # predictions made since the last flush, per stream: published in bulk
        self.pending_predictions: dict[str, list[dict[str, Any]]] = {}

    # -- recovery -------------------------------------------------------------------------

    def restore(self) -> int:
        """Read the checkpoints topic; return how many streams have a checkpoint.

        A stream is restored from its newest checkpoint when it is first touched
        (its definition or one of its events arrives), so checkpoints of other
        experiments on the same topics, written with another key, are never read.
        A checkpoint whose HMAC does not verify stops the worker with
        :class:`~streameval.agents.checkpoint.CheckpointError`: resuming without it would give
        wrong results, silently.
        """
        self._checkpoints = read_checkpoints(
            self.settings.confluent_config(), self.names.checkpoints
        )
        self.positions.start(self.settings.confluent_config(), self.output_topics.values())
        return len(self._checkpoints.latest)

    def _restored(self, stream: str) -> StreamRunner | None:
        """The runner of ``stream``: in memory, else from its checkpoint, else None."""
        runner = self.runners.get(stream)
        reader = getattr(self, "_checkpoints", None)
        if runner is not None or reader is None or stream not in reader.latest:
            return runner
        asm = reader.latest[stream]
        runner = reader.load(stream, self.key)
        del reader.latest[stream]
        if not isinstance(runner, StreamRunner):
            raise CheckpointError(f"checkpoint of {stream!r} does not hold a stream runner")
        self.runners[stream] = runner
        self._heard_now(stream)
        self.checkpoint_ids[stream] = asm.id
        runner.n_restores += 1
        if runner.finished or runner.failed is not None:  # its results (or failure) went out
            self.published_results.add(stream)
        marks = getattr(runner, "output_marks", {})
        emitted = scan_emitted(self.settings.confluent_config(), stream, self.output_topics, marks)
        self.emitted[stream] = emitted
        print(
            f"streameval worker: restored stream {stream} from checkpoint {asm.id} "
            f"({runner.experiment.n_labelled} labels, output seq {runner.n_outputs}; "
            f"already on the output topics up to seq {max(emitted.values(), default=-1)})",
            file=sys.stderr,
            flush=True,
        )
        return runner

    # -- input ----------------------------------------------------------------------------

    def handle(
        self, kind: str, raw: bytes | None, key: bytes | None, partition: int, offset: int
    ) -> None:
        """Process one message read from the ``kind`` topic."""
        self.last_event = time.monotonic()
        self.idle.heard(self.last_event)
        topic = getattr(self.names, kind)
        if kind == "experiments":
            self._define(raw, key, topic, partition, offset)
            return
        messages, reasons = decode_events(kind, raw)
        for reason in reasons:
            self._deadletter("schema", reason, topic, partition, offset, raw, key)
        for index, message in enumerate(messages):
            event = event_from_dict(message)
            self._route(kind, event, topic, partition, offset, index)
        self.flush_predictions()

    def _define(
        self, raw: bytes | None, key: bytes | None, topic: str, partition: int, offset: int
    ) -> None:
        message, reason = decode("experiments", raw)
        if message is None:
            self._deadletter("schema", reason or "invalid", topic, partition, offset, raw, key)
            return
        try:
            config = ExperimentConfig.from_dict(message)
        except (TypeError, ValueError) as exc:
            self._deadletter("bad_experiment", str(exc), topic, partition, offset, raw, key)
            return
        existing = self._restored(config.stream)
        if existing is not None:
            if existing.config.to_dict() != config.to_dict():
                self._deadletter(
                    "bad_experiment",
                    f"stream {config.stream!r} is already defined with another experiment",
                    topic,
                    partition,
                    offset,
                    raw,
                    key,
                )
            return
        try:
            runner = StreamRunner(
                config, emit_predictions=self.predictions, orphan_ttl=self.orphan_ttl
            )
        except (SpecError, ValueError) as exc:  # allow-listed learners and detectors only
            self._deadletter(
                "bad_experiment", f"experiment refused: {exc}", topic, partition, offset, raw, key
            )
            return
        self.runners[config.stream] = runner
        self._heard_now(config.stream)
        self.dirty.add(config.stream)
        self.counts["experiments"] += 1
        log.info("stream %s defined: %s", config.stream, ", ".join(config.learners))
        if self.checkpoints:  # before any output: a successor always finds where outputs start
            self.checkpoint()
        for src, event, _, position in self.parked.pop(config.stream, []):
            self._push(runner, src, event, getattr(self.names, src), position)

    def _route(
        self, kind: str, event: InputEvent, topic: str, partition: int, offset: int, index: int
    ) -> None:
        runner = self._restored(event.stream)
        if runner is None:
            parked = self.parked.setdefault(event.stream, [])
            if sum(len(p) for p in self.parked.values()) >= self.park_limit:
                self._deadletter(
                    "unknown_stream",
                    f"no experiment defines stream {event.stream!r}",
                    topic,
                    partition,
                    offset,
                    event.to_dict(),
                    event.stream,
                )
                return
            parked.append((kind, event, time.monotonic(), (partition, offset, index)))
            return
        self._push(runner, kind, event, topic, (partition, offset, index))

    def _push(
        self,
        runner: StreamRunner,
        kind: str,
        event: InputEvent,
        topic: str,
        position: tuple[int, int, int],
    ) -> None:
        outputs, rejections = runner.push(kind, event, position)
        self.heard.setdefault(event.stream, {})[kind] = time.monotonic()
        self._publish(outputs, runner)
        for r in rejections:
            self._reject(r, topic, position[0], position[1])
        self.dirty.add(event.stream)
        self.since_checkpoint += 1
        self.counts["events"] += 1
        self._conclude(event.stream, runner)

    def _conclude(self, stream: str, runner: StreamRunner) -> None:
        """Publish the stream's results once it finished, or its failure once it failed."""
        if stream in self.published_results:
            return
        if runner.finished:
            self._publish_results(stream, runner)
        elif runner.failed is not None:
            self._publish_failure(stream, runner)

    # -- output ---------------------------------------------------------------------------

    def _produce(self, topic: str, key: str, value: dict[str, Any]) -> None:
        self._produce_raw(topic, key, encode(clean(value)))

    def _produce_raw(self, topic: str, key: str, data: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, data, key.encode("utf-8"), on_delivery=self._delivered)
                break
            except BufferError:
                self.producer.poll(0.05)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.counts["delivery_errors"] += 1
            if len(self.delivery_errors) < 20:
                self.delivery_errors.append(f"{msg.topic()}: {err}")
            return
        offset = msg.offset()
        if offset is not None and offset >= 0:
            self.positions.delivered(msg.topic(), msg.partition(), offset)

    def _publish(self, outputs: list[Output], runner: StreamRunner) -> None:
        """Produce ``outputs`` of ``runner`` (numbered from ``runner.n_outputs - len``).

        Predictions are collected and published in bulk by :meth:`flush_predictions`
        (one message per input message, at most :data:`PREDICTIONS_PER_MESSAGE` each);
        the other outputs are produced one message each, at once.
        """
        seq = runner.n_outputs - len(outputs)
        for out in outputs:
            if type(out) is PredictionEvent:
                self._collect_prediction(out, seq, runner)
            elif isinstance(out, MetricSnapshot):
                self._produce_output("metrics", out.stream, out.to_dict(), seq, runner)
            elif isinstance(out, DriftEvent):
                self._produce_output("drift", out.stream, out.to_dict(), seq, runner)
            seq += 1
        self.history.record(outputs)
        if outputs:
            self.producer.poll(0)

    def _collect_prediction(self, out: PredictionEvent, seq: int, runner: StreamRunner) -> None:
        value = out.to_dict()
        y = value["y_pred"]
        if type(y) is float and y - y != 0.0:  # NaN/infinity: null on the wire
            value["y_pred"] = None
        value["seq"] = seq
        emitted = self.emitted.get(out.stream)
        if emitted and seq <= emitted.get("predictions", -1):
            value["duplicate"] = True
            runner.n_duplicates_marked += 1
        pending = self.pending_predictions.get(out.stream)
        if pending is None:
            self.pending_predictions[out.stream] = [value]
        else:
            pending.append(value)

    def flush_predictions(self) -> None:
        """Produce the collected predictions: a JSON array per stream and chunk, in seq order."""
        if not self.pending_predictions:
            return
        topic = self.output_topics["predictions"]
        for stream, values in self.pending_predictions.items():
            for i in range(0, len(values), PREDICTIONS_PER_MESSAGE):
                self._produce_raw(topic, stream, encode(values[i : i + PREDICTIONS_PER_MESSAGE]))
        self.pending_predictions = {}
        self.producer.poll(0)

    def _produce_output(
        self, kind: str, stream: str, value: dict[str, Any], seq: int, runner: StreamRunner
    ) -> None:
        """Produce one numbered output; flag it if a crashed worker had delivered it already."""
        value["seq"] = seq
        emitted = self.emitted.get(stream)
        if emitted and seq <= emitted.get(kind, -1):
            value["duplicate"] = True
            runner.n_duplicates_marked += 1
        self._produce(self.output_topics[kind], stream, value)

    def _publish_results(self, stream: str, runner: StreamRunner) -> None:
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
        value = {
            "stream": stream,
            "kind": "results",
            "n_labelled": results["n_labelled"],
            "ts": runner.experiment.last_ts,
            "results": results,
        }
        self._publish_last(stream, runner, value, seq)

    def _publish_failure(self, stream: str, runner: StreamRunner) -> None:
        """Tell the metrics topic that ``stream`` stopped, in place of its results.

        No results document is made of a half-updated experiment; this notice
        lets whoever waits for the results (``run --dashboard``, a user's
        consumer) stop waiting and find the event that failed in the deadletter
        topic.
        """
        self.flush_predictions()
        value = {
            "stream": stream,
            "kind": "failed",
            "n_labelled": runner.experiment.n_labelled,
            "ts": runner.experiment.last_ts,
            "error": runner.failed,
            "deadletter": self.names.deadletter,
        }
        self._publish_last(stream, runner, value, runner.take_seq())

    def _publish_last(
        self, stream: str, runner: StreamRunner, value: dict[str, Any], seq: int
    ) -> None:
        """The stream's last output (its results or its failure) on the metrics topic."""
        self._produce_output("metrics", stream, value, seq, runner)
        self.published_results.add(stream)
        self.since_checkpoint = max(self.since_checkpoint, self.checkpoint_every)  # save now

    def _reject(self, r: Rejection, topic: str, partition: int, offset: int) -> None:
        """Deadletter a rejection, named by the message that carried the event when known."""
        if r.source is not None:
            topic, partition, offset = getattr(self.names, r.source[0]), r.source[1], r.source[2]
        if r.kind == "experiment_error":
            log.error("stream %s stopped: %s", r.event.stream, r.reason)
        self._deadletter(
            r.kind, r.reason, topic, partition, offset, r.event.to_dict(), r.event.stream
        )

    def _deadletter(
        self,
        kind: str,
        reason: str,
        topic: str,
        partition: int,
        offset: int,
        payload: Any,
        key: Any,
    ) -> None:
        if isinstance(payload, dict):
            payload = encode(clean(payload)).decode("utf-8")
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
        self._produce(self.names.deadletter, key or "", record)
        self.counts[f"deadletter_{kind}"] += 1

    # -- checkpoints and housekeeping -----------------------------------------------------

    def checkpoint_due(self) -> bool:
        return self.since_checkpoint >= self.checkpoint_every

    def checkpoint(self) -> None:
        """Flush every output, then save every stream changed since the last checkpoint."""
        self.flush_predictions()
        self.producer.flush(30)
        for stream in sorted(self.dirty):
            runner = self.runners.get(stream)
            if runner is None:
                continue
            cid = self.checkpoint_ids.get(stream, 0) + 1
            runner.output_marks = self.positions.marks(stream, self.output_topics)
            blob, signature = dumps(runner, self.key)
            for part in to_messages(stream, cid, blob, signature):
                self._produce(self.names.checkpoints, stream, part)
            self.checkpoint_ids[stream] = cid
        remaining = self.producer.flush(30)
        if remaining or self.delivery_errors:
            raise RuntimeError(
                f"outputs not delivered ({remaining} queued): " + "; ".join(self.delivery_errors)
            )
        self.counts["checkpoints"] += 1
        self.dirty.clear()
        self.since_checkpoint = 0

    def idle_seconds(self) -> float:
        return time.monotonic() - self.last_event

    @property
    def can_ack(self) -> bool:
        """Acks may advance only when nothing waits outside a checkpointed runner."""
        return not self.parked

    def tick(self) -> None:
        """Periodic housekeeping: idle release, parked timeouts, producer callbacks."""
        now = time.monotonic()
        for stream, items in list(self.parked.items()):
            if items and now - items[0][2] > self.park_timeout:
                for kind, event, _, position in items:
                    self._deadletter(
                        "unknown_stream",
                        f"no experiment defines stream {stream!r}",
                        getattr(self.names, kind),
                        position[0],
                        position[1],
                        event.to_dict(),
                        stream,
                    )
                del self.parked[stream]
        reading = self.idle.reading_for(now)
        for stream, runner in self.runners.items():
            if runner.finished or runner.failed is not None or not runner.merger.n_waiting:
                self.queued_since.pop(stream, None)  # a queue that fills again starts anew
                continue
            for topic, other in ((FEATURES, LABELS), (LABELS, FEATURES)):
                waited, silent = self._idle_wait(stream, topic, other, now, reading)
                if min(waited, silent) <= self.idle_timeout:
                    continue
                log.warning(
                    "stream %s: nothing of it on the %s topic for %.1f s (idle timeout %.1f s):"
                    " releasing its %d queued %s events without waiting for that topic",
                    stream,
                    other,
                    silent,
                    self.idle_timeout,
                    runner.merger.n_queued(topic),
                    topic,
                )
                outputs, rejections = runner.release_idle(topic)
                self.queued_since.get(stream, {}).pop(topic, None)
                self._publish(outputs, runner)
                for r in rejections:
                    self._reject(r, getattr(self.names, topic), -1, -1)
                self.dirty.add(stream)
                self._conclude(stream, runner)  # an event released here may have failed
        self.flush_predictions()
        self.producer.poll(0)

    def _heard_now(self, stream: str) -> None:
        """A stream was defined or restored: its silence on both topics counts from now."""
        now = time.monotonic()
        self.heard[stream] = {FEATURES: now, LABELS: now}

    def _idle_wait(
        self, stream: str, topic: str, other: str, now: float, reading: float
    ) -> tuple[float, float]:
        """For ``stream``'s events queued on ``topic``: how long the queue has been
        waiting (since the housekeeping tick that first saw it non-empty), and how long
        ``other`` has brought nothing of the stream; both counted only while the worker
        could read (``reading``, :meth:`IdleClock.reading_for`).

        The idle release needs both beyond ``--idle-timeout``: an event waits at most
        that long for a silent topic (a live stream whose labels come rarely still
        gets its first predictions), and never while the other topic is bringing
        events of the stream (a replay keeps its order, however busy the worker).
        """
        queued = self.queued_since.setdefault(stream, {})
        if not self.runners[stream].merger.n_queued(topic):
            queued.pop(topic, None)
            return 0.0, 0.0
        since = queued.setdefault(topic, now)  # first seen queued at this tick
        last = self.heard.setdefault(stream, {}).setdefault(other, now)
        return min(now - since, reading), min(now - last, reading)

    @property
    def healthy(self) -> bool:
        """False once an output was not delivered (``/health`` then answers 503)."""
        return not self.counts["delivery_errors"]

    def status(self) -> dict[str, Any]:
        """What the health endpoint and the logs show."""
        return {
            "healthy": self.healthy,
            "streams": {
                s: {
                    "n_labelled": r.experiment.n_labelled,
                    "pending": len(r.experiment.buffer),
                    "finished": r.finished,
                    "failed": r.failed,
                    "outputs": r.n_outputs,
                    "duplicates_marked": r.n_duplicates_marked,
                    **r.ingest_counts(),
                }
                for s, r in self.runners.items()
            },
            "parked": {s: len(v) for s, v in self.parked.items()},
            "counts": dict(self.counts),
        }
