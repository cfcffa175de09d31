"""What a worker does with each message: decode, route to the stream's runner, publish.

:class:`StreamWorker` is the Kafka glue between the Faust agent
(:mod:`streameval.agents.app`) or ``run``'s consumer (:mod:`streameval.agents.inline`)
and the pure core. It decodes each message (:mod:`streameval.agents.codec`) and hands
the events to the stream's :class:`~streameval.pipeline.runner.StreamRunner`; the rest
is done by its parts, one job each:

* :class:`~streameval.agents.streams.StreamRegistry`: the runner of each stream, defined
  or restored from its checkpoint;
* :class:`~streameval.agents.parking.Parking`: events of streams not defined yet;
* :class:`~streameval.pipeline.memory.BytePool`: the worker's byte budget, shared by the
  parking and every stream's runner (events beyond it go to the deadletter as
  ``over_budget``);
* :class:`~streameval.agents.publish.Publisher`: the outputs, their duplicate flags and
  the deadletter records of input that could not be used;
* :class:`~streameval.agents.checkpoint.StreamCheckpoints`: when and what to checkpoint;
* :class:`~streameval.agents.idle.IdleRelease`: when a stream's queued events pass its
  other, silent, topic.

No metric or learner logic lives here.

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

Failover: when a worker of the group dies, the group gives its partitions to the others.
A stream this worker has no runner for is looked up in the checkpoints topic *again*
(its owner checkpointed it after this worker started): the first time such a stream is
touched, and then every few seconds for streams whose events wait in the parking. It is
restored from its newest checkpoint, the redelivered messages before that checkpoint are
dropped by their Kafka positions, and the outputs its previous owner had already
delivered are published again flagged ``duplicate`` (``tests/test_failover.py``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from streameval.agents import service_log
from streameval.agents.admission import Admission, Budget
from streameval.agents.allocator import keep_large_blocks_apart
from streameval.agents.checkpoint import CheckpointError, StreamCheckpoints
from streameval.agents.codec import decode, input_events
from streameval.agents.config import KafkaSettings
from streameval.agents.dashboard import DashboardHistory
from streameval.agents.idle import IdleRelease
from streameval.agents.parking import Parking
from streameval.agents.publish import PRODUCER_DEFAULTS, Publisher
from streameval.agents.streams import StreamConflict, StreamRegistry
from streameval.agents.topics import TopicNames
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import InputEvent, Output
from streameval.pipeline.ingest import Rejection
from streameval.pipeline.memory import MAX_STRING, STREAM_BYTES, WORKER_BYTES, BytePool
from streameval.pipeline.runner import StreamRunner
from streameval.pipeline.spec import SpecError

log = logging.getLogger(__name__)


class StreamWorker:
    """One worker process: its streams, its outputs, its checkpoints, its counters."""

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
        worker_bytes: int | None = WORKER_BYTES,
        stream_bytes: int | None = STREAM_BYTES,
        max_string: int | None = MAX_STRING,
        predictions: bool = True,
        producer: Any = None,
        checkpoints: bool = True,
        budget: Budget | None = None,
    ) -> None:
        keep_large_blocks_apart()  # checkpoints' buffers off the heap: agents.allocator
        if producer is None:
            from confluent_kafka import Producer

            producer = Producer({**settings.confluent_config(), **PRODUCER_DEFAULTS})
        self.settings = settings
        self.names = TopicNames.for_prefix(settings.topic_prefix)
        self.counts: Counter[str] = Counter()
        self.checkpoints = StreamCheckpoints(key, checkpoint_every, enabled=checkpoints)
        self.pool = BytePool(worker_bytes)  # what the parking and the runners hold
        self.streams = StreamRegistry(
            self.checkpoints, predictions=predictions, orphan_ttl=orphan_ttl,
            pool=self.pool, stream_bytes=stream_bytes, max_string=max_string,
        )  # fmt: skip
        self.parking = Parking(park_limit, park_timeout, stream_bytes=stream_bytes, pool=self.pool)
        self.publisher = Publisher(producer, self.names, self.counts)
        self.release = IdleRelease(idle_timeout, grace=rejoin_grace)
        self.history = DashboardHistory()  # what the dashboard shows (bounded, in memory)
        self.last_event = time.monotonic()
        # looks for checkpoints of parked streams: after 2 s, then ever more rarely (up to
        # 32 s) while they find none, from 2 s again when another stream is parked
        self._refresh_wait = 2.0
        self._refreshed = 0.0
        self._parked_seen: set[str] = set()
        self._looked: set[str] = set()  # streams not in memory whose checkpoint was looked for
        self.refused: dict[str, str] = {}  # streams whose checkpoint failed verification
        self.admission = Admission(budget)
        # streams not defined, by id: (deadletter kind, reason); over budget, or it raised
        self.stopped: dict[str, tuple[str, str]] = {}
        self._touching: str | None = None  # the stream of the message being handled

    @property
    def runners(self) -> dict[str, StreamRunner]:
        """The runner of every stream this worker has, by stream id."""
        return self.streams.runners

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
        config = self.settings.confluent_config()
        found = self.checkpoints.read(config, self.names.checkpoints)
        self.publisher.start(config)
        return found

    def _runner(self, stream: str, *, force: bool = False) -> StreamRunner | None:
        """The runner of ``stream``: in memory, else from its newest checkpoint, else None.

        A stream not in memory is one this worker has just been given (a rebalance after
        its owner died or left) or one nobody defined. Its newest checkpoint may have been
        written after this worker read the checkpoints topic, so the topic is read again
        the first time such a stream is touched (``force``: now; otherwise at most once a
        second, the stream's events waiting meanwhile in the parking, see
        :meth:`adopt_parked`).
        """
        runner = self.streams.get(stream)
        if runner is not None:
            return runner
        if self.checkpoints.reader is not None and stream not in self._looked:
            if not force and time.monotonic() - self._refreshed < 1.0:
                return None
            self._refresh_checkpoints()
            if len(self._looked) > 100_000:  # a flood of undefined stream ids
                self._looked.clear()
            self._looked.add(stream)
        if stream in self.refused:
            return None
        try:
            runner = self.streams.restore(stream)
        except CheckpointError as exc:
            self._refuse(stream, str(exc))
            return None
        if runner is None:
            return None
        self.admission.charge(runner.config)  # admitted once: charged, never refused now
        self.release.heard_now(stream)
        marks = getattr(runner, "output_marks", {})
        top = self.publisher.find_emitted(self.settings.confluent_config(), stream, marks)
        service_log.event(
            "restored", stream, checkpoint=self.checkpoints.ids[stream],
            n_labelled=runner.experiment.n_labelled, seq=runner.n_outputs, emitted_seq=top,
            message=f"restored stream {stream} from checkpoint {self.checkpoints.ids[stream]}",
        )  # fmt: skip
        self._unpark(stream, runner)
        return runner

    def _unpark(self, stream: str, runner: StreamRunner) -> None:
        """Push ``stream``'s parked events into its runner, in the order they came.

        Done the moment the runner exists, before any later event of the stream: those
        would move the runner's Kafka positions past the parked ones, which it would
        then drop as redeliveries.
        """
        for parked in self.parking.take(stream):
            topic_of = getattr(self.names, parked.kind)
            self._push(runner, parked.kind, parked.event, topic_of, parked.position)

    # -- input ----------------------------------------------------------------------------

    def handle(
        self, kind: str, raw: bytes | None, key: bytes | None, partition: int, offset: int
    ) -> None:
        """Process one message read from the ``kind`` topic.

        Nothing a message does escapes: an exception raised while handling it (a
        ``MemoryError`` too) dead-letters the message (kind ``worker_error``) and stops
        the stream it touched, which publishes its ``failed`` notice; the message counts
        as handled (it is acknowledged), and the worker goes on with the other streams.
        """
        self._touching = None
        try:
            self._handle(kind, raw, key, partition, offset)
        except Exception as exc:  # isolate the message: see the docstring
            self._contain(exc, getattr(self.names, kind), raw, key, partition, offset)

    def _handle(
        self, kind: str, raw: bytes | None, key: bytes | None, partition: int, offset: int
    ) -> None:
        self.last_event = time.monotonic()
        self.release.clock.heard(self.last_event)
        topic = getattr(self.names, kind)
        if kind == "experiments":
            self._define(raw, key, topic, partition, offset)
            return
        events, reasons = input_events(kind, raw)
        for reason in reasons:
            self.publisher.deadletter("schema", reason, topic, partition, offset, raw, key)
        first, n = 0, len(events)
        while first < n:  # the events of each stream, one run at a time
            stream = events[first].stream
            end = first + 1
            while end < n and events[end].stream == stream:
                end += 1
            self._route_run(kind, events[first:end], topic, partition, offset, first)
            first = end
        self.publisher.flush_predictions()

    def _route_run(
        self,
        kind: str,
        events: list[InputEvent],
        topic: str,
        partition: int,
        offset: int,
        first: int,
    ) -> None:
        """Route consecutive events of one stream, read from one message at the indexes
        ``first``, ``first + 1``...: to its runner all at once, else one by one."""
        stream = events[0].stream
        runner = self._runner(stream)
        if runner is None:
            for index, event in enumerate(events, first):
                self._route(kind, event, topic, (partition, offset, index))
            return
        self._touching = stream
        outputs, rejections = runner.push_message(kind, events, partition, offset, first)
        self.release.heard_on(stream, kind)
        self._emit(stream, runner, outputs, rejections, topic, (partition, offset))
        self.checkpoints.changed(stream, events=len(events))
        self.counts["events"] += len(events)

    def _define(
        self, raw: bytes | None, key: bytes | None, topic: str, partition: int, offset: int
    ) -> None:
        def refuse(kind: str, reason: str) -> None:
            self.publisher.deadletter(kind, reason, topic, partition, offset, raw, key)

        message, reason = decode("experiments", raw)
        if message is None:
            return refuse("schema", reason or "invalid")
        try:
            config = ExperimentConfig.from_dict(message)
        except (TypeError, ValueError) as exc:
            return refuse("bad_experiment", str(exc))
        self._touching = config.stream
        self._runner(config.stream, force=True)  # a definition read again after a rebalance
        if config.stream in self.refused:  # not defined afresh: its history is not ours
            return refuse("checkpoint_refused", self.refused[config.stream])
        over = None if self.streams.get(config.stream) else self.admission.refusal(config)
        if over is not None:  # estimated before anything is allocated
            self._stop(config.stream, over, "over_budget")
            return refuse("over_budget", over)
        try:
            runner = self.streams.define(config)
        except StreamConflict as exc:
            return refuse("bad_experiment", str(exc))
        except (SpecError, ValueError) as exc:  # allow-listed learners and detectors only
            return refuse("bad_experiment", f"experiment refused: {exc}")
        self.history.define(config)  # the dashboard lists its settings
        if runner is None:  # defined already, with this experiment
            return None
        self.admission.charge(config)
        self.stopped.pop(config.stream, None)
        self.release.heard_now(config.stream)
        self.checkpoints.changed(config.stream)
        self.counts["experiments"] += 1
        service_log.event(
            "defined", config.stream, learners=list(config.learners),
            message=f"stream {config.stream} defined: {', '.join(config.learners)}",
        )  # fmt: skip
        if self.checkpoints.enabled:  # before any output: a successor finds where outputs start
            self.checkpoint()
        self._unpark(config.stream, runner)
        return None

    def _route(
        self, kind: str, event: InputEvent, topic: str, position: tuple[int, int, int]
    ) -> None:
        runner = self._runner(event.stream)
        if runner is not None:
            self._push(runner, kind, event, topic, position)
        elif event.stream in self.refused or event.stream in self.stopped:
            self._unknown(event, topic, position)
        elif (refused := self.parking.park(kind, event, position)) is not None:
            self.publisher.deadletter(
                *refused, topic, position[0], position[1], event.to_dict(), event.stream
            )

    def _refuse(self, stream: str, reason: str) -> None:
        """``stream``'s checkpoint failed verification: the stream cannot go on here.

        Said everywhere at once: a deadletter record, the stream's ``failed`` notice on
        the metrics topic (whoever waits for its results stops waiting), ``/health``
        (503 with the reason), the log. Its events go to the deadletter from now on; the
        worker serves its other streams. Resuming it needs the key that signed it.
        """
        text = f"checkpoint of stream {stream!r} refused: {reason}"
        self.refused[stream] = text
        service_log.event(
            "failed", stream, level=logging.ERROR, reason="checkpoint_refused", message=text
        )
        self.publisher.deadletter(
            "checkpoint_refused", text, self.names.checkpoints, -1, -1, None, stream
        )
        self.publisher.publish_refusal(stream, text)

    def _contain(
        self,
        exc: Exception,
        topic: str,
        raw: bytes | None,
        key: bytes | None,
        partition: int,
        offset: int,
    ) -> None:
        """An exception escaped the handling of a message: dead-letter the message with
        it and stop the stream it touched (see :meth:`handle`)."""
        stream = self._touching
        text = f"{type(exc).__name__}: {exc}"
        log.error("handling a message of %s failed (stream %s): %s", topic, stream, text)
        stopped = f"; stream {stream!r} was stopped" if stream is not None else ""
        self.publisher.deadletter(
            "worker_error", f"handling this message failed: {text}{stopped}", topic, partition,
            offset, raw, key,
        )  # fmt: skip
        if stream is None:
            return
        runner = self.streams.get(stream)
        if runner is None:  # its definition failed: nothing was defined
            self._stop(stream, text, "worker_error")
            return
        if runner.failed is None:
            runner.fail(text)
        self.checkpoints.changed(stream)
        if stream not in self.streams.concluded:
            self.publisher.publish_failure(stream, runner)
            self.streams.concluded.add(stream)
            self._concluded(stream, runner)

    def _stop(self, stream: str, reason: str, kind: str) -> None:
        """``stream`` is not defined here (over budget, or its definition raised): its
        ``failed`` notice says why, so whoever waits for its results stops waiting."""
        if len(self.stopped) > 100_000:  # a flood of refused stream ids
            self.stopped.clear()
        service_log.event(
            "failed", stream, level=logging.ERROR, reason=kind,
            message=f"stream {stream!r} is not defined: {reason}",
        )  # fmt: skip
        self.stopped[stream] = (kind, reason)
        self.publisher.publish_refusal(stream, reason, kind)

    def _unknown(self, event: InputEvent, topic: str, position: tuple[int, int, int]) -> None:
        """Deadletter an event of a stream no experiment defines: none came, its checkpoint
        was refused, or its definition was (over budget, or it raised)."""
        stream = event.stream
        if stream in self.refused:
            kind, reason = "checkpoint_refused", self.refused[stream]
        elif stream in self.stopped:
            kind, why = self.stopped[stream]
            reason = f"stream {stream!r} is not defined: {why}"
        else:
            kind, reason = "unknown_stream", f"no experiment defines stream {stream!r}"
        self.publisher.deadletter(
            kind, reason, topic, position[0], position[1], event.to_dict(), stream
        )

    def _push(
        self,
        runner: StreamRunner,
        kind: str,
        event: InputEvent,
        topic: str,
        position: tuple[int, int, int],
    ) -> None:
        self._touching = event.stream
        outputs, rejections = runner.push(kind, event, position)
        self.release.heard_on(event.stream, kind)
        self._emit(event.stream, runner, outputs, rejections, topic, position[:2])
        self.checkpoints.changed(event.stream, events=1)
        self.counts["events"] += 1

    def _emit(
        self,
        stream: str,
        runner: StreamRunner,
        outputs: list[Output],
        rejections: list[Rejection],
        topic: str,
        source: tuple[int, int],
    ) -> None:
        """Publish what ``runner`` made of an input, deadletter what it rejected, and its
        results (or failure) once it finished (or failed)."""
        self.publisher.publish(outputs, runner)
        self.history.record(outputs)
        for r in rejections:
            self._reject(r, topic, *source)
        if stream in self.streams.concluded:
            return
        if runner.finished:
            self.publisher.publish_results(stream, runner)
        elif runner.failed is not None:
            self.publisher.publish_failure(stream, runner)
        else:
            return
        self.streams.concluded.add(stream)
        self.checkpoints.soon()
        self._concluded(stream, runner)

    def _concluded(self, stream: str, runner: StreamRunner) -> None:
        """Log that ``stream`` finished (its results are on their way) or failed."""
        n = runner.experiment.n_labelled
        if runner.failed is None:
            service_log.event("finished", stream, n_labelled=n, outputs=runner.n_outputs)
        else:
            service_log.event(
                "failed", stream, level=logging.ERROR, n_labelled=n,
                message=f"stream {stream!r} stopped: {runner.failed}",
            )  # fmt: skip

    def _reject(self, r: Rejection, topic: str, partition: int, offset: int) -> None:
        """Deadletter a rejection, named by the message that carried the event when known."""
        if r.source is not None:
            topic, partition, offset = getattr(self.names, r.source[0]), r.source[1], r.source[2]
        self.publisher.deadletter(
            r.kind, r.reason, topic, partition, offset, r.event.to_dict(), r.event.stream
        )

    # -- checkpoints and housekeeping -----------------------------------------------------

    def checkpoint_due(self) -> bool:
        return self.checkpoints.due()

    def checkpoint(self) -> None:
        """Flush every output, then save every stream changed since the last checkpoint."""
        self.publisher.flush_predictions()
        self.publisher.flush(30)  # the output positions, up to date
        written = {}
        for stream in sorted(self.checkpoints.dirty):
            runner = self.runners.get(stream)
            if runner is None:
                continue
            runner.output_marks = self.publisher.marks(stream)
            for key, record in self.checkpoints.parts(stream, runner):
                self.publisher.produce_checkpoint(key, record, stream)
            written[stream] = runner.experiment.n_labelled
        self.publisher.confirm(30)
        self.counts["checkpoints"] += 1
        for stream, n in written.items():  # confirmed by the broker
            service_log.event(
                "checkpoint", stream, checkpoint=self.checkpoints.ids[stream], n_labelled=n
            )
        for stream, key in self.checkpoints.saved():  # what compaction may now delete
            self.publisher.produce_checkpoint(key, None, stream)

    def idle_seconds(self) -> float:
        return time.monotonic() - self.last_event

    def _refresh_checkpoints(self) -> set[str]:
        """Read the checkpoints written since the last read (see
        :meth:`~streameval.agents.checkpoint.StreamCheckpoints.refresh`)."""
        self._refreshed = time.monotonic()
        return self.checkpoints.refresh(
            self.settings.confluent_config(), self.names.checkpoints, self.runners
        )

    def adopt_parked(self) -> None:
        """Streams whose events wait in the parking because this worker has no runner for
        them: after a rebalance they are another worker's, checkpointed since this one
        started. Restore them and let their events in, in the order they came."""
        if not self.parking or self.checkpoints.reader is None:  # none read at the start
            return
        parked = set(self.parking.sizes())
        if parked - self._parked_seen:
            self._refresh_wait = 2.0
            if len(self._parked_seen) > 100_000:  # a flood of undefined stream ids
                self._parked_seen.clear()
            self._parked_seen |= parked
        if time.monotonic() - self._refreshed < self._refresh_wait:
            return
        found = self._refresh_checkpoints() & parked
        self._refresh_wait = 2.0 if found else min(2 * self._refresh_wait, 32.0)
        self._looked |= parked  # just looked for, all of them
        for stream in sorted(found):
            runner = self._runner(stream)  # a restored one has taken its parked events
            if runner is not None:
                self._unpark(stream, runner)

    def tick(self) -> None:
        """Periodic housekeeping: parked streams' checkpoints, parked timeouts, idle
        release, producer callbacks."""
        self.adopt_parked()
        for _, items in self.parking.expired():
            for parked in items:
                self._unknown(parked.event, getattr(self.names, parked.kind), parked.position)
        for stream, runner, topic, _ in self.release.due(self.runners):
            outputs, rejections = runner.release_idle(topic)
            self._emit(stream, runner, outputs, rejections, getattr(self.names, topic), (-1, -1))
            self.checkpoints.changed(stream)
        self.publisher.flush_predictions()
        self.publisher.poll(0)

    @property
    def healthy(self) -> bool:
        """False once an output was not delivered, while outputs wait undelivered, or once
        a checkpoint was refused (``/health`` then answers 503)."""
        return self.publisher.healthy and not self.refused

    def status(self) -> dict[str, Any]:
        """What the health endpoint and the logs show."""
        undelivered = self.publisher.undelivered()
        return {
            "healthy": self.healthy,
            "undelivered": undelivered,
            "refused": dict(self.refused),
            "admitted_memory": self.admission.memory,
            "streams": self.streams.status(),
            "parked": self.parking.sizes(),
            "bytes": {
                "held": self.pool.held,
                "peak": self.pool.peak,
                "limit": self.pool.limit,
                "parked": self.parking.nbytes,
            },
            "counts": dict(self.counts),
        }
