"""Prequential AUC over a sliding window, in ``O(log d)`` per example.

Brzezinski & Stefanowski, *Prequential AUC: properties of the area under the
ROC curve for data streams with concept drift*
(``prequential-auc.txt``), sect. 3, Algorithm 1: the AUC of the last ``d``
scored examples is the number of (positive, negative) pairs ranked correctly
divided by ``p n``; a positive and a negative with equal scores count 1/2
(line 26 of Algorithm 1, which walks the sorted window with positives before
negatives on ties and credits a tied negative with ``(c + prevc) / 2``).

Instead of walking the window after every example, we keep the scores of
positives and of negatives in two sorted lists and maintain the pair count
(the Mann-Whitney statistic, doubled to stay an integer) incrementally: an
arriving or leaving example adds or removes its pairs with the other class,
counted with two bisections. Each update costs ``O(log d)``.

Sect. 4.2.3 of the paper states that a window with no positives has AUC 1.
We return 1 as well for a window with no negatives: swapping the class
labels and negating the scores leaves the AUC unchanged, which turns one
case into the other, so only the same value for both keeps that symmetry
(and an empty window, having neither class, gets 1 under both readings).
"""

from __future__ import annotations

import math
from collections import deque

from sortedcontainers import SortedList


class PrequentialAUC:
    """AUC of the last ``window`` scored examples (``None``: the whole history).

    >>> auc = PrequentialAUC(window=4)
    >>> for score, positive in [(0.9, True), (0.3, False), (0.5, False), (0.5, True)]:
    ...     auc.update(score, positive)
    >>> auc.get()  # pairs: 0.9>0.3, 0.9>0.5, 0.5>0.3, 0.5=0.5 -> 3.5 / 4
    0.875
    >>> auc.update(0.1, True)  # (0.9, +) leaves: 0.5>0.3 and 0.5=0.5 -> 1.5 / 4
    >>> auc.get()
    0.375
    """

    def __init__(self, window: int | None = 1000) -> None:
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 or None, got {window}")
        self.window = window
        self._pos: SortedList = SortedList()
        self._neg: SortedList = SortedList()
        self._fifo: deque[tuple[float, bool]] | None = deque() if window is not None else None
        self._pairs2 = 0  # twice the number of correctly ranked pairs (ties count 1)

    @staticmethod
    def _pairs2_with(score: float, is_positive: bool, pos: SortedList, neg: SortedList) -> int:
        """Twice the credit of the pairs ``score`` forms with the other class."""
        if is_positive:
            # 2 * (#neg below) + (#neg tied)
            return neg.bisect_left(score) + neg.bisect_right(score)
        # 2 * (#pos above) + (#pos tied)
        return 2 * len(pos) - pos.bisect_left(score) - pos.bisect_right(score)

    def update(self, score: float, is_positive: bool) -> None:
        score = float(score)
        if math.isnan(score):
            raise ValueError("a score must not be nan")
        is_positive = bool(is_positive)
        fifo = self._fifo
        if fifo is not None:
            if len(fifo) == self.window:
                old, old_positive = fifo.popleft()
                (self._pos if old_positive else self._neg).remove(old)
                self._pairs2 -= self._pairs2_with(old, old_positive, self._pos, self._neg)
            fifo.append((score, is_positive))
        self._pairs2 += self._pairs2_with(score, is_positive, self._pos, self._neg)
        (self._pos if is_positive else self._neg).add(score)

    @property
    def counts(self) -> tuple[int, int]:
        """``(p, n)``: positives and negatives in the window."""
        return len(self._pos), len(self._neg)

    def get(self) -> float:
        p, n = len(self._pos), len(self._neg)
        if p == 0 or n == 0:
            return 1.0
        return self._pairs2 / (2 * p * n)
