"""Labels as integer codes, and the two baselines' predictions for a block, in bulk.

No-Change predicts the last label it learned and Majority the most frequent one
(``temporal-dependence-evaluation-journal.txt``, Definitions 2 and 3); both learn
the labels in the order they arrive. Given, for each feature event of a block, how
many labels had been learned when it arrived (``seen``), No-Change's prediction is
the learned-label array shifted to ``seen - 1``, and Majority's is the argmax of the
running class counts (a cumulative sum of one-hot rows) at ``seen``. Ties go to the
smallest label by ``str``, as :func:`~streameval.pipeline.learners.base.argmax` does.

>>> codes = ClassCodes()
>>> refs = LabelBaselines()
>>> learned = [codes.code(y) for y in "abb"]
>>> p = refs.predict(np.array([0, 1, 2, 3]), learned, codes, positive="b")
>>> p.per.tolist(), p.maj.tolist()  # nothing learned yet: -1 (no prediction)
([-1, 0, 1, 1], [-1, 0, 0, 1])
>>> p.maj_score.tolist()  # Majority's probability of "b"
[0.0, 0.0, 0.5, 0.6666666666666666]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

NONE = -1  # the code of "no prediction" (nothing learned yet)


class ClassCodes:
    """Each label's code: 0, 1, ... in order of first appearance.

    >>> codes = ClassCodes()
    >>> [codes.code(y) for y in "abab"], codes.labels
    ([0, 1, 0, 1], ['a', 'b'])
    """

    def __init__(self) -> None:
        self.labels: list[Hashable] = []
        self.index: dict[Hashable, int] = {}  # label -> code

    def code(self, y: Hashable) -> int:
        code = self.index.get(y)
        if code is None:
            code = self.index[y] = len(self.labels)
            self.labels.append(y)
        return code

    def find(self, positive: str | None) -> int | None:
        """The code of the class whose ``str`` is ``positive`` (``None``: not seen)."""
        if positive is None:
            return None
        return next((c for c, y in enumerate(self.labels) if str(y) == positive), None)

    def __len__(self) -> int:
        return len(self.labels)


class Column:
    """A growing 1-d array (amortised appends), read as ``values``.

    >>> c = Column(np.int32)
    >>> c.extend(np.array([1, 2])); c.extend(np.array([3]))
    >>> c.values.tolist()
    [1, 2, 3]
    """

    def __init__(self, dtype: type) -> None:
        self._data = np.empty(1024, dtype=dtype)
        self._n = 0

    def extend(self, values: np.ndarray) -> None:
        n = self._n + len(values)
        if n > len(self._data):
            grown = np.empty(max(n, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown
        self._data[self._n : n] = values
        self._n = n

    @property
    def values(self) -> np.ndarray:
        return self._data[: self._n]

    def __len__(self) -> int:
        return self._n


@dataclass
class Predictions:
    """The baselines' predictions (codes, ``NONE`` for none) and positive-class scores."""

    per: np.ndarray
    maj: np.ndarray
    per_score: np.ndarray
    maj_score: np.ndarray


class LabelBaselines:
    """No-Change and Majority over the labels learned so far, advanced a block at a time."""

    def __init__(self) -> None:
        self.learned = Column(np.int32)  # label codes in learning order
        self.counts = np.zeros(0, dtype=np.int64)  # Majority's counts after every label

    def predict(
        self,
        seen: np.ndarray,
        learned: Sequence[int],
        codes: ClassCodes,
        positive: str | None,
    ) -> Predictions:
        """Predictions at feature events that came after ``seen`` learned labels, where
        ``learned`` are the codes learned during the block (they are then kept)."""
        start = len(self.learned)
        new = np.asarray(learned, dtype=np.int32)
        self.learned.extend(new)
        cum = running_counts(self.counts, new, len(codes))
        self.counts = cum[-1]
        seen = np.asarray(seen, dtype=np.int64)
        at = cum[seen - start]
        per = np.full(len(seen), NONE, dtype=np.int32)
        some = seen > 0
        per[some] = self.learned.values[seen[some] - 1]
        pos = codes.find(positive)
        return Predictions(
            per=per,
            maj=majority(at, codes.labels),
            per_score=(per == pos).astype(float) if pos is not None else np.zeros(len(seen)),
            maj_score=share(at, range(len(codes)), pos),
        )


def running_counts(start: Sequence[int], learned: np.ndarray, k: int) -> np.ndarray:
    """Each of the ``k`` codes' count of labels learned before each code of ``learned``
    and after the last (``len(learned) + 1`` rows), from the counts ``start``.

    >>> running_counts([1], np.array([1, 0]), 2).tolist()
    [[1, 0], [1, 1], [2, 1]]
    """
    cum = np.zeros((len(learned) + 1, k), dtype=np.int64)
    cum[0, : len(start)] = start
    if len(learned):
        onehot = np.zeros((len(learned), k), dtype=np.int64)
        onehot[np.arange(len(learned)), learned] = 1
        cum[1:] = cum[0] + np.cumsum(onehot, axis=0)
    return cum


def majority(counts: np.ndarray, labels: Sequence[Hashable]) -> np.ndarray:
    """Majority's choice for each row of class counts (a column per code of ``labels``):
    the most frequent class, ties to the smallest ``str``, then to the smallest code
    (:data:`NONE` before any label).

    >>> majority(np.array([[0, 0], [1, 0], [1, 1], [1, 2]]), ["a", "b"]).tolist()
    [-1, 0, 0, 1]
    """
    if counts.shape[1] == 0:
        return np.full(len(counts), NONE, dtype=np.int32)
    order = np.array(sorted(range(len(labels)), key=lambda c: str(labels[c])))
    best = order[np.argmax(counts[:, order], axis=1)].astype(np.int32)
    best[counts.sum(axis=1) == 0] = NONE
    return best


def share(counts: np.ndarray, order: Sequence[int], pos: int | None) -> np.ndarray:
    """Majority's score of the positive class ``pos`` for each row of counts: its
    frequency over the sum of the frequencies of the classes in ``order`` (first learned
    first), summed in that order, as
    :meth:`~streameval.pipeline.columnar.references.ReferenceScores.update` sums them.

    >>> share(np.array([[0, 0], [1, 0], [1, 1], [1, 2]]), [1, 0], 1).tolist()
    [0.0, 0.0, 0.5, 0.6666666666666666]
    """
    out = np.zeros(len(counts))
    if pos is None or not len(order):
        return out
    learned = counts[:, list(order)]
    total = learned.sum(axis=1)
    rows = total > 0
    freq = learned[rows] / total[rows, None]
    norm = freq[:, 0].copy()
    for j in range(1, freq.shape[1]):
        norm = norm + freq[:, j]
    out[rows] = counts[rows, pos] / total[rows] / norm
    return out
