"""Events of streams that no experiment defines yet, waiting for their definition.

A stream's events may be read before its definition (the experiments topic is read
in parallel with the input topics, and ``run`` submits and replays at once). They
are parked here, in arrival order, until the definition comes; once ``timeout``
wall seconds passed since the first of a stream, or once ``limit`` events wait in
all, they go to the deadletter topic (reason ``unknown_stream``). Their bytes
(:func:`~streameval.pipeline.memory.footprint`) are bounded too: an event that would take
its stream's parked bytes beyond ``stream_bytes``, or the worker's
:class:`~streameval.pipeline.memory.BytePool` (shared with the streams' runners) beyond
its limit, is not parked and goes to the deadletter as ``over_budget``. Parked events are in
no checkpoint, so the messages that carried them stay unacknowledged (:meth:`held`)
until they are taken or dead-lettered; every other message is acknowledged as usual, so
a trickle of events of undefined streams holds back no committed offset for longer than
the park timeout.

>>> from streameval.pipeline.events import LabelEvent
>>> parking = Parking(limit=2, timeout=60.0, stream_bytes=1000)
>>> parking.park("labels", LabelEvent("s", "1", 0.0, "a", 1), (0, 5, 0), now=0.0)
>>> kind, reason = parking.park("labels", LabelEvent("s", "2", 0.0, "b" * 600, 1), (0, 6, 0))
>>> kind, reason.split(" holds ")[1]
('over_budget', '402 bytes: 1001 more would exceed its budget of 1000')
>>> parking.sizes(), parking.nbytes, parking.expired(now=30.0), len(parking.expired(now=61.0))
({'s': 1}, 402, [], 1)
>>> bool(parking), parking.nbytes
(False, 0)
"""

from __future__ import annotations

import time
from typing import NamedTuple

from streameval.pipeline.events import InputEvent
from streameval.pipeline.memory import BytePool, budget_refusal, footprint


class Parked(NamedTuple):
    """One waiting event: its topic kind, the event, when it arrived, its source
    ``(partition, offset, index in the message)`` and its bytes."""

    kind: str
    event: InputEvent
    since: float
    position: tuple[int, int, int]
    nbytes: int = 0


class Parking:
    """Per stream, the events that wait for the stream's definition (at most ``limit``
    events, ``stream_bytes`` bytes per stream, and what ``pool`` has room for)."""

    def __init__(
        self,
        limit: int = 100_000,
        timeout: float = 60.0,
        *,
        stream_bytes: int | None = None,
        pool: BytePool | None = None,
    ) -> None:
        self.limit = limit
        self.timeout = timeout
        self.stream_bytes = stream_bytes
        self.pool = pool
        self.items: dict[str, list[Parked]] = {}
        self.bytes_of: dict[str, int] = {}
        self.n = 0
        self.nbytes = 0

    def park(
        self,
        kind: str,
        event: InputEvent,
        position: tuple[int, int, int],
        now: float | None = None,
    ) -> tuple[str, str] | None:
        """Park ``event``; else the kind and reason of its refusal (nothing parked)."""
        if self.n >= self.limit:
            full = f"{self.limit} events of undefined streams wait already"
            return "unknown_stream", f"no experiment defines stream {event.stream!r} ({full})"
        nbytes, _ = footprint(event)
        what = f"the parking of stream {event.stream!r}"
        held = self.bytes_of.get(event.stream, 0)
        refusal = budget_refusal(nbytes, held, self.stream_bytes, self.pool, what)
        if refusal is not None:
            return "over_budget", f"event of id {event.id!r} not parked: {refusal}"
        since = time.monotonic() if now is None else now
        self.items.setdefault(event.stream, []).append(Parked(kind, event, since, position, nbytes))
        self._count(event.stream, 1, nbytes)
        return None

    def _count(self, stream: str, n: int, nbytes: int) -> None:
        self.n += n
        self.nbytes += nbytes
        left = self.bytes_of.get(stream, 0) + nbytes
        if left:
            self.bytes_of[stream] = left
        else:
            self.bytes_of.pop(stream, None)
        if self.pool is not None:
            self.pool.charge(nbytes)

    def held(self) -> set[tuple[str, int, int]]:
        """``(topic kind, partition, offset)`` of every message a parked event came in."""
        return {(p.kind, p.position[0], p.position[1]) for items in self.items.values()
                for p in items}  # fmt: skip

    def take(self, stream: str) -> list[Parked]:
        """The events of ``stream`` (defined now), in arrival order; they wait no longer."""
        items = self.items.pop(stream, [])
        self._count(stream, -len(items), -self.bytes_of.get(stream, 0))
        return items

    def expired(self, now: float | None = None) -> list[tuple[str, list[Parked]]]:
        """Take every stream whose first event has waited longer than ``timeout``."""
        t = time.monotonic() if now is None else now
        late = [s for s, items in self.items.items() if items and t - items[0].since > self.timeout]
        return [(stream, self.take(stream)) for stream in late]

    def sizes(self) -> dict[str, int]:
        """Waiting events per stream."""
        return {stream: len(items) for stream, items in self.items.items()}

    def __bool__(self) -> bool:
        return self.n > 0
