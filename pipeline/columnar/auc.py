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


class SortedRuns:
    """A growing multiset of scores as a few sorted runs (at most ``log2`` of their
    count): adding a sorted run merges the last runs while the newer is at least half
    the size of the one before, so the scores are copied ``O(log n)`` times in all, not
    at every addition.

    >>> runs = SortedRuns()
    >>> runs.add(np.array([0.2, 0.5])); runs.add(np.array([0.1]))
    >>> len(runs), runs.pairs2(np.array([0.5]))  # 0.1 and 0.2 below, 0.5 tied: 2 + 2 + 1
    (3, 5)
    """

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(r) for r in self.runs)

    def add(self, sorted_scores: np.ndarray) -> None:
        if not len(sorted_scores):
            return
        runs = self.runs
        runs.append(sorted_scores)
        while len(runs) > 1 and 2 * len(runs[-1]) >= len(runs[-2]):
            newer = runs.pop()
            runs[-1] = np.sort(np.concatenate((runs[-1], newer)), kind="stable")

    def pairs2(self, queries: np.ndarray) -> int:
        """:func:`pairs2` of ``queries`` (as positives) against the scores held."""
        return sum(pairs2(queries, run) for run in self.runs)


def _check(scores: np.ndarray) -> None:
    if np.isnan(scores).any():
        raise ValueError("a score must not be nan")


class AUCTally:
    """Every learner's AUC, whole history or over a sliding window of ``window`` scores."""

    def __init__(self, n_learners: int, window: int | None) -> None:
        self.window = window
        self.pos = [SortedRuns() for _ in range(n_learners)]  # the positives' scores held
        self.neg = [SortedRuns() for _ in range(n_learners)]
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
            gained = neg.pairs2(new_pos) + pairs2(new_pos, new_neg)
            gained += 2 * len(pos) * len(new_neg) - pos.pairs2(new_neg)  # old positives
            self.pairs[i] += gained
            pos.add(new_pos)
            neg.add(new_neg)

    def states(self, tape: Tape | None, positive: np.ndarray) -> list[AUCCounts]:
        """Every learner's AUC state (what ``PrequentialAUC.get`` reads)."""
        if self.window is None:
            return [
                AUCCounts(len(p), len(n), pairs)
                for p, n, pairs in zip(self.pos, self.neg, self.pairs, strict=True)
            ]
        assert tape is not None, "a window estimate reads the tape"
        if not len(tape):  # no label scored yet: every window is empty
            return [AUCCounts(0, 0, 0) for _ in self.pos]
        tail = tape.tail(self.window)
        assert tail.score is not None
        flags = positive[tail.y] if len(tail) else np.zeros(0, dtype=bool)
        out = []
        for i in range(tail.score.shape[1]):
            scores = tail.score[:, i]
            pos, neg = scores[flags], np.sort(scores[~flags])
            out.append(AUCCounts(len(pos), len(neg), pairs2(pos, neg)))
        return out
