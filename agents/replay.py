"""Replay producer: write a stream's input events to the features and labels topics.

:func:`replay` takes the ordered input events of one or more streams
(:class:`~streameval.pipeline.events.FeatureEvent`, :class:`~streameval.pipeline.events.LabelEvent`,
:class:`~streameval.pipeline.events.EndOfStream`) and produces them with one idempotent
confluent-kafka producer:

* feature events to the features topic, label events to the labels topic, the
  end-of-stream marker to *both* (``{"stream", "end": true, "ts", "seq",
  "n_events"}``, see ``schemas/end-of-stream.json``);
* key = stream id (UTF-8), value = compact JSON (:mod:`streameval.agents.codec`);
  one producer and one partitioner for both topics, so a stream's features and
  labels land on the same partition number of the co-partitioned topics. The
  partitioner is ``murmur2_random``, the Java client's (and aiokafka's/Faust's)
  default, so any client writing a stream's key picks the same partition;
* ``enable.idempotence`` (acks=all, no duplicates or reordering on retries),
  so the order of one stream's events within a partition is the schedule order;
* event-time pacing: with ``speed=S`` an event with time ``ts`` is sent
  ``(ts - ts_first) / S`` wall seconds after the first; ``speed=None`` sends as
  fast as the broker takes them.

Missing feature values: a NaN in ``x`` is a missing value and is left out of
the message; an infinite feature value, ``ts`` or ``y`` is an error
(:class:`ValueError` naming the event), the codec's rule for input events.

The message layout is one event per message. :class:`MessageFormat` is the
seam for another layout (several events per message): a format turns events
into :class:`Message` objects and may hold some back until :meth:`flush`.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from streameval.agents.codec import input_message, written_many
from streameval.agents.config import KafkaSettings
from streameval.agents.first_delivery import ready_producer
from streameval.agents.topics import PARTITIONER, TopicNames
from streameval.pipeline.events import FeatureEvent, InputEvent, LabelEvent

log = logging.getLogger(__name__)
#: librdkafka's own log lines (connection refused, retries...) go here, not to raw stderr.
rdkafka_log = logging.getLogger(__name__ + ".librdkafka")

#: Producer settings for replays; override any of them with ``producer_config``.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 512 * 1024,
    **PARTITIONER,
    "message.timeout.ms": 120_000,
    "log.connection.close": False,
    "logger": rdkafka_log,
}
MAX_ERRORS_KEPT = 5


class ReplayError(RuntimeError):
    """Some messages were not delivered (the replay is incomplete)."""

    def __init__(self, message: str, stats: ReplayStats, errors: list[str]) -> None:
        super().__init__(message)
        self.stats = stats
        self.errors = errors

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole (a replay process reports it)
        return type(self), (str(self), self.stats, self.errors)


@dataclass(frozen=True, slots=True)
class Message:
    """One Kafka message to produce: topic kind (``features``/``labels``), key, value."""

    kind: str
    key: bytes
    value: bytes


class MessageFormat(Protocol):
    """Turns input events into messages (the seam for a batched layout)."""

    def add(self, event: InputEvent) -> list[Message]:
        """Messages ready to send after ``event`` (possibly none, if held back)."""
        ...

    def flush(self) -> list[Message]:
        """Messages still held back (end of the replay)."""
        ...


class OneEventPerMessage:
    """Every event is its own message."""

    def add(self, event: InputEvent) -> list[Message]:
        """Encode ``event`` at once."""
        kinds, value = input_message(event)
        key = event.stream.encode("utf-8")
        return [Message(kind, key, value) for kind in kinds]

    def flush(self) -> list[Message]:
        """Nothing is ever held back."""
        return []


class PackedMessages:
    """Several events of one stream per message: a JSON array (``codec.decode_events``).

    Faust pays a fixed cost per message (about 14k messages/s on one core);
    packing ``max_events`` events per message moves the pipeline's limit to the
    cost of the events themselves. Order within each topic is kept; an
    end-of-stream marker flushes both topics first and travels alone.

    A pack holds its events until it is full and is then written in one encoder call
    (:func:`~streameval.agents.codec.written_many`), at less than half the cost of writing
    each event as it comes. A pack whose text would pass ``max_bytes`` is cut, in order,
    into messages of at most ``max_bytes`` (an event longer than that travels alone). An
    event that JSON cannot carry raises its ``ValueError`` when its pack is written.

    >>> from streameval.pipeline.events import LabelEvent
    >>> packer = PackedMessages(2)
    >>> [[m.kind for m in packer.add(LabelEvent("s", str(i), 1.0 * i, "UP", i))] for i in range(3)]
    [[], ['labels'], []]
    >>> packer.flush()[0].value
    b'[{"stream":"s","id":"2","ts":2.0,"y":"UP","seq":2}]'
    """

    def __init__(self, max_events: int = 200, max_bytes: int = 256 * 1024) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self.max_events = max_events
        self.max_bytes = max_bytes
        # the held events of each (event class, stream), in order
        self._items: dict[tuple[type, str], list[FeatureEvent | LabelEvent]] = {}
        self._keys: dict[str, bytes] = {}  # each stream's key

    def add(self, event: InputEvent) -> list[Message]:
        slot = (event.__class__, event.stream)
        items = self._items.get(slot)
        if items is None:
            if not isinstance(event, (FeatureEvent, LabelEvent)):
                return self._end(event)
            slot = (FeatureEvent if isinstance(event, FeatureEvent) else LabelEvent, event.stream)
            items = self._items.setdefault(slot, [])
        items.append(event)  # type: ignore[arg-type]  # a feature or label event here
        return self._pack(slot) if len(items) >= self.max_events else []

    def flush(self) -> list[Message]:
        return [m for slot in list(self._items) for m in self._pack(slot)]

    def _end(self, event: InputEvent) -> list[Message]:
        """The stream's held events, then its end marker on both topics (or a TypeError)."""
        kinds, value = input_message(event)
        out = [m for slot in list(self._items) if slot[1] == event.stream for m in self._pack(slot)]
        key = self._key(event.stream)
        return [*out, *(Message(kind, key, value) for kind in kinds)]

    def _key(self, stream: str) -> bytes:
        key = self._keys.get(stream)
        if key is None:
            key = self._keys[stream] = stream.encode("utf-8")
        return key

    def _pack(self, slot: tuple[type, str]) -> list[Message]:
        """The held events of ``slot`` as one message, or several when over ``max_bytes``."""
        events = self._items.pop(slot)
        kind, key = "features" if slot[0] is FeatureEvent else "labels", self._key(slot[1])
        value = written_many(events)
        if value is not None and len(value) <= self.max_bytes:
            return [Message(kind, key, value)]
        out: list[Message] = []
        items: list[bytes] = []
        size = 1
        for event in events:  # one by one: the codec's way for what written_many refused
            item = input_message(event)[1]
            if items and size + len(item) + 1 > self.max_bytes:
                out.append(Message(kind, key, b"[" + b",".join(items) + b"]"))
                items, size = [], 1
            items.append(item)
            size += len(item) + 1
        out.append(Message(kind, key, b"[" + b",".join(items) + b"]"))
        return out


