"""The two shuffles of ``temporal-dependence-evaluation-journal.txt``, sect. 6.9.

* ``full`` -- a random permutation of the instances. Temporal dependence and
  concept drift are gone: the stream becomes iid.
* ``within-class`` -- the label sequence is kept as it is, and within each
  class the instances are randomly permuted: position ``i`` keeps its label
  ``y_i`` but receives the features of a random instance of the same class.
  The temporal dependence of the labels stays, the concept drift goes (the
  class-conditional distribution becomes the same all along the stream).

In both, *positions* keep their identity: the instance replayed at position
``i`` gets ``id = str(i)`` and the event time ``ts_i`` of the original
position ``i``, so delays and schedules are unchanged.

A permutation is given as ``order``: position ``i`` receives source instance
``order[i]``.

>>> within_class_order(["a", "a", "b", "a", "b"], seed=3)
[1, 3, 2, 0, 4]
>>> [inst.y for inst in shuffle_instances(
...     [Instance(str(i), float(i), {"v": float(i)}, y) for i, y in enumerate("aabab")],
...     "within-class", seed=3)]
['a', 'a', 'b', 'a', 'b']
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any, Literal

from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams.base import FeatureValue, Instance, RecordSource, Target

ShuffleKind = Literal["full", "within-class"]
SHUFFLE_KINDS: tuple[str, ...] = ("full", "within-class")


def full_order(n: int, seed: int) -> list[int]:
    """A uniformly random permutation of ``range(n)``.

    >>> sorted(full_order(5, seed=0)) == list(range(5))
    True
    """
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def within_class_order(labels: Sequence[Hashable], seed: int) -> list[int]:
    """A permutation that maps every position to a random one of the same label.

    The ``k``-th occurrence of a class is given the ``k``-th element of a
    random permutation of that class's positions, so every source position
    is used exactly once and ``labels[order[i]] == labels[i]``.
    """
    positions: dict[Hashable, list[int]] = {}
    for i, y in enumerate(labels):
        positions.setdefault(y, []).append(i)
    rng = random.Random(seed)
    shuffled: dict[Hashable, Iterator[int]] = {}
    for y in sorted(positions, key=str):
        idx = positions[y][:]
        rng.shuffle(idx)
        shuffled[y] = iter(idx)
    return [next(shuffled[y]) for y in labels]


def make_order(kind: str, labels: Sequence[Hashable], seed: int) -> list[int]:
    """The permutation of shuffle ``kind`` for a stream with these labels."""
    if kind == "full":
        return full_order(len(labels), seed)
    if kind == "within-class":
        return within_class_order(labels, seed)
    raise SpecError(f"unknown shuffle {kind!r} (allowed: {', '.join(SHUFFLE_KINDS)}, none)")


def shuffle_instances(
    instances: Iterable[Instance], kind: str, seed: int = 0
) -> Iterator[Instance]:
    """Shuffle materialised instances; position ``i`` keeps ``id=str(i)`` and ``ts_i``."""
    items = list(instances)
    order = make_order(kind, [inst.y for inst in items], seed)
    for i, j in enumerate(order):
        src = items[j]
        yield Instance(str(i), items[i].ts, src.x, src.y)


class ShuffledSource(RecordSource[Any]):
    """A record source replayed in shuffled order.

    The whole base stream is read once per replay and kept in the base
    source's packed form (for CSV rows, one string per row), then replayed
    with the event time of each position.
    """

    def __init__(self, base: RecordSource[Any], kind: str, seed: int = 0) -> None:
        if kind not in SHUFFLE_KINDS:
            make_order(kind, [], seed)  # raises the error listing the kinds
        self.base = base
        self.kind = kind
        self.seed = seed

    def records(self) -> Iterator[tuple[float, Any]]:
        base = self.base
        times: list[float] = []
        packed: list[Any] = []
        labels: list[Target] = []
        for ts, record in base.records():
            times.append(ts)
            packed.append(base.pack(record))
            if self.kind == "within-class":
                labels.append(base.label(record))
        if self.kind == "within-class":
            order = within_class_order(labels, self.seed)
        else:
            order = full_order(len(packed), self.seed)
        del labels
        unpack = base.unpack
        for i, j in enumerate(order):
            yield times[i], unpack(packed[j])

    def decode(self, record: Any) -> tuple[dict[str, FeatureValue], Target]:
        return self.base.decode(record)

    def label(self, record: Any) -> Target:
        return self.base.label(record)

    def pack(self, record: Any) -> Any:
        return self.base.pack(record)

    def unpack(self, packed: Any) -> Any:
        return self.base.unpack(packed)
