"""Whether a worker's outputs are being delivered: a producer's queue that stopped moving.

librdkafka reports a message it could not deliver only after ``message.timeout.ms``
(minutes), and a broker that restarted empty (its topics gone) answers every probe
meanwhile: the worker looked healthy while nothing it produced arrived.
:class:`DeliveryWatch` counts the messages produced and not yet reported, and the time
since the last delivery report that said "delivered" (or since the oldest of them was
produced): outputs that have waited longer than :data:`UNDELIVERED_SECONDS` with no
delivery at all in that time make the worker unhealthy (``/health`` 503, naming them),
and it is healthy again as soon as one is delivered (or none waits any more).
"""

from __future__ import annotations

#: Seconds produced messages may wait, with no delivery meanwhile, before ``/health`` fails.
UNDELIVERED_SECONDS = 10.0


class DeliveryWatch:
    """Produced but unreported messages, and since when none was delivered.

    >>> w = DeliveryWatch(limit=10.0)
    >>> w.produced(0.0); w.produced(1.0); w.problem(9.0) is None
    True
    >>> w.problem(12.0)
    '2 output(s) waiting undelivered for 12 s (none delivered in that time)'
    >>> w.reported(12.5, ok=True); w.problem(13.0) is None   # deliveries move again
    True
    >>> w.reported(30.0, ok=True); w.waiting, w.problem(99.0) is None
    (0, True)
    """

    def __init__(self, limit: float = UNDELIVERED_SECONDS) -> None:
        self.limit = limit
        self.waiting = 0  # produced, not yet reported
        self.since: float | None = None  # oldest wait or last delivery, whichever is later

    def produced(self, now: float) -> None:
        if self.waiting == 0:
            self.since = now
        self.waiting += 1

    def reported(self, now: float, *, ok: bool) -> None:
        """A delivery report: delivered (``ok``) or failed (counted elsewhere)."""
        self.waiting = max(0, self.waiting - 1)
        if ok:
            self.since = now
        if self.waiting == 0:
            self.since = None

    def clear(self) -> None:
        """Nothing waits (the producer says it holds no message)."""
        self.waiting, self.since = 0, None

    def stalled_for(self, now: float) -> float:
        """Seconds messages have waited with no delivery (0 when none waits)."""
        if not self.waiting or self.since is None:
            return 0.0
        return max(0.0, now - self.since)

    def problem(self, now: float) -> str | None:
        """Why outputs are not delivered, or None."""
        stalled = self.stalled_for(now)
        if stalled < self.limit:
            return None
        return (
            f"{self.waiting} output(s) waiting undelivered for {stalled:.0f} s "
            "(none delivered in that time)"
        )
