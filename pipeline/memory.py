"""What input events cost in memory, and the byte budgets that bound what is held.

A worker holds input events in several places: the parking (events of streams not
defined yet), the merge queues (:mod:`streameval.pipeline.merge`), the orphan labels
(:mod:`streameval.pipeline.ingest`) and the pending buffer (the features of instances
waiting for their labels). Counting events bounds none of them: one message may carry a
string of almost a MiB. They are bounded in bytes instead, per stream and per worker.

:func:`footprint` estimates an event's bytes once, when it enters: a fixed cost per
event (:data:`EVENT_BYTES`: the event object, its feature dict, its id and bookkeeping),
a fixed cost per feature (:data:`VALUE_BYTES`: a dict slot, the key, a number object),
and the length of every string (feature values, the label, the id). It is a sum over
the features, with no recursive ``sys.getsizeof`` walk, and meant as an upper bound of
what the event really holds (``tests/test_memory.py`` checks it against ``tracemalloc``
within a factor of 3). Strings count one byte per character: a string of non-ASCII
characters holds up to 4 per character, which a budget of the same MiB then admits.

:class:`BytePool` is the worker's budget, shared by every stream and the parking: each
holder charges what it adds and gives back what it lets go, so that ``held`` is the
worker's total at O(1) per event.

>>> from streameval.pipeline.events import FeatureEvent
>>> nbytes, longest = footprint(FeatureEvent("s", "7", 0.0, {"a": 1.0, "b": "x" * 1000}))
>>> nbytes == EVENT_BYTES + 1 + 2 * VALUE_BYTES + 1000, longest
(True, 1000)
>>> pool = BytePool(limit=2000)
>>> pool.refusal(nbytes) is None, pool.charge(nbytes), pool.refusal(nbytes)
(True, None, 'the worker holds 1601 bytes: 1601 more would exceed its budget of 2000')
"""

from __future__ import annotations

from streameval.pipeline.events import FeatureEvent, InputEvent, LabelEvent

#: Fixed bytes of an input event: the object, its feature dict, its id string, the queue
#: slot it waits in (the dict's own table is counted per feature).
EVENT_BYTES = 400
#: Fixed bytes of one feature: the dict slot, the key string, a number object.
VALUE_BYTES = 100
#: Default per-worker budget: every stream and the parking together.
WORKER_BYTES = 512 << 20
#: Default per-stream budget: its parked, queued, orphan and pending events.
STREAM_BYTES = 128 << 20
#: Default longest string value (feature value or label), in characters.
MAX_STRING = 64 << 10


def footprint(event: InputEvent) -> tuple[int, int]:
    """The estimated bytes ``event`` holds, and the length of its longest string value."""
    cls = event.__class__
    if cls is LabelEvent and event.y.__class__ is str:  # type: ignore[union-attr]
        longest = len(event.y)  # type: ignore[union-attr,arg-type]
        return EVENT_BYTES + len(event.id) + longest, longest  # type: ignore[union-attr]
    nbytes = EVENT_BYTES + len(getattr(event, "id", ""))
    longest = 0
    if cls is FeatureEvent or isinstance(event, FeatureEvent):
        x = event.x  # type: ignore[union-attr]
        nbytes += VALUE_BYTES * len(x)
        for value in x.values():
            if value.__class__ is str:
                n = len(value)  # type: ignore[arg-type]
                nbytes += n
                if n > longest:
                    longest = n
    elif isinstance(event, LabelEvent) and isinstance(event.y, str):
        longest = len(event.y)
        nbytes += longest
    return nbytes, longest


class BytePool:
    """Bytes held against a limit (``None``: no limit, only the count).

    The holders charge (and give back, with a negative charge) every change of what they
    hold, so ``held`` is their total at any moment.
    """

    def __init__(self, limit: int | None = None, *, name: str = "the worker") -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"a byte budget must be >= 0, got {limit}")
        self.limit = limit
        self.name = name
        self.held = 0
        self.peak = 0

    def refusal(self, nbytes: int) -> str | None:
        """Why ``nbytes`` more do not fit, or ``None`` when they do."""
        if self.limit is None or self.held + nbytes <= self.limit:
            return None
        return (
            f"{self.name} holds {self.held} bytes: {nbytes} more would exceed its budget "
            f"of {self.limit}"
        )

    def charge(self, delta: int) -> None:
        """Count ``delta`` more bytes held (negative: given back)."""
        self.held += delta
        if self.held > self.peak:
            self.peak = self.held


def budget_refusal(
    nbytes: int, held: int, limit: int | None, pool: BytePool | None, what: str
) -> str | None:
    """Why ``nbytes`` more do not fit in ``what`` (holding ``held`` of ``limit``) or in
    ``pool``; ``None`` when they fit both."""
    if limit is not None and held + nbytes > limit:
        return f"{what} holds {held} bytes: {nbytes} more would exceed its budget of {limit}"
    return None if pool is None else pool.refusal(nbytes)
