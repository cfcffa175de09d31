"""The features of the pending instances as rows of one preallocated matrix.

Continuous re-evaluation (``delayed-labelling-continuous-reevaluation.txt``,
Algorithm 1) predicts every pending instance again every ``K`` labels. The
batched learners (:mod:`streameval.pipeline.learners.tree_batch`,
:mod:`streameval.pipeline.learners.naive_bayes`)
work on a :class:`~streameval.pipeline.learners.frame.NumericFrame`: a float matrix and a
presence mask. Building that frame from the feature dicts of ~``delay / K``
instances for every learner at every label was the largest cost of
re-evaluation; :class:`FeatureRows` builds each instance's row **once**, when
its features arrive, and a re-evaluation round only gathers the rows it needs
(:meth:`FeatureRows.frame`).

Rows
    :meth:`FeatureRows.acquire` gives a new instance a row (a free one first:
    rows of labelled or evicted instances are reused, so the matrix has as many
    rows as instances were ever pending at once); :meth:`FeatureRows.write`
    overwrites a row (an evolving instance, sect. 7.2, gets its newest
    features); :meth:`FeatureRows.release` frees it. A released row keeps its
    values until it is acquired again, so an instance just popped from the
    buffer can still be predicted in the round of its own label.

Columns
    One column per feature that has held a number (``int``, ``float``,
    ``bool``, numpy numbers), in order of first appearance in the stream. The
    rules are those of :func:`streameval.pipeline.learners.river_adapter.clean` followed
    by :class:`~streameval.pipeline.learners.frame.NumericFrame`: a numeric value that is
    NaN or infinite, and ``None``, is *missing* (not present); a ``str`` value
    is kept beside the row as ``(feature, value)``; any other value, and an integer
    beyond ``2**53`` (a float may round it), makes the row *odd*, and a round with an odd
    row is left to the dict code.

So ``frame(rows)`` holds, for every row, exactly the numbers and strings that
``NumericFrame([clean(x) for x in xs])`` holds; only the column order and the
columns no row of the round uses (never present) may differ, and batch code
looks features up by name and masks with ``present``.
"""

from __future__ import annotations

import math
import numbers
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from streameval.pipeline.learners.frame import NumericFrame, RowKey, is_number_type

#: Rows of a new store; the matrix doubles when full.
INITIAL_ROWS = 64

#: Integers beyond this are not all exact as floats: a row holding one is odd.
EXACT_INT = 2**53


def _missing_other(value: Any) -> bool:
    """``clean``'s rule for a value that is neither a usual number nor a ``str``."""
    if value is None:
        return True
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and not math.isfinite(value)
    )


class PendingRows(list):  # type: ignore[type-arg]
    """A batch of feature dicts that carries its ready-made numeric view.

    A plain ``list`` of the instances for every learner; batch-aware learners
    read ``frame`` (``NumericFrame`` of the cleaned instances, ``None`` when
    the dict code must decide) and ``needs_clean`` (whether some instance has a
    missing value that :func:`~streameval.pipeline.learners.river_adapter.clean` would
    drop) and ``key`` (the rows and their content stamps, under which
    learners may keep per-row results). A slice or a copy is a plain list,
    without the view.
    """

    frame: NumericFrame | None
    needs_clean: bool
    key: RowKey | None

    def __init__(
        self,
        xs: Sequence[Any],
        frame: NumericFrame | None,
        needs_clean: bool,
        key: RowKey | None = None,
    ) -> None:
        super().__init__(xs)
        self.frame = frame
        self.needs_clean = needs_clean
        self.key = key


