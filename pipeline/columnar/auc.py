"""The prequential AUC of a block of scores, counted with sorted arrays.

``prequential-auc.txt`` Algorithm 1: the AUC of a window is the share of
(positive, negative) pairs ranked correctly, a tie counting one half. The pair
count does not depend on the order the examples came in, only on which examples
the window holds, so it is computed once, at snapshot time, from the scores held:
for each positive, twice the negatives below it plus the negatives tied with it
(two ``searchsorted`` over the sorted negatives), as the per-event
:class:`~streameval.pipeline.metrics.auc.AUC` adds it up one example at a time.

>>> auc = filled_auc(np.array([0.9, 0.3, 0.5, 0.5]), np.array([True, False, False, True]), None)
>>> auc.get()  # 0.9>0.3, 0.9>0.5, 0.5>0.3, 0.5=0.5 -> 3.5 / 4
0.875
"""

from __future__ import annotations

import numpy as np
from sortedcontainers import SortedList
from streameval.pipeline.metrics.auc import PrequentialAUC


def pairs2(pos: np.ndarray, neg: np.ndarray) -> int:
    """Twice the credit of the correctly ranked (positive, negative) pairs."""
    neg = np.sort(neg)
    below = np.searchsorted(neg, pos, side="left")
    not_above = np.searchsorted(neg, pos, side="right")
    return int(below.sum()) + int(not_above.sum())


def filled_auc(scores: np.ndarray, positive: np.ndarray, window: int | None) -> PrequentialAUC:
    """A :class:`PrequentialAUC` holding the last ``window`` (all, ``None``) examples."""
    if window is not None:
        start = max(0, len(scores) - window)
        scores, positive = scores[start:], positive[start:]
    auc = PrequentialAUC(window)
    pos, neg = scores[positive], scores[~positive]
    auc.auc._pos = SortedList(pos.tolist())
    auc.auc._neg = SortedList(neg.tolist())
    auc.auc._pairs2 = pairs2(pos, neg)
    return auc