@dataclass
class ReplayStats:
    """What a replay sent."""

    n_features: int = 0
    n_labels: int = 0
    n_end: int = 0
    n_messages: int = 0
    n_bytes: int = 0
    n_delivered: int = 0
    n_failed: int = 0
    seconds: float = 0.0
    streams: set[str] = field(default_factory=set)

    @property
    def n_events(self) -> int:
        """Input events replayed (features + labels + end markers)."""
        return self.n_features + self.n_labels + self.n_end

    @property
    def rate(self) -> float:
        """Events per second."""
        return self.n_events / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary."""
        return {
            "n_events": self.n_events,
            "n_features": self.n_features,
            "n_labels": self.n_labels,
            "n_end": self.n_end,
            "n_messages": self.n_messages,
            "n_bytes": self.n_bytes,
            "n_delivered": self.n_delivered,
            "n_failed": self.n_failed,
            "seconds": round(self.seconds, 3),
            "events_per_s": round(self.rate, 1),
            "streams": sorted(self.streams),
        }


def _make_progress(progress: Any, total: int | None) -> Any:
    from streameval.pipeline.progress import Progress

    if progress is not None and not isinstance(progress, bool):
        return progress  # a counter of the caller's (``advance``, ``close``)
    enabled = sys.stderr.isatty() if progress is None else progress
    return Progress(total=total, label="events", stream=sys.stderr, enabled=enabled)


def replay_producer(settings: KafkaSettings, producer_config: dict[str, Any] | None = None) -> Any:
    """A replay's producer: :data:`PRODUCER_DEFAULTS` and ``producer_config`` over the
    connection settings, its first messages delivered at once
    (:mod:`~streameval.agents.first_delivery`)."""
    return ready_producer(
        {**settings.confluent_config(), **PRODUCER_DEFAULTS, **(producer_config or {})}
    )


def replay(
    events: Iterable[InputEvent],
    settings: KafkaSettings | str,
    topics: TopicNames | None = None,
    *,
    speed: float | None = None,
    progress: Any = None,
    total: int | None = None,
    producer_config: dict[str, Any] | None = None,
    message_format: MessageFormat | None = None,
    flush_timeout: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
    producer: Any = None,
) -> ReplayStats:
    """Produce ``events`` (in order) to the features and labels topics; return the stats.

    Parameters
    ----------
    events
        Input events in schedule order (any iterable; consumed once).
    settings
        Connection settings, or a bootstrap string for a plaintext cluster.
    topics
        Topic names; default: those of ``settings.topic_prefix`` (or the default prefix).
    speed
        ``None``: as fast as possible. ``S > 0``: ``S`` times event time
        (``S=1`` real time, ``S=60`` one event-minute per second).
    progress
        Progress bar on stderr: ``None`` = only when stderr is a terminal; or an object
        with ``advance(n)`` and ``close()`` that counts the events instead (``run``'s
        :class:`~streameval.pipeline.labels_progress.LabelProgress`).
    total
        Number of events, for the progress bar's ETA (default: ``len(events)`` if known).
    producer_config
        Extra librdkafka settings over :data:`PRODUCER_DEFAULTS`.
    message_format
        Event-to-message layout (default :class:`OneEventPerMessage`).
    flush_timeout
        Seconds to wait at the end for outstanding deliveries.
    producer
        The confluent-kafka ``Producer`` to produce with (made with at least
        :data:`PRODUCER_DEFAULTS`); default: a new one.

    Raises :class:`ReplayError` if any message was not delivered (after
    librdkafka's own retries), ``ValueError`` for an event JSON cannot carry.
    """
    from confluent_kafka import KafkaException

    if speed is not None and not speed > 0:
        raise ValueError(f"speed must be > 0 (or None for as fast as possible), got {speed}")
    if isinstance(settings, str):
        settings = KafkaSettings(bootstrap_servers=settings)
    names = topics or TopicNames.for_prefix(settings.topic_prefix)
    topic_of = {"features": names.features, "labels": names.labels}
    fmt = message_format or OneEventPerMessage()
    if total is None and hasattr(events, "__len__"):
        total = len(events)  # type: ignore[arg-type]

    if producer is None:
        producer = replay_producer(settings, producer_config)
    stats = ReplayStats()
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            stats.n_delivered += 1
            return
        stats.n_failed += 1
        if len(errors) < MAX_ERRORS_KEPT:
            errors.append(f"{msg.topic()}: {err}")

    def send(message: Message) -> None:
        topic = topic_of[message.kind]
        while True:
            try:
                producer.produce(topic, message.value, message.key, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.05)
        stats.n_messages += 1
        stats.n_bytes += len(message.value)

    bar = _make_progress(progress, total)
    start = clock()
    ts0: float | None = None
    unshown = 0  # events the bar has not been told of: it hears of them as messages go
    try:
        for event in events:
            if speed is not None:
                if ts0 is None:
                    ts0 = event.ts
                due = start + (event.ts - ts0) / speed
                if due > clock():
                    for message in fmt.flush():  # nothing waits in a pack while we sleep
                        send(message)
                    bar.advance(unshown)
                    unshown = 0
                while (wait := due - clock()) > 0:
                    producer.poll(min(wait, 0.1))
            messages = fmt.add(event)
            if isinstance(event, FeatureEvent):
                stats.n_features += 1
            elif isinstance(event, LabelEvent):
                stats.n_labels += 1
            else:
                stats.n_end += 1
            stats.streams.add(event.stream)
            unshown += 1
            if messages:
                for message in messages:
                    send(message)
                    producer.poll(0)  # delivery reports: once per message, not per event
                bar.advance(unshown)
                unshown = 0
        for message in fmt.flush():
            send(message)
        remaining = producer.flush(flush_timeout)
    except KafkaException as exc:
        raise ReplayError(f"replay aborted: {exc}", stats, errors) from exc
    except BaseException:
        producer.flush(min(flush_timeout, 5.0))  # deliver what was queued before the error
        raise
    finally:
        stats.seconds = clock() - start
        bar.advance(unshown)
        bar.close()
    if remaining:
        stats.n_failed += remaining
        errors.append(f"{remaining} messages still queued after {flush_timeout:.0f} s")
    if stats.n_failed:
        raise ReplayError(
            f"{stats.n_failed} of {stats.n_messages} messages were not delivered to "
            f"{settings.confluent_config()['bootstrap.servers']}: " + "; ".join(errors),
            stats,
            errors,
        )
    log.info("replayed %s", stats.as_dict())
    return stats
