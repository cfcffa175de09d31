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

from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any, overload

from streameval.pipeline.streams.base import Instance


class InstanceBlock(Sequence[Instance]):
    """Instances as columns; indexing and iteration give :class:`Instance` tuples, a
    slice gives a block."""

    __slots__ = ("ids", "ts", "xs", "ys")

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

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> Instance: ...

    @overload
    def __getitem__(self, i: slice) -> InstanceBlock: ...

    def __getitem__(self, i: int | slice) -> Instance | InstanceBlock:
        if isinstance(i, slice):
            return InstanceBlock(self.ids[i], self.ts[i], self.xs[i], self.ys[i])
        return Instance(self.ids[i], self.ts[i], self.xs[i], self.ys[i])  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Instance]:
        return map(Instance, self.ids, self.ts, self.xs, self.ys)

    def __repr__(self) -> str:
        return f"InstanceBlock({len(self)} instances)"
