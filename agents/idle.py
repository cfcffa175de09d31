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

import logging
import time
from collections.abc import Callable, Iterator, Mapping

from streameval.pipeline.merge import FEATURES, LABELS
from streameval.pipeline.runner import StreamRunner

log = logging.getLogger(__name__)


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


class IdleRelease:
    """When a stream's queued events pass its other, silent, topic (``--idle-timeout``).

    The merger of a stream holds an input topic's events until the other topic has
    passed their time. Per stream and topic this keeps, never checkpointed, when the
    topic last brought an event of the stream (its definition or restore counts as one)
    and since which housekeeping tick the stream's events on it have been queued. At a
    tick, :meth:`due` names the queues to release: those that waited longer than
    ``timeout`` while the other topic brought nothing of the stream for as long, both
    counted only while the worker could read (:attr:`clock`).

    Silence is not a backlog: while ``unread`` names the other topic (messages on its
    partitions not yet read by this worker, e.g. its fetches stalled behind the other
    topic's on a loaded machine), that topic may still hold the stream's events and
    nothing is released.

    >>> from streameval.pipeline.config import ExperimentConfig
    >>> from streameval.pipeline.events import FeatureEvent
    >>> runner = StreamRunner(ExperimentConfig("s", ["nochange"]))
    >>> _ = runner.push("features", FeatureEvent("s", "0", 0.0, {"x": 1.0}, 0))
    >>> backlog = {LABELS}
    >>> release = IdleRelease(timeout=5.0, grace=0.0, unread=lambda: backlog)
    >>> release.clock.heard(now=0.0); release.heard_on("s", LABELS, now=0.0)
    >>> list(release.due({"s": runner}, now=1.0))  # the queue's wait starts at this tick
    []
    >>> [t for _, _, t, _ in release.due({"s": runner}, now=20.0)]  # labels not read yet
    []
    >>> backlog.clear()  # the worker caught up: the labels topic really is silent
    >>> [t for _, _, t, _ in release.due({"s": runner}, now=21.0)]
    ['features']
    """

    def __init__(
        self,
        timeout: float = 30.0,
        grace: float = 60.0,
        unread: Callable[[], set[str]] | None = None,
    ) -> None:
        self.timeout = timeout
        self.clock = IdleClock(grace=grace)
        self.unread = unread  # the input topics (kinds) with messages not yet read
        self.heard: dict[str, dict[str, float]] = {}
        self.queued_since: dict[str, dict[str, float]] = {}

    def heard_now(self, stream: str) -> None:
        """A stream was defined or restored: its silence on both topics counts from now."""
        now = time.monotonic()
        self.heard[stream] = {FEATURES: now, LABELS: now}

    def heard_on(self, stream: str, kind: str, now: float | None = None) -> None:
        """The ``kind`` topic brought an event of ``stream``."""
        self.heard.setdefault(stream, {})[kind] = time.monotonic() if now is None else now

    def due(
        self, runners: Mapping[str, StreamRunner], now: float | None = None
    ) -> Iterator[tuple[str, StreamRunner, str, float]]:
        """``(stream, runner, topic, silence of the other topic)`` of each queue to release.

        A generator: each queue is looked at after the caller released the one before.
        """
        t = time.monotonic() if now is None else now
        reading = self.clock.reading_for(t)
        backlog: set[str] | None = None  # asked once per tick, and only if a queue is due
        for stream, runner in runners.items():
            if runner.finished or runner.failed is not None or not runner.merger.n_waiting:
                self.queued_since.pop(stream, None)  # a queue that fills again starts anew
                continue
            for topic, other in ((FEATURES, LABELS), (LABELS, FEATURES)):
                waited, silent = self._wait(stream, runner, topic, other, t, reading)
                if min(waited, silent) <= self.timeout:
                    continue
                if backlog is None:
                    backlog = self.unread() if self.unread is not None else set()
                if other in backlog:
                    continue
                log.warning(
                    "stream %s: nothing of it on the %s topic for %.1f s (idle timeout %.1f s):"
                    " releasing its %d queued %s events without waiting for that topic",
                    stream,
                    other,
                    silent,
                    self.timeout,
                    runner.merger.n_queued(topic),
                    topic,
                )
                yield stream, runner, topic, silent
                self.queued_since.get(stream, {}).pop(topic, None)

    def _wait(
        self,
        stream: str,
        runner: StreamRunner,
        topic: str,
        other: str,
        now: float,
        reading: float,
    ) -> tuple[float, float]:
        """For ``stream``'s events queued on ``topic``: how long the queue has been
        waiting (since the housekeeping tick that first saw it non-empty), and how long
        ``other`` has brought nothing of the stream; both at most ``reading``
        (:meth:`IdleClock.reading_for`).

        The release needs both beyond the timeout: an event waits at most that long
        for a silent topic (a live stream whose labels come rarely still gets its
        first predictions), and never while the other topic is bringing events of the
        stream (a replay keeps its order, however busy the worker).
        """
        queued = self.queued_since.setdefault(stream, {})
        if not runner.merger.n_queued(topic):
            queued.pop(topic, None)
            return 0.0, 0.0
        since = queued.setdefault(topic, now)  # first seen queued at this tick
        last = self.heard.setdefault(stream, {}).setdefault(other, now)
        return min(now - since, reading), min(now - last, reading)
