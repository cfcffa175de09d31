"""Merging a stream's feature and label topics back into schedule order.

Kafka keeps order within a partition, not across topics: the features and the
labels of one stream arrive on two co-partitioned topics, each in its own
order, interleaved arbitrarily by the consumer. :class:`EventMerger` restores
the total order ``(ts, kind, seq)`` of :mod:`streameval.pipeline.events` with a
watermark: an event is released once the *other* topic has shown an event
that sorts after it (or has ended), so the experiment sees exactly the
sequence the in-process driver sees.

Duplicates are not its business: a message redelivered after a crash is
recognised by its Kafka position (:class:`~streameval.pipeline.runner.StreamRunner`), a
second delivery of an instance's features or label by its id
(:class:`~streameval.pipeline.ingest.IngestGuard`). Events that arrive on a topic after
its end-of-stream marker are dropped and counted.

Each event may carry its *source* (topic kind, partition, offset of the Kafka message
that carried it) through the merge: the events released by a push are usually not the
event just pushed, and whatever is later rejected must name the message that carried it.
It may also carry its estimated bytes (:func:`streameval.pipeline.memory.footprint`):
``nbytes`` is the total of the queued events, which the runner's byte budget bounds.

If one topic stays silent for a long time (a live stream whose labels come
rarely), :meth:`EventMerger.release_idle` lets the other side through:
predictions are never held back forever, at the cost of the exact order for
the events it releases (counted in ``n_idle_released``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from streameval.pipeline.events import EndOfStream, InputEvent, LabelEvent

FEATURES = "features"
LABELS = "labels"

#: Where an input event was read: (topic kind, partition, offset of its message).
Source = tuple[str, int, int]


class Queued(NamedTuple):
    """A released event, where it was read, and the bytes it was pushed with."""

    event: InputEvent
    source: Source | None
    nbytes: int


@dataclass
class _Side:
    queue: deque[InputEvent] = field(default_factory=deque)
    ended: bool = False
    end: EndOfStream | None = None
    sources: deque[Source | None] = field(default_factory=deque)  # parallel to ``queue``
    end_source: Source | None = None
    sizes: deque[int] = field(default_factory=deque)  # parallel to ``queue``


class EventMerger:
    """Watermark merge of one stream's feature and label events.

    >>> from streameval.pipeline.events import FeatureEvent, LabelEvent
    >>> m = EventMerger()
    >>> m.push(FEATURES, FeatureEvent("s", "0", 0.0, {"a": 1.0}, 0))
    True
    >>> m.ready()  # nothing from the label topic yet: features wait
    []
    >>> m.push(LABELS, LabelEvent("s", "0", 0.0, "x", 1))
    True
    >>> [e.seq for e in m.ready()]
    [0]
    >>> m.push(FEATURES, FeatureEvent("s", "1", 1.0, {"a": 2.0}, 2))
    True
    >>> [e.seq for e in m.ready()]
    [1]
    """

    def __init__(self) -> None:
        self.sides = {FEATURES: _Side(), LABELS: _Side()}
        self.n_after_end = 0
        self.n_idle_released = 0
        self.end_released = False
        self.nbytes = 0  # the bytes of the queued events, as pushed
        self.feature_ids: dict[str, int] = {}  # ids of the queued feature events: how many

    def accepts(self, topic: str) -> bool:
        """Whether an event of ``topic`` would be queued (the topic has not ended)."""
        return not self.sides[topic].ended

    def push(
        self, topic: str, event: InputEvent, source: Source | None = None, nbytes: int = 0
    ) -> bool:
        """Queue an event read from ``topic``; False if the topic had already ended."""
        side = self.sides[topic]
        if side.ended:
            self.n_after_end += 1
            return False
        if isinstance(event, EndOfStream):
            side.ended = True
            side.end = event
            side.end_source = source
        else:
            side.queue.append(event)
            side.sources.append(source)
            side.sizes.append(nbytes)
            self.nbytes += nbytes
            if topic == FEATURES:
                self.feature_ids[event.id] = self.feature_ids.get(event.id, 0) + 1
        return True

    def push_many(
        self, topic: str, events: list[InputEvent], source: Source | None, sizes: list[int]
    ) -> None:
        """:meth:`push` each of ``events`` (no end marker) read from ``source`` on a topic
        that has not ended, with their bytes ``sizes``."""
        side = self.sides[topic]
        side.queue.extend(events)
        side.sources.extend([source] * len(events))
        side.sizes.extend(sizes)
        self.nbytes += sum(sizes)
        if topic == FEATURES:
            ids = self.feature_ids
            for event in events:
                ids[event.id] = ids.get(event.id, 0) + 1  # type: ignore[union-attr]

    def drop_queued(self) -> int:
        """Empty both queues (their events will never be released); return how many."""
        n = 0
        for side in self.sides.values():
            n += len(side.queue)
            side.queue.clear()
            side.sources.clear()
            side.sizes.clear()
        self.nbytes = 0
        self.feature_ids = {}
        return n

    def _left(self, side: _Side) -> Queued:
        """Take the first event queued on ``side``."""
        event, nbytes = side.queue.popleft(), side.sizes.popleft()
        self.nbytes -= nbytes
        if side is self.sides[FEATURES]:
            left = self.feature_ids.pop(event.id) - 1  # type: ignore[union-attr]
            if left:
                self.feature_ids[event.id] = left  # type: ignore[union-attr]
        return Queued(event, side.sources.popleft(), nbytes)

    def ready(self) -> list[InputEvent]:
        """Every event that can be released now, in schedule order."""
        return [item.event for item in self.ready_items()]

    def ready_items(self) -> list[Queued]:
        """:meth:`ready`, each event with the source and bytes it was pushed with."""
        f, lab = self.sides[FEATURES], self.sides[LABELS]
        fq, lq = f.queue, lab.queue
        out: list[Queued] = []
        left = self._left
        if fq and lq:
            out = self._merge_heads(f, lab)
        if fq and lab.ended:
            out.extend([left(f) for _ in range(len(fq))])
        elif lq and f.ended:
            out.extend([left(lab) for _ in range(len(lq))])
        if f.ended and lab.ended and not f.queue and not lab.queue and not self.end_released:
            self.end_released = True
            ends = [Queued(s.end, s.end_source, 0) for s in (f, lab) if s.end is not None]
            out.append(max(ends, key=lambda e: e.event.order_key))
        return out

    def _merge_heads(self, f: _Side, lab: _Side) -> list[Queued]:
        """Release the head that sorts first by ``(ts, seq)`` (features first at a tie)
        while both sides have one (:meth:`_left`, inlined: the merge's hot loop)."""
        fq, fs, fz, lq, ls, lz = f.queue, f.sources, f.sizes, lab.queue, lab.sources, lab.sizes
        ids, new = self.feature_ids, tuple.__new__
        out: list[Queued] = []
        freed = 0
        while fq and lq:
            a, b = fq[0], lq[0]
            if a.ts < b.ts or (a.ts == b.ts and a.seq <= b.seq):
                fq.popleft()
                n = fz.popleft()
                out.append(new(Queued, (a, fs.popleft(), n)))
                left = ids.pop(a.id) - 1  # type: ignore[union-attr]
                if left:
                    ids[a.id] = left  # type: ignore[union-attr]
            else:
                lq.popleft()
                n = lz.popleft()
                out.append(new(Queued, (b, ls.popleft(), n)))
            freed += n
        self.nbytes -= freed
        return out

    def release_idle(self, topic: str) -> list[InputEvent]:
        """Release everything queued on ``topic`` although the other topic is silent."""
        return [item.event for item in self.release_idle_items(topic)]

    def release_idle_items(self, topic: str) -> list[Queued]:
        """:meth:`release_idle`, each event with its source and bytes."""
        side = self.sides[topic]
        out = [self._left(side) for _ in range(len(side.queue))]
        self.n_idle_released += len(out)
        return out

    @property
    def n_waiting(self) -> int:
        return sum(len(s.queue) for s in self.sides.values())

    def n_queued(self, topic: str) -> int:
        """Events queued on ``topic``, waiting for the other topic to pass their time."""
        return len(self.sides[topic].queue)


def topic_of(event: InputEvent) -> str:
    """The topic an input event travels on (end markers go on both)."""
    return LABELS if isinstance(event, LabelEvent) else FEATURES
