"""Sliding-window estimate of any metric: ``Rolling(metric, window)``.

Gama, Sebastiao & Rodrigues, *On evaluating stream learning algorithms*
(``prequential-error-fading-factors.txt``), sect. 3.3, Algorithm 2: the
prequential estimate over the last ``w`` observations keeps them in a circular
vector ``E`` and updates the sum as ``S <- S - E[p] + e_i``. :class:`Rolling` does
this for any metric with ``update`` and ``revert`` (River's ``utils.Rolling``
protocol): it keeps the arguments of the last ``window`` updates and, when one
more arrives, reverts the oldest.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from streameval.pipeline.metrics.base import Metric


class Rolling:
    """``metric`` over the last ``window`` updates (Algorithm 2).

    A metric that has ``replace(old, new)`` gets the eviction and the new
    observation in one call (it may net the two, see
    :class:`~streameval.pipeline.metrics.base.Sums`); others get ``revert(*old)``
    then ``update(*new)``. With ``rebuild=True`` the metric recomputes its state from
    the window once per turn (every ``window`` updates: ``metric.rebuild(items)``), so
    that the rounding residue of reverted floats does not accumulate (amortised
    ``O(1)``; a window of zero losses reads exactly 0).

    >>> from streameval.pipeline.metrics.kappa import Accuracy
    >>> acc = Rolling(Accuracy(), window=2)
    >>> for y, y_pred in [("a", "a"), ("a", "b"), ("b", "b")]:
    ...     acc.update(y, y_pred)
    >>> acc.get()  # the last two: one right of two
    0.5
    """

    def __init__(self, metric: Metric, window: int, *, rebuild: bool = False) -> None:
        if window < 1:
            raise ValueError(f"window size must be >= 1, got {window}")
        self.metric = metric
        self.window = int(window)
        self.rebuild = rebuild
        self._items: deque[tuple[Any, ...]] = deque()
        self._replace = getattr(metric, "replace", None)
        self._turn = 0  # updates since the last rebuild

    def update(self, *args: Any) -> None:
        items = self._items
        if len(items) == self.window:
            old = items[0]
            if self._replace is not None:
                self._replace(old, args)
            else:
                self.metric.revert(*old)
                self.metric.update(*args)
            items.popleft()
        else:
            self.metric.update(*args)
        items.append(args)
        if self.rebuild:
            self._turn += 1
            if self._turn == self.window:
                self._turn = 0
                self.metric.rebuild(items)  # type: ignore[attr-defined]

    def __len__(self) -> int:
        """How many updates the window holds: ``min(window, i)``."""
        return len(self._items)

    def get(self) -> Any:
        return self.metric.get()

    def __repr__(self) -> str:
        return f"Rolling({self.metric!r}, window={self.window})"
