"""A block of instances kept as four columns: ids, event times, features, labels.

The two-pass test-then-train (:mod:`~streameval.pipeline.columnar.immediate`) holds a
block of instances between the learners' calls and their evaluation. Held as
:class:`~streameval.pipeline.streams.base.Instance` tuples, each instance is one more
object the garbage collector tracks (a tuple holding a ``dict``), and a block of 512 of
them makes the collector run, move them to older generations and, once in a run, walk
the whole heap (~40 ms on Electricity with a naive Bayes model, as long as ~1,500
instances of its test-then-train). Held as columns, a block adds four lists: features
``dict`` s of numbers and ``str`` s and the ``str`` / ``float`` values of the other
columns are objects the collector does not track.

>>> rows = InstanceBlock.of([Instance("0", 1.0, {"a": 1.0}, "u"), Instance("1", 2.0, {}, "v")])
>>> len(rows), rows.ys, rows[1]
(2, ['u', 'v'], Instance(id='1', ts=2.0, x={}, y='v'))
>>> rows[1:].ids, [inst.id for inst in rows]
(['1'], ['0', '1'])
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar, overload

from streameval.pipeline.streams.base import Instance

Row = TypeVar("Row")
Cols = TypeVar("Cols", bound="Columns[Any]")


class Columns(Sequence[Row]):
    """Items held as parallel lists, one per field (the class's ``__slots__``, in order):
    an item is ``_item`` of the i-th of each list, a slice the same class over the
    slices of the lists (a subclass's constructor takes the lists in that order)."""

    __slots__ = ()
    _item: ClassVar[Callable[..., Any]]

    def _lists(self) -> list[list[Any]]:
        return [getattr(self, name) for name in self.__slots__]

    def __len__(self) -> int:
        return len(getattr(self, self.__slots__[0]))

    @overload
    def __getitem__(self, i: int) -> Row: ...

    @overload
    def __getitem__(self: Cols, i: slice) -> Cols: ...

    def __getitem__(self: Cols, i: int | slice) -> Any:
        if isinstance(i, slice):
            return type(self)(*(column[i] for column in self._lists()))
        return self._item(*(column[i] for column in self._lists()))

    def __iter__(self) -> Iterator[Row]:
        return map(self._item, *self._lists())


class InstanceBlock(Columns[Instance]):
    """Instances as columns; indexing and iteration give :class:`Instance` tuples, a
    slice gives a block."""

    __slots__ = ("ids", "ts", "xs", "ys")
    _item = Instance

    def __init__(
        self,
        ids: list[Any] | None = None,
        ts: list[float] | None = None,
        xs: list[Any] | None = None,
        ys: list[Hashable] | None = None,
    ) -> None:
        self.ids: list[Any] = [] if ids is None else ids
        self.ts: list[float] = [] if ts is None else ts
        self.xs: list[Any] = [] if xs is None else xs
        self.ys: list[Hashable] = [] if ys is None else ys

    @classmethod
    def of(cls, instances: Iterable[Instance]) -> InstanceBlock:
        """``instances`` as a block (a block is returned as it is)."""
        if isinstance(instances, InstanceBlock):
            return instances
        block = cls()
        for inst in instances:
            block.append(inst)
        return block

    def append(self, inst: Instance) -> None:
        """Add ``inst`` at the end."""
        self.add(*inst)

    def add(self, uid: Any, ts: float, x: Any, y: Hashable) -> None:
        """Add the instance ``uid`` at the end."""
        self.ids.append(uid)
        self.ts.append(ts)
        self.xs.append(x)
        self.ys.append(y)

    def __repr__(self) -> str:
        return f"InstanceBlock({len(self)} instances)"
