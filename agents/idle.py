"""How long the input topics have been silent, counting only time the worker could read them.

The worker's idle release (``--idle-timeout``: one topic's queued events pass the
other, silent, topic; see :meth:`streameval.pipeline.merge.EventMerger.release_idle`) must
fire on silence of the *topics*, never on time the worker itself could not read:
while it starts and joins its consumer group, while the broker is lost, and while
it rejoins after an outage (a consumer whose session expired during the outage
waits for a rebalance before it fetches again, which took longer than 8 s on a
loaded CI machine). Released too early, the queue passes out of order and the
labels released ahead of their features are rejected as orphans.

:class:`IdleClock` therefore stops when the worker cannot read
(:meth:`~IdleClock.suspend`) and starts again at the first message that arrives
afterwards (:meth:`~IdleClock.heard`). If none ever comes, the topics really are
silent: the clock starts anyway ``grace`` seconds after it was suspended.

>>> clock = IdleClock(grace=60.0, now=0.0)  # a worker starting: not reading yet
>>> clock.silent_for(now=50.0)
0.0
>>> clock.heard(now=55.0)
>>> clock.silent_for(now=65.0)
10.0
>>> clock.suspend(now=70.0)  # broker lost; rejoining takes 20 s
>>> clock.silent_for(now=90.0)
0.0
>>> clock.heard(now=91.0)
>>> clock.silent_for(now=100.0)
9.0
>>> clock.suspend(now=200.0)  # and nothing ever comes again
>>> clock.silent_for(now=270.0)
10.0

The worker releases one stream's queue when *that stream's* other topic has been
silent (a live stream whose labels come rarely, another stream busy on the same
worker); :meth:`~IdleClock.reading_for` bounds such a silence by the time the
worker could read without a break:

>>> clock = IdleClock(grace=60.0, now=0.0)
>>> clock.heard(now=5.0)
>>> clock.reading_for(now=25.0)
20.0
>>> clock.suspend(now=30.0)  # broker lost
>>> clock.heard(now=40.0)  # back, reading again
>>> clock.reading_for(now=45.0)
5.0
"""

from __future__ import annotations

import time


class IdleClock:
    """Silence of the input topics while the worker could read them.

    Parameters
    ----------
    grace
        Seconds after :meth:`suspend` during which no message is not yet silence.
    now
        The monotonic time the clock starts at (default: now); it starts suspended,
        since a new worker has not read anything yet.
    """

    def __init__(self, grace: float = 60.0, now: float | None = None) -> None:
        self.grace = grace
        start = time.monotonic() if now is None else now
        self.last = start
        self.suspended_at: float | None = start
        self.resumed_at = start  # when the worker last started reading again

    def heard(self, now: float | None = None) -> None:
        """A message arrived: the worker reads again, and the topics were not silent."""
        self.last = time.monotonic() if now is None else now
        if self.suspended_at is not None:
            self.resumed_at = self.last
        self.suspended_at = None

    def suspend(self, now: float | None = None) -> None:
        """The worker could not read until now (broker lost, consumer rejoining)."""
        self.suspended_at = time.monotonic() if now is None else now

    def discount(self, seconds: float, now: float | None = None) -> None:
        """The worker was busy for ``seconds`` (a checkpoint) and read nothing meanwhile."""
        t = time.monotonic() if now is None else now
        self.last = min(t, self.last + seconds)
        self.resumed_at = min(t, self.resumed_at + seconds)
        if self.suspended_at is not None:
            self.suspended_at = min(t, self.suspended_at + seconds)

    def silent_for(self, now: float | None = None) -> float:
        """Seconds the topics have been silent while the worker could read them."""
        t = time.monotonic() if now is None else now
        if self.suspended_at is not None:
            return max(0.0, t - max(self.last, self.suspended_at + self.grace))
        return t - self.last

    def reading_for(self, now: float | None = None) -> float:
        """Seconds the worker has been able to read without a break: since the first
        message after a suspension (or since the grace ran out if none came)."""
        t = time.monotonic() if now is None else now
        if self.suspended_at is not None:
            return max(0.0, t - (self.suspended_at + self.grace))
        return t - self.resumed_at
