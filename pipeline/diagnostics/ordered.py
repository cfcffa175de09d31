"""Labels in instance order, whatever order they arrive in.

Under a label delay, labels may arrive out of the order of their instances (an
event-time delay that varies per instance, a Kafka partition that lags). The
temporal-dependence diagnostics are about the label *sequence* ``y_1, y_2, ...``,
so :class:`InstanceOrder` holds each label until those of every earlier instance
have come, then hands them on in order. A gap that never fills (an instance whose
label never comes) is skipped once ``max_waiting`` labels wait behind it;
:meth:`flush` hands on whatever waits at the end of the stream.

>>> seen = []
>>> order = InstanceOrder(seen.append)
>>> for at, y in [(1, "b"), (0, "a"), (3, "d")]:
...     order.push(at, y)
>>> seen
['a', 'b']
>>> order.flush(); seen
['a', 'b', 'd']
"""

from __future__ import annotations

from collections.abc import Callable, Hashable


class InstanceOrder:
    """Hand labels to ``consume`` in the order of their instances' arrival indices."""

    def __init__(self, consume: Callable[[Hashable], object], max_waiting: int = 100_000) -> None:
        self.consume = consume
        self.max_waiting = max_waiting
        self._next = 0
        self._waiting: dict[int, Hashable] = {}

    def push(self, at: int, y: Hashable) -> None:
        """The label ``y`` of the instance with arrival index ``at``."""
        self._waiting[at] = y
        if len(self._waiting) > self.max_waiting:  # a gap that never fills
            self._next = min(self._waiting)
        while self._next in self._waiting:
            self.consume(self._waiting.pop(self._next))
            self._next += 1

    def flush(self) -> None:
        """Hand on every label still waiting, in order (the stream has ended)."""
        for at in sorted(self._waiting):
            self.consume(self._waiting[at])
        self._waiting.clear()
