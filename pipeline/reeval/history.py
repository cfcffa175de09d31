"""The predictions made for one pending instance by one learner, stored compactly.

``delayed-labelling-continuous-reevaluation.txt``, sect. 4 and 6.1: a pending
instance keeps every (re-)prediction of every learner until its label arrives,
so the memory of the buffer is the number of pending instances times the
entries each holds (``N_B``, the predictions held). A list of ``(t, label)``
tuples costs 64 bytes per entry (a 56-byte tuple and its slot), 88 when the time
is a ``float`` of its own; :class:`PredictionHistory` keeps two lists of
references, the times and the labels, 16 bytes per entry: class labels are
shared objects, and so are the
times of a re-evaluation round (one ``float`` for all the instances of the
round, see :meth:`~streameval.pipeline.reeval.buffer.PendingBuffer.record_many`). Lists,
not typed arrays: reading a list does not box a new ``float`` per access, and
:func:`~streameval.pipeline.reeval.bins.dominant_per_bin` reads every entry at every label.
With the compaction of :mod:`streameval.pipeline.reeval.buffer` (only the changes of label
are stored) that makes the memory of the buffer follow the number of pending
instances, not the number of re-prediction rounds.

It reads like the list it replaces: ``len``, ``h[i] == (t, label)``, ``h[-1]``,
iteration and ``append((t, label))``; the functions of
:mod:`streameval.pipeline.reeval.bins` read its two columns directly.

>>> h = PredictionHistory(0.0, "UP")
>>> h.append((5.0, "DOWN"))
>>> len(h), h[-1], h == [(0.0, "UP"), (5.0, "DOWN")]
(2, (5.0, 'DOWN'), True)
>>> h
[(0.0, 'UP'), (5.0, 'DOWN')]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


class PredictionHistory:
    """``(t, label)`` entries sorted by ``t``, the first prediction first."""

    __slots__ = ("labels", "times")

    def __init__(self, t: float, label: Any) -> None:
        self.times: list[float] = [t]
        self.labels: list[Any] = [label]

    @classmethod
    def of(cls, entries: Sequence[tuple[float, Any]]) -> PredictionHistory:
        """The history of ``entries``, a sequence of ``(t, label)``."""
        history = cls(*entries[0])
        history.times.extend(t for t, _ in entries[1:])
        history.labels.extend(y for _, y in entries[1:])
        return history

    def append(self, entry: tuple[float, Any]) -> None:
        t, label = entry
        self.times.append(t)
        self.labels.append(label)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[float, Any]:
        return self.times[i], self.labels[i]

    def __iter__(self) -> Iterator[tuple[float, Any]]:
        return zip(self.times, self.labels, strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PredictionHistory):
            return self.times == other.times and self.labels == other.labels
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it replaces

    def __repr__(self) -> str:
        return repr(list(self))

    def __getstate__(self) -> tuple[list[float], list[Any]]:
        return self.times, self.labels

    def __setstate__(self, state: tuple[list[float], list[Any]]) -> None:
        self.times, self.labels = state


def columns(history: Sequence[tuple[float, Any]]) -> tuple[Sequence[float], Sequence[Any]]:
    """The times and the labels of a history (a :class:`PredictionHistory` or a list)."""
    if isinstance(history, PredictionHistory):
        return history.times, history.labels
    return [t for t, _ in history], [y for _, y in history]
