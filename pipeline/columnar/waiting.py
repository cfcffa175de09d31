"""The instances waiting for their labels, when nothing re-predicts them.

Without continuous re-evaluation a pending instance only has to be found again when
its label comes: :class:`Waiting` keeps, by instance id, one small record per
instance (what the columnar experiment stores at its arrival) with the rules of the
per-event :class:`~streameval.pipeline.reeval.buffer.PendingBuffer` that still apply:

* with ``cap``, an instance added beyond ``cap`` pending ones evicts the oldest; the
  ids of the last ``cap`` evicted are remembered, so a late label for one of them is
  told apart from a label for an id never seen (``n_evicted_labels`` versus
  ``n_unknown_labels``);
* the bytes of each instance's features, when given, count in ``nbytes`` while it is
  pending (the Kafka runner's byte budget).

It answers what the reports read of a pending buffer (its length, the resource
indicators of re-evaluation, all 0 here). A driver that keeps the pending instances
itself (the label-schedule arrays) says how many there are in ``untracked``.

>>> w = Waiting(cap=2)
>>> for uid in "abc":
...     _ = w.add(uid, [uid], nbytes=10)
>>> len(w), w.nbytes, w.was_evicted("a"), w.n_evicted
(2, 20, True, 1)
>>> w.pop("a"), w.n_evicted_labels, w.pop("z"), w.n_unknown_labels
(None, 1, None, 1)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class Waiting:
    """Records of pending instances by id (see the module docstring).

    ``pending`` (id -> record, oldest first) and ``evicted`` (ids) may be read directly.
    """

    n_repredictions_total = 0  # re-evaluation's indicators (sect. 6.1): none here
    n_predictions_held = 0
    n_entries_held = 0

    def __init__(self, cap: int | None = None) -> None:
        if cap is not None and cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.cap = cap
        self.pending: dict[Hashable, Any] = {}
        self.evicted: OrderedDict[Hashable, None] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self.nbytes = 0
        self.n_evicted = 0
        self.n_evicted_labels = 0
        self.n_unknown_labels = 0
        self.untracked = 0

    def __len__(self) -> int:
        return len(self.pending) + self.untracked

    def __contains__(self, uid: object) -> bool:
        return uid in self.pending

    def get(self, uid: Hashable) -> Any:
        """The record of pending ``uid``, or ``None``."""
        return self.pending.get(uid)

    def oldest(self) -> Any:
        """The record of the instance waiting longest (first added), or ``None``."""
        return next(iter(self.pending.values()), None)

    def was_evicted(self, uid: Hashable) -> bool:
        return uid in self.evicted

    def add(self, uid: Hashable, record: Any, nbytes: int = 0) -> Any:
        """Keep ``record`` for newly arrived ``uid``; return the evicted record, if any."""
        if uid in self.pending:
            raise ValueError(f"instance {uid!r} is already pending")
        if self.evicted:
            self.evicted.pop(uid, None)
        self.pending[uid] = record
        if nbytes:
            self._size(uid, nbytes)
        if self.cap is None or len(self.pending) <= self.cap:
            return None
        oldest = next(iter(self.pending))
        evicted = self.pending.pop(oldest)
        self._size(oldest, 0)
        self.evicted[oldest] = None
        if len(self.evicted) > self.cap:
            self.evicted.popitem(last=False)
        self.n_evicted += 1
        return evicted

    def replace(self, uid: Hashable, nbytes: int = 0) -> None:
        """Count ``nbytes`` for pending ``uid``'s newer features (its record is updated by
        the caller)."""
        self._size(uid, nbytes)

    def pop(self, uid: Hashable) -> Any:
        """Take out ``uid``'s record now that its label came; ``None`` if not pending."""
        record = self.pending.pop(uid, None)
        if record is None:
            if uid in self.evicted:
                del self.evicted[uid]
                self.n_evicted_labels += 1
            else:
                self.n_unknown_labels += 1
            return None
        if self._sizes:
            self._size(uid, 0)
        return record

    def _size(self, uid: Hashable, nbytes: int) -> None:
        """Count ``nbytes`` as the bytes of ``uid``'s features, instead of its old ones."""
        self.nbytes += nbytes - self._sizes.pop(uid, 0)
        if nbytes:
            self._sizes[uid] = nbytes
