"""Scored labels waiting for the scoreboard.

The board's cost is paid per segment it takes (a few dozen numpy calls for every
estimator, learner and pair), so the columnar core gives it many labels at once:
:class:`HeldLabels` keeps the labels scored one at a time as flat rows of codes
(``array`` appends, no object per label) and the segments scored in bulk, in the order
they were scored, and hands them over as one :class:`~.segment.Segment` when
:data:`FLUSH_EVERY` labels are held or a snapshot is read.

A row is the instance's arrival index, the first predictions (No-Change's,
Majority's, then each learner's code) and the label's code; with an AUC, each
learner's score of the positive class beside it.

>>> held = HeldLabels(n_learners=1, auc=False)
>>> held.add_row([0, -1, -1, -1, 0], [])
False
>>> held.add(Segment.of([1], [1], [0], [0], [[0]]))
False
>>> seg = held.take()
>>> seg.y.tolist(), seg.at.tolist(), seg.pred[:, 0].tolist(), held.take()
([0, 1], [0, 1], [-1, 0], None)
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np
from streameval.pipeline.columnar.segment import Segment

#: Labels scored between two updates of the scoreboard when no snapshot asks sooner:
#: bounds the rows held as Python values.
FLUSH_EVERY = 8192
FIRSTS = 1  # where a row's first predictions start
LEARNERS = 3  # where the learners' first predictions start


class HeldLabels:
    """Scored labels not yet on the board, in the order they were scored."""

    def __init__(self, n_learners: int, auc: bool) -> None:
        self.width = n_learners + LEARNERS + 1  # values in a row
        self.auc = auc
        self.rows = array("q")  # the rows, flat
        self.scores = array("d")  # the positive-class scores of the rows, flat
        self.segments: list[Segment] = []  # the labels held before the rows
        self.n_segments = 0  # labels in ``segments``
        self._full_at = FLUSH_EVERY * self.width

    def add_row(self, row: Sequence[int], scores: Sequence[float]) -> bool:
        """Hold one label's row (and its scores); True when the board should take what
        is held."""
        self.rows.extend(row)
        if self.auc:
            self.scores.extend(scores)
        return len(self.rows) >= self._full_at

    def add(self, seg: Segment) -> bool:
        """Hold a segment, after the rows held; True when the board should take what is
        held."""
        self._rows_to_segment()
        self.segments.append(seg)
        self.n_segments += len(seg)
        return self.n_segments >= FLUSH_EVERY

    def take(self) -> Segment | None:
        """Everything held, as one segment (``None`` when nothing is); the holder empties."""
        self._rows_to_segment()
        held = self.segments
        if not held:
            return None
        self.segments, self.n_segments = [], 0
        return held[0] if len(held) == 1 else Segment.join(held)

    def _rows_to_segment(self) -> None:
        """The rows held, held as one segment."""
        if not self.rows:
            return
        rows = np.array(self.rows, dtype=np.int64).reshape(-1, self.width)
        scores = np.array(self.scores, dtype=np.float64).reshape(len(rows), -1)
        del self.rows[:], self.scores[:]
        self.segments.append(
            Segment(
                rows[:, -1].astype(np.int32),
                rows[:, 0],
                rows[:, FIRSTS].astype(np.int32),
                rows[:, FIRSTS + 1].astype(np.int32),
                rows[:, LEARNERS:-1].astype(np.int32),
                scores if self.auc else None,
            )
        )
        self.n_segments += len(rows)
