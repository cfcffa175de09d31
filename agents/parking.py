"""Events of streams that no experiment defines yet, waiting for their definition.

A stream's events may be read before its definition (the experiments topic is read
in parallel with the input topics, and ``run`` submits and replays at once). They
are parked here, in arrival order, until the definition comes; once ``timeout``
wall seconds passed since the first of a stream, or once ``limit`` events wait in
all, they go to the deadletter topic (reason ``unknown_stream``). Parked events are in
no checkpoint, so the messages that carried them stay unacknowledged (:meth:`held`)
until they are taken or dead-lettered; every other message is acknowledged as usual, so
a trickle of events of undefined streams holds back no committed offset for longer than
the park timeout.

>>> from streameval.pipeline.events import LabelEvent
>>> parking = Parking(limit=2, timeout=60.0)
>>> parking.park("labels", LabelEvent("s", "1", 0.0, "a", 1), (0, 5, 0), now=0.0)
True
>>> parking.sizes(), parking.expired(now=30.0), len(parking.expired(now=61.0))
({'s': 1}, [], 1)
>>> bool(parking)
False
"""

from __future__ import annotations

import time
from typing import NamedTuple

from streameval.pipeline.events import InputEvent


class Parked(NamedTuple):
    """One waiting event: its topic kind, the event, when it arrived, and its source
    ``(partition, offset, index in the message)``."""

    kind: str
    event: InputEvent
    since: float
    position: tuple[int, int, int]


class Parking:
    """Per stream, the events that wait for the stream's definition (at most ``limit``)."""

    def __init__(self, limit: int = 100_000, timeout: float = 60.0) -> None:
        self.limit = limit
        self.timeout = timeout
        self.items: dict[str, list[Parked]] = {}
        self.n = 0

    def park(
        self,
        kind: str,
        event: InputEvent,
        position: tuple[int, int, int],
        now: float | None = None,
    ) -> bool:
        """Park ``event``; False (nothing parked) when ``limit`` events wait already."""
        if self.n >= self.limit:
            return False
        since = time.monotonic() if now is None else now
        self.items.setdefault(event.stream, []).append(Parked(kind, event, since, position))
        self.n += 1
        return True

    def held(self) -> set[tuple[str, int, int]]:
        """``(topic kind, partition, offset)`` of every message a parked event came in."""
        return {(p.kind, p.position[0], p.position[1]) for items in self.items.values()
                for p in items}  # fmt: skip

    def take(self, stream: str) -> list[Parked]:
        """The events of ``stream`` (defined now), in arrival order; they wait no longer."""
        items = self.items.pop(stream, [])
        self.n -= len(items)
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
