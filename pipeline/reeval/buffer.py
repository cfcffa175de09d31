"""The buffer of instances waiting for their labels (Algorithm 1's buffer ``L``).

``delayed-labelling-continuous-reevaluation.txt``, sect. 4 (Algorithm 1): an
instance whose features arrive is placed in the buffer with its first
prediction; every ``K`` labelled instances that arrive after it, it is
predicted again by the latest model; when its own label arrives it leaves the
buffer with all its predictions, which are then mapped to bins (see
:mod:`streameval.pipeline.reeval.bins`).

Which instances are due
    Instance ``m`` is re-predicted when ``n - m.labels_seen`` is a positive
    multiple of ``K``, where ``n`` is the number of labels seen so far and
    ``m.labels_seen`` the number seen when ``m`` arrived. Instances are kept in
    ``K`` buckets by ``labels_seen mod K``: the instances due at ``n`` are the
    bucket ``n mod K`` less those that arrived after the ``n``-th label, so
    :meth:`PendingBuffer.due` costs the number of instances due (plus those
    added since the previous call), never a scan of the buffer.

Evolving instances
    Newer features replace the old ones for the later predictions
    (sect. 7.2); :meth:`PendingBuffer.update_features`.

Memory
    With ``cap``, adding an instance beyond ``cap`` pending ones evicts the
    oldest (the first added) and counts it. The buffer remembers the ids of the
    last ``cap`` evicted instances, so that a later label for one of them is
    told apart from a label for an id never seen (``n_evicted_labels`` versus
    ``n_unknown_labels``); a label for an instance evicted longer ago counts as
    unknown.

    The bytes of each instance's features, when :meth:`PendingBuffer.add` is given
    them (:func:`streameval.pipeline.memory.footprint`), are counted in ``nbytes``
    while it is pending: the Kafka runner's byte budget bounds them.

Feature rows
    Every pending instance's features are also a row of a
    :class:`~streameval.pipeline.reeval.rows.FeatureRows` matrix (``PendingInstance.row``),
    written once when the features arrive and overwritten by
    :meth:`PendingBuffer.update_features`; the row of a labelled or evicted
    instance is reused by a later one. :meth:`PendingBuffer.batch` hands a
    re-evaluation round the dicts together with their ready numeric view, so
    no learner converts dicts to a matrix at every round.

Compaction
    With ``compact=True`` (the default) a prediction equal to the previous one
    of the same key is not stored: the paper notes that repeated identical
    predictions collapse into one (sect. 4.1). Dropping an entry whose label
    equals the entry just before it leaves the label in force at every moment
    unchanged, hence ``d_D``, ``d_A`` and their tie rule are unchanged. Labels
    are "equal" when they have the same type and compare equal (``nan`` never
    merges). The resource indicators count predictions *made*, not stored.

Indicators (sect. 6.1)
    * ``n_predictions_held`` -- ``N_B``: re-predictions made for the instances
      still pending (first predictions excluded); one per instance and round,
      whatever the number of keys;
    * ``n_entries_held`` -- the ``(t, label)`` entries actually stored, first
      predictions and all keys included (the real memory, after compaction);
    * ``n_repredictions_total`` -- re-predictions made since the start, the
      numerator of ``N_R`` (divide by the number of labels); the length of
      each :meth:`PendingBuffer.due` answer is the ``C(i)`` summed by ``N_C``.

Bulk recording
    :meth:`PendingBuffer.record_many` records one key's predictions for a whole
    round: the last stored label of every row and key is kept as an integer
    code (``str`` and ``None`` labels), the round's labels are compared with
    them in one array operation and only the changes are appended to the
    histories -- exactly what :meth:`PendingBuffer.record` called per instance
    stores (same entries, same compaction, same errors), which it falls back
    to for any other label type.

The buffer holds only plain containers and numpy arrays and is picklable
(checkpoints).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from streameval.pipeline.reeval.history import PredictionHistory
from streameval.pipeline.reeval.rows import FeatureRows, PendingRows

#: Label types :meth:`PendingBuffer.record_many` compares as integer codes: for them
#: ``_same`` is ``==``, and a ``dict`` keyed by label tells them apart exactly.
_SIMPLE = frozenset({str, type(None)})
_NO_ENTRY = -1  # the key has no prediction for the row yet
_COMPLEX = -2  # the key's last label is not of a _SIMPLE type


@dataclass(slots=True)
class PendingInstance:
    """An instance waiting for its label.

    ``at`` is its arrival index, ``ts`` the event time its features arrived,
    ``x`` its latest features, ``labels_seen`` the number of labels seen when
    it arrived. ``history`` maps a key (a learner's name) to the predictions
    made for it, ``(t, label)`` sorted by ``t``, the first prediction first.
    ``n_repredictions`` counts the re-prediction rounds it took part in;
    ``row`` is its row in the buffer's feature matrix (``-1`` outside a buffer).

    >>> m = PendingInstance("a", at=0, ts=0.0, x={"f": 1.0}, labels_seen=0)
    >>> m.history, m.n_repredictions
    ({}, 0)
    """

    uid: Hashable
    at: int
    ts: float
    x: Any
    labels_seen: int
    history: dict[str, PredictionHistory] = field(default_factory=dict)
    n_repredictions: int = 0
    row: int = -1

    @property
    def n_entries(self) -> int:
        """The number of ``(t, label)`` entries stored, all keys together."""
        return sum(len(h) for h in self.history.values())


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and bool(a == b))


def _check_count(name: str, value: int | None, minimum: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be None or an int >= {minimum}, got {value!r}")


class PendingBuffer:
    """Instances waiting for their labels, their predictions, and which are due.

    ``k`` is ``K``, the number of labels between two re-predictions of an
    instance (``None`` disables re-evaluation: :meth:`due` is always empty);
    ``cap`` bounds the number of pending instances (``None``: unbounded).

    >>> buf = PendingBuffer(k=2)
    >>> for i in range(3):  # three instances arrive before any label
    ...     _ = buf.add(f"i{i}", at=i, ts=float(i), x={}, labels_seen=0)
    ...     _ = buf.record(f"i{i}", "nb", float(i), "UP")
    >>> buf.due(1)
    []
    >>> [m.uid for m in buf.due(2)]  # two labels since they arrived
    ['i0', 'i1', 'i2']
    >>> buf.record("i0", "nb", 5.0, "DOWN")
    True
    >>> m = buf.pop("i0")
    >>> m.history["nb"], m.n_repredictions
    ([(0.0, 'UP'), (5.0, 'DOWN')], 1)
    >>> buf.pop("i0") is None, buf.n_unknown_labels
    (True, 1)
    >>> len(buf), buf.n_predictions_held, buf.n_repredictions_total
    (2, 2, 3)
    """

    def __init__(self, k: int | None, cap: int | None = None, *, compact: bool = True) -> None:
        _check_count("k", k, 1)
        _check_count("cap", cap, 1)
        self.k = k
        self.cap = cap
        self.compact = compact
        self._pending: OrderedDict[Hashable, PendingInstance] = OrderedDict()
        self._buckets: dict[int, dict[Hashable, PendingInstance]] = {}
        self._evicted: OrderedDict[Hashable, None] = OrderedDict()
        self._last_due: int | None = None
        self.n_added = 0
        self.n_evicted = 0
        self.n_unknown_labels = 0
        self.n_evicted_labels = 0
        self.n_repredictions_total = 0
        self.n_predictions_held = 0
        self.n_entries_held = 0
        self.rows = FeatureRows()
        # per key: the code of the last stored label of every row
        self._last: dict[str, np.ndarray] = {}
        self._max_ts = -math.inf  # the latest time of any stored entry
        self._codes: dict[Hashable, int] = {}
        self._labels: list[Hashable] = []
        self._sizes: dict[Hashable, int] = {}  # the bytes given for each pending instance
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pending

    def __iter__(self) -> Iterator[PendingInstance]:
        """The pending instances, oldest first."""
        return iter(list(self._pending.values()))

    def oldest(self) -> PendingInstance | None:
        """The instance waiting longest (first added), if any; O(1)."""
        return next(iter(self._pending.values()), None)

    def add(
        self, uid: Hashable, *, at: int, ts: float, x: Any, labels_seen: int, nbytes: int = 0
    ) -> PendingInstance | None:
        """Put a newly arrived instance in the buffer; return the one evicted, if any.

        ``labels_seen`` is the number of labels seen so far; it may not be less
        than the count last given to :meth:`due` (the instance would have
        missed re-predictions). An id already pending is an error: use
        :meth:`update_features` for newer features of a pending instance.
        ``nbytes`` (the features' bytes) counts in ``nbytes`` while it is pending.
        """
        if uid in self._pending:
            raise ValueError(f"instance {uid!r} is already pending")
        if labels_seen < 0 or (self._last_due is not None and labels_seen < self._last_due):
            raise ValueError(
                f"labels_seen={labels_seen} is behind the label count {self._last_due} "
                "already given to due()"
            )
        self._evicted.pop(uid, None)
        self._shrink()
        inst = PendingInstance(uid, at, ts, x, labels_seen)
        if self.k is not None:  # rows and codes serve re-evaluation rounds only
            inst.row = self.rows.acquire(x)
            self._reset_row(inst.row)
        self._pending[uid] = inst
        self._size(uid, nbytes)
        if self.k is not None:
            self._buckets.setdefault(labels_seen % self.k, {})[uid] = inst
        self.n_added += 1
        if self.cap is None or len(self._pending) <= self.cap:
            return None
        _, oldest = self._pending.popitem(last=False)
        self._forget(oldest)
        if oldest.row >= 0:
            self.rows.release(oldest.row)
        self._evicted[oldest.uid] = None
        if len(self._evicted) > self.cap:
            self._evicted.popitem(last=False)
        self.n_evicted += 1
        return oldest

    def get(self, uid: Hashable) -> PendingInstance | None:
        """The pending instance ``uid``, or ``None``."""
        return self._pending.get(uid)

    def was_evicted(self, uid: Hashable) -> bool:
        """Whether ``uid`` was evicted (among the last ``cap`` evictions) and not seen since."""
        return uid in self._evicted

    def update_features(self, uid: Hashable, x: Any, nbytes: int = 0) -> bool:
        """Replace the features of a pending instance (sect. 7.2); ``False`` if unknown."""
        inst = self._pending.get(uid)
        if inst is None:
            return False
        self._size(uid, nbytes)
        inst.x = x
        if inst.row >= 0:
            self.rows.write(inst.row, x)
        return True

    def record(self, uid: Hashable, key: str, ts: float, y_pred: Any) -> bool:
        """Record a prediction of ``key`` for the pending instance ``uid`` made at ``ts``.

        The first call for a key is the first prediction. Returns whether an
        entry was stored (``False`` when compaction merged it into the previous
        one). Raises ``KeyError`` for an instance not pending and ``ValueError``
        for a time earlier than the key's last prediction.
        """
        inst = self._pending.get(uid)
        if inst is None:
            raise KeyError(uid)
        history = inst.history.get(key)
        if history is None:
            inst.history[key] = PredictionHistory(ts, y_pred)
            self.n_entries_held += 1
            if inst.row >= 0:
                self._remember(key, inst.row, ts, y_pred)
            return True
        last_ts, last_y = history[-1]
        if ts < last_ts:
            raise ValueError(f"prediction of {key!r} for {uid!r} at {ts} is older than {last_ts}")
        if self.compact and _same(last_y, y_pred):
            return False
        history.append((ts, y_pred))
        self.n_entries_held += 1
        if inst.row >= 0:
            self._remember(key, inst.row, ts, y_pred)
        return True

    # -- rounds in bulk ---------------------------------------------------------------------

    def batch(self, insts: Sequence[PendingInstance]) -> PendingRows:
        """The features of ``insts`` (in order) as a list that carries their numeric view.

        An instance just popped may be among them: its row is reused only by
        the next :meth:`add`.
        """
        rows = [inst.row for inst in insts]
        xs = [inst.x for inst in insts]
        if min(rows, default=0) < 0:  # a buffer without re-evaluation keeps no rows
            return PendingRows(xs, None, True)
        return self.rows.batch(xs, rows)

    def record_many(
        self,
        insts: Sequence[PendingInstance],
        key: str,
        ts: float,
        labels: Sequence[Any],
        rows: np.ndarray | None = None,
    ) -> int:
        """``record(inst.uid, key, ts, label)`` for every instance and label, in one go.

        The instances must be pending and have a first prediction of ``key``;
        ``rows``, if given, is :meth:`rows_of` of them (one array for all the
        keys of a round). Returns the number of entries stored (the changes of
        label).
        """
        n = len(insts)
        if len(labels) != n:
            raise ValueError(f"{n} instances but {len(labels)} labels")
        if not n:
            return 0
        last_code = self._last.get(key)
        if (
            last_code is None
            or insts[0].row < 0
            or ts < self._max_ts  # some entry may be later: record() tells which
            or not {label.__class__ for label in labels} <= _SIMPLE
        ):
            return self._record_each(insts, key, ts, labels)
        codes: np.ndarray | int
        if labels.count(labels[0]) == n:  # one label for all (the baselines' rounds)
            codes = self._code(labels[0])
        else:
            codes_of = self._codes
            try:
                codes = np.fromiter(map(codes_of.__getitem__, labels), dtype=np.int64, count=n)
            except KeyError:
                for label in labels:
                    self._code(label)
                codes = np.fromiter(map(codes_of.__getitem__, labels), dtype=np.int64, count=n)
        if rows is None:
            rows = self.rows_of(insts)
        before = last_code[rows]
        if before.min() < 0:
            return self._record_each(insts, key, ts, labels)
        changed = np.flatnonzero(codes != before) if self.compact else np.arange(n)
        for j in changed.tolist():  # one ``ts`` object shared by the whole round
            history = insts[j].history[key]
            history.times.append(ts)
            history.labels.append(labels[j])
        last_code[rows[changed]] = codes if isinstance(codes, int) else codes[changed]
        if len(changed):
            self._max_ts = ts
        self.n_entries_held += len(changed)
        return len(changed)

    @staticmethod
    def rows_of(insts: Sequence[PendingInstance]) -> np.ndarray:
        """The feature-matrix rows of ``insts``, as an array."""
        return np.fromiter((inst.row for inst in insts), dtype=np.intp, count=len(insts))

    def _record_each(
        self, insts: Sequence[PendingInstance], key: str, ts: float, labels: Sequence[Any]
    ) -> int:
        stored = 0
        for inst, label in zip(insts, labels, strict=True):
            if inst.uid not in self._pending or self._pending[inst.uid] is not inst:
                raise KeyError(inst.uid)
            stored += self.record(inst.uid, key, ts, label)
        return stored

    def _code(self, label: Hashable) -> int:
        """The integer code of a ``str`` or ``None`` label."""
        code = self._codes.get(label)
        if code is None:
            code = self._codes[label] = len(self._labels)
            self._labels.append(label)
        return code

    def _codes_of(self, key: str) -> np.ndarray:
        """The last-label codes of ``key``, as long as the feature matrix."""
        size = self.rows.capacity
        codes = self._last.get(key)
        if codes is None:
            codes = self._last[key] = np.full(size, _NO_ENTRY, dtype=np.int64)
        elif len(codes) < size:
            extra = np.full(size - len(codes), _NO_ENTRY, dtype=np.int64)
            codes = self._last[key] = np.concatenate([codes, extra])
        return codes

    def _remember(self, key: str, row: int, ts: float, label: Any) -> None:
        """``(ts, label)`` is now the last entry of ``key`` for ``row``."""
        self._codes_of(key)[row] = self._code(label) if label.__class__ in _SIMPLE else _COMPLEX
        if ts > self._max_ts:
            self._max_ts = ts

    def _reset_row(self, row: int) -> None:
        """A row given to a new instance: no key has predicted for it yet."""
        for key in self._last:
            self._codes_of(key)[row] = _NO_ENTRY

    def due(self, n_labels: int) -> list[PendingInstance]:
        """The instances to re-predict now that ``n_labels`` labels have been seen.

        Call once per label, after popping that label's instance, with a count
        that grows at every call; the instances are marked as re-predicted and
        returned oldest first.
        """
        if self.k is None:
            return []
        if self._last_due is not None and n_labels <= self._last_due:
            raise ValueError(f"due({n_labels}) after due({self._last_due}): counts must grow")
        self._last_due = n_labels
        bucket = self._buckets.get(n_labels % self.k)
        if not bucket:
            return []
        out = [inst for inst in bucket.values() if inst.labels_seen < n_labels]
        for inst in out:
            inst.n_repredictions += 1
        self.n_repredictions_total += len(out)
        self.n_predictions_held += len(out)
        return out

    def pop(self, uid: Hashable) -> PendingInstance | None:
        """Take out the instance whose label just arrived; ``None`` if not pending.

        A miss is counted in ``n_evicted_labels`` when ``uid`` was evicted,
        else in ``n_unknown_labels``.
        """
        self._shrink()  # before this label's instance is released: its round is still to come
        inst = self._pending.pop(uid, None)
        if inst is None:
            if uid in self._evicted:
                del self._evicted[uid]
                self.n_evicted_labels += 1
            else:
                self.n_unknown_labels += 1
            return None
        self._forget(inst)
        if inst.row >= 0:
            self.rows.release(inst.row)
        return inst

    def _shrink(self) -> None:
        """Give the memory of a drained buffer back (see :meth:`FeatureRows.shrink`).

        Once at most a quarter of the feature matrix is in use, the pending rows
        move to a smaller matrix, and the tables sized for the largest number of
        pending instances (Python dicts never shrink) are rebuilt, so that the
        memory follows the instances pending now, not the most ever pending.
        """
        moved = self.rows.shrink()
        if moved is None:
            return
        for inst in self._pending.values():
            inst.row = int(moved[inst.row])
        capacity, old = self.rows.capacity, np.flatnonzero(moved >= 0)
        for key, codes in self._last.items():
            fresh = np.full(capacity, _NO_ENTRY, dtype=np.int64)
            fresh[moved[old]] = codes[old]
            self._last[key] = fresh
        self._pending = OrderedDict(self._pending)
        self._buckets = {b: dict(insts) for b, insts in self._buckets.items() if insts}
        self._evicted = OrderedDict(self._evicted)
        self._sizes = dict(self._sizes)

    def _size(self, uid: Hashable, nbytes: int) -> None:
        """Count ``nbytes`` as the bytes of ``uid``'s features, instead of its old ones."""
        self.nbytes += nbytes - self._sizes.pop(uid, 0)
        if nbytes:
            self._sizes[uid] = nbytes

    def _forget(self, inst: PendingInstance) -> None:
        """Drop ``inst`` (already out of ``_pending``) from its bucket and the counts."""
        self._size(inst.uid, 0)
        if self.k is not None:
            bucket = self._buckets[inst.labels_seen % self.k]
            del bucket[inst.uid]
        self.n_predictions_held -= inst.n_repredictions
        self.n_entries_held -= inst.n_entries
