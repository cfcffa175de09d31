"""The prequential AUC of the learners' scores, counted with sorted arrays.

``prequential-auc.txt`` Algorithm 1: the AUC of a window is the share of
(positive, negative) pairs ranked correctly, a tie counting one half. The pair
count does not depend on the order the examples came in, only on which examples
are held, so :class:`AUCTally` counts it from arrays: for each positive, twice the
negatives below it plus the negatives tied with it (two ``searchsorted`` over the
sorted negatives), as the per-event :class:`~streameval.pipeline.metrics.auc.AUC`
adds it up one example at a time.

* the whole history: the scores held so far stay sorted; a segment's new pairs are
  those it forms with the held scores and among itself;
* a sliding window: counted over the last ``w`` scores of the tape when read.

>>> from streameval.pipeline.columnar.segment import Segment
>>> seg = Segment.of([1, 0, 0, 1], [0, 1, 2, 3], [-1] * 4, [-1] * 4, [[0]] * 4,
...                  [[0.9], [0.3], [0.5], [0.5]])
>>> tally = AUCTally(1, window=None)
>>> tally.extend(seg, np.array([False, True]))
>>> tally.states(None, np.array([False, True]))[0].get()  # 3.5 of 4 pairs
0.875
"""

from __future__ import annotations

import numpy as np
from streameval.pipeline.columnar.segment import Segment, Tape
from streameval.pipeline.metrics.auc import AUCCounts


def pairs2(pos: np.ndarray, neg_sorted: np.ndarray) -> int:
    """Twice the credit of the correctly ranked (positive, negative) pairs."""
    below = np.searchsorted(neg_sorted, pos, side="left")
    not_above = np.searchsorted(neg_sorted, pos, side="right")
    return int(below.sum()) + int(not_above.sum())


def _check(scores: np.ndarray) -> None:
    if np.isnan(scores).any():
        raise ValueError("a score must not be nan")


class AUCTally:
    """Every learner's AUC, whole history or over a sliding window of ``window`` scores."""

    def __init__(self, n_learners: int, window: int | None) -> None:
        self.window = window
        empty = np.zeros(0)
        self.pos = [empty] * n_learners  # sorted scores of the positives held
        self.neg = [empty] * n_learners
        self.pairs = [0] * n_learners

    def extend(self, seg: Segment, positive: np.ndarray) -> None:
        """Add ``seg``'s scores; ``positive[c]`` says whether code ``c`` is the positive
        class. A window estimate reads the tape instead and keeps nothing."""
        assert seg.score is not None
        _check(seg.score)
        if self.window is not None or not len(seg):
            return
        flags = positive[seg.y]
        for i in range(seg.score.shape[1]):
            scores = seg.score[:, i]
            new_pos, new_neg = np.sort(scores[flags]), np.sort(scores[~flags])
            pos, neg = self.pos[i], self.neg[i]
            gained = pairs2(new_pos, neg) + pairs2(new_pos, new_neg)
            gained += 2 * len(pos) * len(new_neg) - pairs2(new_neg, pos)  # old positives
            self.pairs[i] += gained
            self.pos[i] = np.sort(np.concatenate((pos, new_pos)), kind="mergesort")
            self.neg[i] = np.sort(np.concatenate((neg, new_neg)), kind="mergesort")

    def states(self, tape: Tape | None, positive: np.ndarray) -> list[AUCCounts]:
        """Every learner's AUC state (what ``PrequentialAUC.get`` reads)."""
        if self.window is None:
            return [
                AUCCounts(len(p), len(n), pairs)
                for p, n, pairs in zip(self.pos, self.neg, self.pairs, strict=True)
            ]
        assert tape is not None, "a window estimate reads the tape"
        tail = tape.tail(self.window)
        assert tail.score is not None
        flags = positive[tail.y] if len(tail) else np.zeros(0, dtype=bool)
        out = []
        for i in range(tail.score.shape[1]):
            scores = tail.score[:, i]
            pos, neg = scores[flags], np.sort(scores[~flags])
            out.append(AUCCounts(len(pos), len(neg), pairs2(pos, neg)))
        return out
