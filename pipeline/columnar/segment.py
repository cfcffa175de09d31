"""A segment of scored labels as arrays, and the tape of the most recent ones.

The columnar core scores labels a segment at a time: everything the metrics read
of a scored label is one entry of a :class:`Segment` (label order) -- the label's
class code, its instance's arrival index, what the two reference baselines and each
learner predicted at the instance's arrival (codes, :data:`NONE` for no
prediction), and each learner's score of the positive class (the prequential AUC's
input). Whole-history and faded estimates consume a segment once; windowed ones read
the last ``w`` entries of the :class:`Tape`, which keeps only as many as the largest
window needs, so memory does not grow with the stream.

>>> seg = Segment.of([0, 1, 1], [0, 1, 2], [-1, 0, 1], [-1, 0, 0], [[0], [1], [0]])
>>> tape = Tape(keep=2)
>>> tape.extend(seg)
>>> tape.tail(1).y.tolist(), tape.tail(2).pred[:, 0].tolist()
([1], [1, 0])
>>> tape.extend(Segment.of([0], [3], [1], [1], [[1]]))
>>> tape.tail(2).y.tolist(), len(tape)  # only the last two are kept
([1, 0], 4)
>>> Tape(keep=2, n_learners=3).tail(2).pred.shape  # no label yet
(0, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NONE = -1  # the code of "no prediction" (nothing learned yet)


@dataclass
class Segment:
    """Scored labels ``0..m-1`` in label order (see the module docstring).

    ``pred`` and ``score`` have one column per learner; ``score`` is ``None`` when no
    AUC is computed.
    """

    y: np.ndarray  # int32 class codes
    at: np.ndarray  # int64 arrival indices
    per: np.ndarray  # int32 No-Change's first prediction
    maj: np.ndarray  # int32 Majority's first prediction
    pred: np.ndarray  # (m, learners) int32 first predictions
    score: np.ndarray | None = None  # (m, learners) float64 positive-class scores

    @classmethod
    def of(
        cls,
        y: Sequence[int],
        at: Sequence[int],
        per: Sequence[int],
        maj: Sequence[int],
        pred: Sequence[Sequence[int]],
        score: Sequence[Sequence[float]] | None = None,
        n_learners: int | None = None,
    ) -> Segment:
        """A segment from lists (``pred[i]``, ``score[i]``: label ``i``'s row)."""
        m = len(y)
        width = n_learners if n_learners is not None else (len(pred[0]) if m else 0)
        return cls(
            np.asarray(y, dtype=np.int32),
            np.asarray(at, dtype=np.int64),
            np.asarray(per, dtype=np.int32),
            np.asarray(maj, dtype=np.int32),
            np.asarray(pred, dtype=np.int32).reshape(m, width),
            None if score is None else np.asarray(score, dtype=np.float64).reshape(m, width),
        )

    @classmethod
    def join(cls, segments: Sequence[Segment]) -> Segment:
        """The labels of ``segments``, one after the other (the scores ``None`` when one
        segment has none)."""
        scores = [s.score for s in segments]
        return cls(
            np.concatenate([s.y for s in segments]),
            np.concatenate([s.at for s in segments]),
            np.concatenate([s.per for s in segments]),
            np.concatenate([s.maj for s in segments]),
            np.concatenate([s.pred for s in segments]),
            None if any(x is None for x in scores) else np.concatenate(scores),  # type: ignore[arg-type]
        )

    def __len__(self) -> int:
        return len(self.y)

    def errors(self) -> np.ndarray:
        """``(m, learners)``: whether each learner's first prediction was wrong."""
        return self.pred != self.y[:, None]

    def cut(self, start: int, stop: int | None = None) -> Segment:
        """Labels ``start..stop-1`` of this segment."""
        part = slice(start, stop)
        return Segment(
            self.y[part],
            self.at[part],
            self.per[part],
            self.maj[part],
            self.pred[part],
            None if self.score is None else self.score[part],
        )


class Tape:
    """The most recent scored labels: the last ``keep`` of them.

    ``len(tape)`` counts every label ever added; :meth:`tail` reads the last ``w``
    (before the first label, an empty segment of ``n_learners`` columns, with scores
    when ``scored``).
    """

    _empty: Segment | None = None  # a tape pickled before it had one: as before

    def __init__(self, keep: int, n_learners: int = 0, scored: bool = False) -> None:
        self.keep = max(0, int(keep))
        self._held: Segment | None = None
        self._n = 0
        self._empty = Segment.of([], [], [], [], [], [] if scored else None, n_learners)

    def __len__(self) -> int:
        return self._n

    def extend(self, seg: Segment) -> None:
        self._n += len(seg)
        if self.keep == 0:
            return
        held = self._held
        joined = seg if held is None else Segment.join((held, seg))
        if len(joined) > self.keep:
            joined = joined.cut(len(joined) - self.keep)
        self._held = joined

    def tail(self, w: int | None) -> Segment:
        """The last ``w`` labels (fewer at the start of the stream)."""
        held = self._held
        if held is None:
            if self.keep == 0 or self._empty is None:
                raise ValueError("the tape keeps no label (keep=0)")
            return self._empty
        if w is None or w >= len(held):
            return held
        return held.cut(len(held) - w)