class FeatureRows:
    """Feature dicts stored as rows of a float matrix, with row reuse.

    >>> rows = FeatureRows()
    >>> a = rows.acquire({"x": 1.0, "y": float("nan"), "c": "CO"})
    >>> b = rows.acquire({"y": 2, "z": None})
    >>> frame = rows.frame([a, b])
    >>> frame.index, frame.values.tolist(), frame.present.tolist()
    ({'x': 0, 'y': 1}, [[1.0, 0.0], [0.0, 2.0]], [[True, False], [False, True]])
    >>> frame.strings, frame.text, rows.needs_clean([a]), rows.needs_clean([b])
    ([[('c', 'CO')], []], {'c'}, True, True)
    >>> rows.release(a); rows.acquire({"x": 5.0}) == a  # a freed row is reused
    True
    """

    def __init__(self, capacity: int = INITIAL_ROWS) -> None:
        capacity = max(1, capacity)
        self.index: dict[str, int] = {}
        self.values = np.zeros((capacity, 0))
        self.present = np.zeros((capacity, 0), dtype=bool)
        # per column: some value other than 0 and 1 was written (a 0/1 indicator has not)
        self.nonbinary = np.zeros(0, dtype=bool)
        self.n_binary = 0  # columns still 0/1 only
        # the frames' column index and 0/1 flags: the same objects until a column is added
        # or loses its 0/1 flag (learners keep per-layout plans by identity)
        self._layout_view: tuple[dict[str, int], np.ndarray] | None = None
        self.odd = np.zeros(capacity, dtype=bool)
        self.dirty = np.zeros(capacity, dtype=bool)  # some value is missing (clean drops it)
        self.stamps = np.zeros(capacity, dtype=np.int64)  # a new one at every write of the row
        self._stamp = 0
        self.uid = uuid.uuid4().int & (2**62 - 1)  # tells learners' per-row caches apart
        self.strings: list[list[tuple[str, str]]] = [[] for _ in range(capacity)]
        self.n_text_rows = 0  # rows in use or free whose strings list is not empty
        self._free: list[int] = []
        self.n_used = 0  # rows ever handed out (the high-water mark)
        self.n_live = 0
        # the last key layout written: (keys, columns as an array) for the all-numbers path
        self._layout: tuple[tuple[str, ...], np.ndarray] | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "nonbinary" not in state:  # pickled before 0/1 columns were tracked: none is known
            self.nonbinary = np.ones(self.values.shape[1], dtype=bool)
            self.n_binary = 0
        self._layout_view = None

    @property
    def capacity(self) -> int:
        return int(self.values.shape[0])

    def __len__(self) -> int:
        """Rows in use."""
        return self.n_live

    # -- rows -------------------------------------------------------------------------------

    def acquire(self, x: Any) -> int:
        """A row for a new instance, filled with ``x``."""
        if self._free:
            row = self._free.pop()
        else:
            row = self.n_used
            if row == self.capacity:
                self._grow_rows(2 * self.capacity)
            self.n_used += 1
        self.n_live += 1
        self.write(row, x)
        return row

    def release(self, row: int) -> None:
        """Free ``row`` for a later instance (its values stay until then)."""
        self._free.append(row)
        self.n_live -= 1

    def write(self, row: int, x: Any) -> None:
        """(Over)write ``row`` with the features ``x``."""
        self._stamp += 1
        self.stamps[row] = self._stamp
        values, present = self.values, self.present
        present[row] = False
        if self.strings[row]:
            self.strings[row] = []
            self.n_text_rows -= 1
        self.odd[row] = False
        self.dirty[row] = False
        if not isinstance(x, Mapping):
            self.odd[row] = True
            return
        if self._write_numbers(row, x):
            return
        strings: list[tuple[str, str]] = []
        odd = dirty = False
        for key, value in x.items():
            kind = value.__class__
            if kind is str:
                strings.append((key, value))
            elif is_number_type(kind):
                if not issubclass(kind, (float, np.floating, bool)) and abs(value) > EXACT_INT:
                    odd = True  # an integer a float may round: leave it to the dicts
                    continue
                try:
                    number = float(value)
                except OverflowError:  # NumericFrame would fail on it: leave it to the dicts
                    odd = True
                    continue
                if number - number != 0.0:  # NaN or infinite: missing
                    dirty = True
                    continue
                col = self.index.get(key)
                if col is None:
                    col = self._add_column(key)
                    values, present = self.values, self.present
                values[row, col] = number
                present[row, col] = True
                if number != 0.0 and number != 1.0 and not self.nonbinary[col]:
                    self.nonbinary[col] = True
                    self.n_binary -= 1
                    self._layout_view = None
            elif _missing_other(value):
                dirty = True
            else:
                odd = True
        if strings:
            self.strings[row] = strings
            self.n_text_rows += 1
        self.odd[row] = odd
        self.dirty[row] = dirty

    def _write_numbers(self, row: int, x: Mapping[str, Any]) -> bool:
        """The common case in one numpy assignment: the keys of the last such
        instance, every value a ``float`` or an ``int``; ``False`` otherwise."""
        keys = tuple(x)
        layout = self._layout
        if layout is None or layout[0] != keys:
            if not all(k in self.index for k in keys):
                self._layout = None
                return False
            layout = self._layout = (keys, np.array([self.index[k] for k in keys], dtype=np.intp))
        vals = list(x.values())
        kinds = {v.__class__ for v in vals}
        if not kinds <= {float, int}:
            return False
        if int in kinds and any(v.__class__ is int and abs(v) > EXACT_INT for v in vals):
            return False
        try:
            numbers_ = np.array(vals, dtype=float)
        except OverflowError:
            return False
        finite = np.isfinite(numbers_)
        cols = layout[1]
        if finite.all():
            self.values[row, cols] = numbers_
            self.present[row, cols] = True
        else:
            numbers_ = np.where(finite, numbers_, 0.0)
            self.values[row, cols] = numbers_
            self.present[row, cols] = finite
            self.dirty[row] = True
        if self.n_binary:
            other = (numbers_ != 0.0) & (numbers_ != 1.0)
            other &= ~self.nonbinary[cols]
            if other.any():  # columns that were 0/1 until now
                self.nonbinary[cols[other]] = True
                self.n_binary = len(self.index) - int(self.nonbinary[: len(self.index)].sum())
                self._layout_view = None
        return True

    # -- growth -----------------------------------------------------------------------------

    def _grow_rows(self, capacity: int) -> None:
        extra = capacity - self.capacity
        width = self.values.shape[1]
        self.values = np.concatenate([self.values, np.zeros((extra, width))])
        self.present = np.concatenate([self.present, np.zeros((extra, width), dtype=bool)])
        self.odd = np.concatenate([self.odd, np.zeros(extra, dtype=bool)])
        self.dirty = np.concatenate([self.dirty, np.zeros(extra, dtype=bool)])
        self.stamps = np.concatenate([self.stamps, np.zeros(extra, dtype=np.int64)])
        self.strings.extend([] for _ in range(extra))

    def shrink(self) -> np.ndarray | None:
        """Give memory back once at most a quarter of the rows are in use.

        Moves the rows in use to the front of a matrix half as large (at least
        :data:`INITIAL_ROWS` rows) and returns where each old row went (``-1``
        for a free one), or ``None`` when nothing was done. Every row's values
        move with it (a free row's are dropped: call this only when no instance
        just released will be predicted again). Learners' per-row caches are
        keyed by :attr:`uid`, which changes.

        >>> rows = FeatureRows(capacity=256)
        >>> ids = [rows.acquire({"x": float(i)}) for i in range(100)]
        >>> for r in ids[:90]:
        ...     rows.release(r)
        >>> moved = rows.shrink()
        >>> rows.capacity, len(rows), int(moved[ids[95]]), float(rows.values[moved[ids[95]], 0])
        (64, 10, 5, 95.0)
        """
        capacity = self.capacity
        if capacity <= INITIAL_ROWS or 4 * self.n_live > capacity:
            return None
        new_capacity = max(INITIAL_ROWS, capacity // 2)
        while new_capacity > INITIAL_ROWS and 4 * self.n_live <= new_capacity // 2:
            new_capacity //= 2
        live = np.ones(self.n_used, dtype=bool)
        live[self._free] = False
        old = np.flatnonzero(live)
        moved = np.full(capacity, -1, dtype=np.intp)
        moved[old] = np.arange(len(old))
        n, width = len(old), self.values.shape[1]

        def take(column: np.ndarray) -> np.ndarray:
            out = np.zeros((new_capacity, *column.shape[1:]), dtype=column.dtype)
            out[:n] = column[old]
            return out

        self.values, self.present = take(self.values), take(self.present)
        self.odd, self.dirty, self.stamps = take(self.odd), take(self.dirty), take(self.stamps)
        strings = [self.strings[r] for r in old.tolist()]
        self.strings = strings + [[] for _ in range(new_capacity - n)]
        self.n_text_rows = sum(1 for pairs in strings if pairs)
        self._free = []
        self.n_used = self.n_live = n
        self.uid = uuid.uuid4().int & (2**62 - 1)
        assert self.values.shape == (new_capacity, width)
        return moved

    def _add_column(self, key: str) -> int:
        col = len(self.index)
        self.index[key] = col
        if col == self.values.shape[1]:
            extra = max(8, col)
            n = self.capacity
            self.values = np.concatenate([self.values, np.zeros((n, extra))], axis=1)
            self.present = np.concatenate([self.present, np.zeros((n, extra), dtype=bool)], axis=1)
            self.nonbinary = np.concatenate([self.nonbinary, np.zeros(extra, dtype=bool)])
        self.n_binary += 1
        self._layout_view = None
        return col

    # -- batches ----------------------------------------------------------------------------

    def needs_clean(self, rows: Sequence[int] | np.ndarray) -> bool:
        """Whether some of ``rows`` has a missing value (``clean`` would copy its dict)."""
        return bool(self.dirty[rows].any())

    def frame(self, rows: Sequence[int] | np.ndarray) -> NumericFrame | None:
        """The :class:`NumericFrame` of the cleaned instances in ``rows``
        (in that order); ``None`` when one of them is odd."""
        rows = np.asarray(rows, dtype=np.intp)
        if self.odd[rows].any():
            return None
        width = len(self.index)
        strings: list[list[tuple[str, str]]]
        if self.n_text_rows:
            strings = [self.strings[r] for r in rows.tolist()]
            text = {key for pairs in strings for key, _ in pairs}
        else:
            strings = [[] for _ in range(len(rows))]
            text = set()
        if self._layout_view is None:
            self._layout_view = (dict(self.index), ~self.nonbinary[:width])
        index, binary = self._layout_view
        return NumericFrame.from_arrays(
            index=index,
            values=self.values[rows, :width],
            present=self.present[rows, :width],
            text=text,
            strings=strings,
            binary=binary,
            exact=True,  # rows with an integer a float would round are odd
        )

    def batch(self, xs: Sequence[Any], rows: Sequence[int] | np.ndarray) -> PendingRows:
        """``xs`` (the dicts of ``rows``, in order) with their numeric view."""
        rows = np.asarray(rows, dtype=np.intp)
        key = RowKey(self.uid, rows, self.stamps[rows])
        return PendingRows(xs, self.frame(rows), self.needs_clean(rows), key)
