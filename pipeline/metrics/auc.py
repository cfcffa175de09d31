"""Prequential AUC over a sliding window, in ``O(log d)`` per example.

Brzezinski & Stefanowski, *Prequential AUC: properties of the area under the
ROC curve for data streams with concept drift*
(``prequential-auc.txt``), sect. 3, Algorithm 1: the AUC of the last ``d``
scored examples is the number of (positive, negative) pairs ranked correctly
divided by ``p n``; a positive and a negative with equal scores count 1/2
(line 26 of Algorithm 1, which walks the sorted window with positives before
negatives on ties and credits a tied negative with ``(c + prevc) / 2``).

Instead of walking the window after every example, :class:`AUC` keeps the scores
of positives and of negatives in two sorted lists and maintains the pair count
(the Mann-Whitney statistic, doubled to stay an integer) incrementally: an
arriving (``update``) or leaving (``revert``) example adds or removes its pairs
with the other class, counted with two bisections. Each costs ``O(log d)``; the
window of :class:`PrequentialAUC` is :class:`~streameval.pipeline.metrics.rolling.Rolling`.
A faded AUC is not defined (the paper's measure is over a sliding window only).

Sect. 4.2.3 of the paper states that a window with no positives has AUC 1.
We return 1 as well for a window with no negatives: swapping the class
labels and negating the scores leaves the AUC unchanged, which turns one
case into the other, so only the same value for both keeps that symmetry
(and an empty window, having neither class, gets 1 under both readings).
"""

from __future__ import annotations

import math

from sortedcontainers import SortedList
from streameval.pipeline.metrics.rolling import Rolling


class AUC:
    """AUC of every scored example so far, ties counted half; ``revert`` removes one.

    >>> auc = AUC()
    >>> for score, positive in [(0.9, True), (0.3, False), (0.5, False), (0.5, True)]:
    ...     auc.update(score, positive)
    >>> auc.get()  # pairs: 0.9>0.3, 0.9>0.5, 0.5>0.3, 0.5=0.5 -> 3.5 / 4
    0.875
    >>> auc.revert(0.9, True)  # 0.5>0.3 and 0.5=0.5 -> 1.5 / 2
    >>> auc.get()
    0.75

    With no positive-negative pair (nothing scored, or one class only) it is 1.0, as
    MOA's AUC evaluators give it.

    >>> AUC().get()
    1.0
    """

    def __init__(self) -> None:
        self._pos: SortedList = SortedList()
        self._neg: SortedList = SortedList()
        self._pairs2 = 0  # twice the number of correctly ranked pairs (ties count 1)

    def _pairs2_with(self, score: float, is_positive: bool) -> int:
        """Twice the credit of the pairs ``score`` forms with the other class."""
        if is_positive:
            neg = self._neg  # 2 * (#neg below) + (#neg tied)
            return neg.bisect_left(score) + neg.bisect_right(score)
        pos = self._pos  # 2 * (#pos above) + (#pos tied)
        return 2 * len(pos) - pos.bisect_left(score) - pos.bisect_right(score)

    def update(self, score: float, is_positive: bool) -> None:
        score = float(score)
        if math.isnan(score):
            raise ValueError("a score must not be nan")
        is_positive = bool(is_positive)
        self._pairs2 += self._pairs2_with(score, is_positive)
        (self._pos if is_positive else self._neg).add(score)

    def revert(self, score: float, is_positive: bool) -> None:
        score = float(score)
        is_positive = bool(is_positive)
        (self._pos if is_positive else self._neg).remove(score)
        self._pairs2 -= self._pairs2_with(score, is_positive)

    @property
    def counts(self) -> tuple[int, int]:
        """``(p, n)``: positives and negatives held."""
        return len(self._pos), len(self._neg)

    def get(self) -> float:
        p, n = len(self._pos), len(self._neg)
        if p == 0 or n == 0:
            return 1.0
        return self._pairs2 / (2 * p * n)


class AUCCounts:
    """What :meth:`AUC.get` reads, without the scores: ``p`` positives, ``n`` negatives
    and twice the credit of their correctly ranked pairs (the columnar core computes
    them in bulk, :mod:`streameval.pipeline.columnar.auc`).

    >>> AUCCounts(2, 2, 7).get()  # 3.5 of 4 pairs
    0.875
    """

    def __init__(self, p: int, n: int, pairs2: int) -> None:
        self.counts = (p, n)
        self._pairs2 = pairs2

    def get(self) -> float:
        p, n = self.counts
        if p == 0 or n == 0:
            return 1.0
        return self._pairs2 / (2 * p * n)


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
        self.auc = AUC()
        self._feed: AUC | Rolling = self.auc if window is None else Rolling(self.auc, window)

    def update(self, score: float, is_positive: bool) -> None:
        if math.isnan(score):  # before a window evicts anything
            raise ValueError("a score must not be nan")
        self._feed.update(score, is_positive)

    @property
    def counts(self) -> tuple[int, int]:
        """``(p, n)``: positives and negatives in the window."""
        return self.auc.counts

    def get(self) -> float:
        return self.auc.get()
