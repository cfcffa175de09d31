"""The numeric view of a batch of feature dicts, as batched learners read it.

:class:`NumericFrame` holds the numeric features of a batch of instances as a float
matrix and a mask of the values present, with each instance's ``str`` values beside
them; instances with the same keys and value types (a stream has few such shapes) are
copied in one block. :class:`LazyFrame` makes the frame of a batch on first use,
:class:`RowKey` says where a batch's instances live in a pending buffer's feature
matrix, and :func:`scratch` hands batch code large temporaries kept per thread.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

#: Value types read as numbers into a :class:`NumericFrame`.
_NUMBER_TYPES = (float, int, bool, np.floating, np.integer)


def is_number_type(kind: type) -> bool:
    """Whether values of type ``kind`` go into the numeric matrix.

    >>> is_number_type(float), is_number_type(bool), is_number_type(str)
    (True, True, False)
    """
    return kind is not np.bool_ and issubclass(kind, _NUMBER_TYPES)


@dataclass(frozen=True, eq=False)
class _Shape:
    """Where the numbers and the strings are in instances with given keys and value types."""

    numeric_keys: tuple[str, ...]
    getter: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None
    text_keys: tuple[str, ...]
    text_getter: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None
    odd: bool


@dataclass
class _Layout:
    """The instances of one batch that have one shape, in one block."""

    shape: _Shape
    columns: list[int]
    rows: list[int] = field(default_factory=list)
    values: list[tuple[Any, ...]] = field(default_factory=list)


def _getter(positions: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """``vals -> tuple(vals[p] for p in positions)``, fast."""
    if len(positions) == 1:
        (only,) = positions
        return lambda vals: (vals[only],)
    if not positions:
        return lambda vals: ()
    return operator.itemgetter(*positions)  # type: ignore[return-value]


#: Shapes seen lately, by ``(keys, value types)``: a stream has few of them.
_SHAPES: dict[tuple[tuple[str, ...], tuple[type, ...]], _Shape] = {}
_MAX_SHAPES = 1024


def _shape(keys: tuple[str, ...], kinds: tuple[type, ...]) -> _Shape:
    """The shape of instances with these keys and value types (remembered)."""
    shape = _SHAPES.get((keys, kinds))
    if shape is not None:
        return shape
    numeric: list[int] = []
    text: list[int] = []
    odd = False
    for pos, kind in enumerate(kinds):
        if is_number_type(kind):
            numeric.append(pos)
        elif kind is str:
            text.append(pos)
        else:
            odd = True
    shape = _Shape(
        numeric_keys=tuple(keys[p] for p in numeric),
        getter=None if len(numeric) == len(keys) else _getter(numeric),
        text_keys=tuple(keys[p] for p in text),
        text_getter=_getter(text) if text else None,
        odd=odd,
    )
    if len(_SHAPES) >= _MAX_SHAPES:
        _SHAPES.clear()
    _SHAPES[(keys, kinds)] = shape
    return shape


class NumericFrame:
    """The numeric features of a batch of instances as arrays.

    Attributes
    ----------
    index
        Column of each feature that holds a number in some instance, in order
        of first appearance.
    values
        ``(n, F)`` float matrix; 0 where the instance has no number.
    present
        ``(n, F)`` bool matrix: the instance has this feature, as a number.
    text
        Features that hold a ``str`` in some instance.
    strings
        The ``(feature, value)`` pairs of each instance whose value is a
        ``str``, in the instance's order.
    odd
        Whether some value is neither a number of a usual type nor a ``str``
        (``None``, a list, a ``Decimal``...): batch code should not guess.
    binary
        ``None``, or per column whether every value it holds is 0 or 1 (known to the
        maker of the frame, e.g. :class:`streameval.pipeline.reeval.rows.FeatureRows`).
    exact
        Whether every value is known to be exactly the number of its instance (no
        integer beyond ``2**53``, which a float may round): set by the maker of the
        frame; ``False`` means batch code checks.

    >>> frame = NumericFrame([{"a": 1.0, "b": "x"}, {"b": "y", "c": 2}])
    >>> frame.index, frame.values.tolist(), frame.present.tolist(), frame.text, frame.odd
    ({'a': 0, 'c': 1}, [[1.0, 0.0], [0.0, 2.0]], [[True, False], [False, True]], {'b'}, False)
    >>> frame.strings
    [[('b', 'x')], [('b', 'y')]]
    """

    def __init__(self, xs: Sequence[dict[str, Any]]) -> None:
        self.index: dict[str, int] = {}
        self.text: set[str] = set()
        self.odd = False
        self.binary: np.ndarray | None = None
        self.exact = False
        self.strings: list[list[tuple[str, str]]] = [[] for _ in xs]
        layouts: dict[_Shape, _Layout] = {}
        last_keys: tuple[str, ...] | None = None
        last_kinds: tuple[type, ...] | None = None
        layout: _Layout | None = None
        for i, x in enumerate(xs):
            keys = tuple(x)
            vals = tuple(x.values())
            kinds = tuple(map(type, vals))
            if layout is None or keys != last_keys or kinds != last_kinds:
                shape = _shape(keys, kinds)
                layout = layouts.get(shape)
                if layout is None:
                    layout = layouts[shape] = self._layout(shape)
                last_keys, last_kinds = keys, kinds
            shape = layout.shape
            layout.rows.append(i)
            layout.values.append(vals if shape.getter is None else shape.getter(vals))
            if shape.text_getter is not None:
                self.strings[i] = list(zip(shape.text_keys, shape.text_getter(vals), strict=True))
        n, width = len(xs), len(self.index)
        self.values = np.zeros((n, width))
        self.present = np.zeros((n, width), dtype=bool)
        for layout in layouts.values():
            if not layout.columns:
                continue
            block = np.asarray(layout.values, dtype=float)
            if len(layout.rows) == n and layout.columns == list(range(width)):
                self.values = block
                self.present[:] = True
                continue
            rows = np.asarray(layout.rows)[:, None]
            cols = np.asarray(layout.columns)[None, :]
            self.values[rows, cols] = block
            self.present[rows, cols] = True

    @classmethod
    def from_arrays(
        cls,
        *,
        index: dict[str, int],
        values: np.ndarray,
        present: np.ndarray,
        text: set[str],
        strings: list[list[tuple[str, str]]],
        odd: bool = False,
        binary: np.ndarray | None = None,
        exact: bool = False,
    ) -> NumericFrame:
        """A frame made elsewhere (``values[r, index[f]]`` valid where ``present``),
        e.g. by :class:`streameval.pipeline.reeval.rows.FeatureRows`, which keeps the
        pending instances' rows between re-evaluation rounds.

        >>> frame = NumericFrame.from_arrays(index={"a": 0}, values=np.ones((1, 1)),
        ...     present=np.ones((1, 1), dtype=bool), text=set(), strings=[[]])
        >>> frame.values.tolist(), frame.odd
        ([[1.0]], False)
        """
        frame = cls.__new__(cls)
        frame.index = index
        frame.values = values
        frame.present = present
        frame.text = text
        frame.strings = strings
        frame.odd = odd
        frame.binary = binary
        frame.exact = exact
        return frame

    def _layout(self, shape: _Shape) -> _Layout:
        self.odd = self.odd or shape.odd
        self.text.update(shape.text_keys)
        index = self.index
        if not index:
            index.update(zip(shape.numeric_keys, range(len(shape.numeric_keys)), strict=True))
            return _Layout(shape, list(range(len(shape.numeric_keys))))
        return _Layout(shape, [index.setdefault(k, len(index)) for k in shape.numeric_keys])


class RowKey(NamedTuple):
    """Where the instances of a batch live in a pending buffer's feature matrix
    (:class:`streameval.pipeline.reeval.rows.FeatureRows`): the matrix's ``source`` id,
    each instance's ``rows`` and the ``stamps`` of their contents (a row gets
    a new stamp whenever it is written). Batch code may keep per-row results
    under it."""

    source: int
    rows: np.ndarray
    stamps: np.ndarray


_scratch = threading.local()


def scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised float array of ``shape`` from a buffer kept per thread
    and ``name``: large temporaries are not allocated (and page-faulted) anew
    on every call. The array is only valid until the next call with ``name``.
    """
    size = math.prod(shape)
    buffers: dict[str, np.ndarray] = _scratch.__dict__.setdefault("buffers", {})
    buffer = buffers.get(name)
    if buffer is None or buffer.size < size:
        buffer = buffers[name] = np.empty(max(size, 1024))
    return buffer[:size].reshape(shape)


class LazyFrame:
    """The :class:`NumericFrame` of a batch, made on first use."""

    def __init__(self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None = None) -> None:
        self._xs = xs
        self._frame = frame

    @property
    def frame(self) -> NumericFrame:
        """``NumericFrame(xs)``."""
        if self._frame is None:
            self._frame = NumericFrame(self._xs)
        return self._frame
