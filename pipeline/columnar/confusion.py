"""The learners' confusion counts under one prequential estimator, from segments.

The per-event :class:`~streameval.pipeline.metrics.confusion.ConfusionMatrix` adds each
scored label's weight to a handful of counts: ``total``, ``correct``, the references'
hits (``per_total``, ``maj``), and per class the true label (``true``), the prediction
(``pred``), the hits (``hit``) and No-Change's hits (``per``). Each of those is the
estimate of one 0/1 mask over the scored labels, so :class:`ConfusionTally` keeps it:

* whole history (Algorithm 1): integer counts, added a segment at a time;
* sliding window (Algorithm 2): counted over the last ``w`` labels of the
  :class:`~streameval.pipeline.columnar.segment.Tape` when read;
* fading factor (Algorithm 3): :class:`~streameval.pipeline.columnar.weights.LazyFade`,
  the same floats as the lazily faded per-event counts.

:meth:`ConfusionTally.matrix` fills a ``ConfusionMatrix`` with them, so the statistics
of :class:`~streameval.pipeline.metrics.classification.ClassificationMetrics` (the Kappa
family of ``temporal-dependence-evaluation-journal.txt`` eq. 6-14) are read by the very
same code. A class key is present in a count once it was ever counted (as the
per-event dicts keep a key whose window weight fell to 0); ``true`` lists the classes in
the order they first came as labels, which the per-event code iterates (``p_ran``,
recall, G-mean). The cells of the joint ``(y, y_pred)`` table are not filled: no
statistic reads them.

>>> from streameval.pipeline.columnar.segment import Segment
>>> from streameval.pipeline.metrics.forgetting import Forgetting
>>> seg = Segment.of([0, 0, 1, 1], [0, 1, 2, 3], [-1, 0, 0, 1], [-1, 0, 0, 0], [[0], [1], [1], [1]])
>>> whole = WholeCounts(1)
>>> whole.extend(seg, 2)
>>> [cm] = ConfusionTally(Forgetting.whole(), whole).matrices(["a", "b"], [0, 1], None)
>>> cm.rates()  # the doctest of ClassificationMetrics: p, p_ran, p_per, p_maj
(0.75, 0.5, 0.5, 0.25)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from streameval.pipeline.columnar.segment import Segment, Tape
from streameval.pipeline.columnar.weights import LazyFade
from streameval.pipeline.metrics.confusion import ConfusionMatrix
from streameval.pipeline.metrics.forgetting import Forgetting


def _grown(counts: np.ndarray, k: int) -> np.ndarray:
    """``counts`` with room for ``k`` classes on its last axis."""
    if counts.shape[-1] >= k:
        return counts
    out = np.zeros((*counts.shape[:-1], k), dtype=counts.dtype)
    out[..., : counts.shape[-1]] = counts
    return out


def _bincount(codes: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(codes[codes >= 0], minlength=k)[:k]


class WholeCounts:
    """Every count of the confusion matrices over the whole history (integers).

    Shared by the estimators: it is the whole-history estimate, and it says which class
    keys the per-event dicts hold (those ever counted).
    """

    def __init__(self, n_learners: int) -> None:
        self.n = 0
        self.per_total = 0
        self.maj = 0
        self.correct = np.zeros(n_learners, dtype=np.int64)
        self.true = np.zeros(0, dtype=np.int64)
        self.per = np.zeros(0, dtype=np.int64)
        self.pred = np.zeros((n_learners, 0), dtype=np.int64)
        self.hit = np.zeros((n_learners, 0), dtype=np.int64)

    def extend(self, seg: Segment, k: int) -> None:
        """Count ``seg``, whose codes are below ``k``."""
        y = seg.y
        self.n += len(y)
        per_hit = seg.per == y
        self.per_total += int(np.count_nonzero(per_hit))
        self.maj += int(np.count_nonzero(seg.maj == y))
        self.true = _grown(self.true, k) + _bincount(y, k)
        self.per = _grown(self.per, k) + _bincount(y[per_hit], k)
        self.pred, self.hit = _grown(self.pred, k), _grown(self.hit, k)
        for i in range(seg.pred.shape[1]):
            pred = seg.pred[:, i]
            hit = pred == y
            self.correct[i] += int(np.count_nonzero(hit))
            self.pred[i] += _bincount(pred, k)
            self.hit[i] += _bincount(y[hit], k)


class ConfusionTally:
    """Every learner's confusion counts under one estimator (see the module docstring)."""

    def __init__(self, forgetting: Forgetting, whole: WholeCounts) -> None:
        self.forgetting = forgetting
        self.whole = whole
        self.fade = LazyFade(forgetting.alpha) if forgetting.kind == "fading" else None

    @property
    def window(self) -> int | None:
        return self.forgetting.window if self.forgetting.kind == "window" else None

    def extend(self, seg: Segment, k: int) -> None:
        """Add ``seg`` (after ``whole`` counted it); only a fading estimate keeps state."""
        if self.fade is None:
            return
        y = seg.y
        per_hit = seg.per == y
        masks: dict[Hashable, np.ndarray] = {"per_total": per_hit, "maj": seg.maj == y}
        for c in np.unique(y).tolist():
            is_c = y == c
            masks["true", c] = is_c
            masks["per", c] = per_hit & is_c
        for i in range(seg.pred.shape[1]):
            pred = seg.pred[:, i]
            hit = pred == y
            masks["correct", i] = hit
            for c in np.unique(pred[pred >= 0]).tolist():
                masks["pred", i, c] = pred == c
            for c in np.unique(y[hit]).tolist():
                masks["hit", i, c] = hit & (y == c)
        self.fade.extend(len(y), masks)

    def matrices(
        self, labels: Sequence[Hashable], order: Sequence[int], tape: Tape | None
    ) -> list[ConfusionMatrix]:
        """Every learner's matrix; ``labels[c]`` is the label of code ``c``, ``order``
        the codes in the order they first came as labels."""
        n_learners = len(self.whole.correct)
        if self.fade is not None:
            return [self._faded(i, labels, order) for i in range(n_learners)]
        counts = self.whole
        if self.window is not None:
            assert tape is not None, "a window estimate reads the tape"
            counts = WholeCounts(n_learners)
            counts.extend(tape.tail(self.window), len(labels))
        return [self._counted(counts, i, labels, order) for i in range(n_learners)]

    def _counted(
        self,
        counts: WholeCounts,
        learner: int,
        labels: Sequence[Hashable],
        order: Sequence[int],
    ) -> ConfusionMatrix:
        """A matrix of plain counts: the whole history's, or a window's."""
        whole, every = self.whole, range(len(labels))
        cm = ConfusionMatrix()
        cm.total, cm.correct = float(counts.n), float(counts.correct[learner])
        cm.per_total, cm.maj = float(counts.per_total), float(counts.maj)
        _fill(cm.true, labels, order, whole.true, counts.true)
        _fill(cm.pred, labels, every, whole.pred[learner], counts.pred[learner])
        _fill(cm.hit, labels, every, whole.hit[learner], counts.hit[learner])
        _fill(cm.per, labels, every, whole.per, counts.per)
        return cm

    def _faded(
        self, learner: int, labels: Sequence[Hashable], order: Sequence[int]
    ) -> ConfusionMatrix:
        fade = self.fade
        assert fade is not None
        sums, whole = fade.sums, self.whole
        cm = ConfusionMatrix()
        cm.unit, cm.total = fade.unit, fade.total
        cm.correct = sums.get(("correct", learner), 0.0)
        cm.per_total, cm.maj = sums.get("per_total", 0.0), sums.get("maj", 0.0)
        for c in order:
            cm.true[labels[c]] = sums[("true", c)]
        for c, label in enumerate(labels):
            if c < whole.pred.shape[1] and whole.pred[learner, c]:
                cm.pred[label] = sums[("pred", learner, c)]
            if c < whole.hit.shape[1] and whole.hit[learner, c]:
                cm.hit[label] = sums[("hit", learner, c)]
            if c < len(whole.per) and whole.per[c]:
                cm.per[label] = sums[("per", c)]
        return cm


def _fill(
    into: dict[Hashable, float],
    labels: Sequence[Hashable],
    codes: Sequence[int],
    ever: np.ndarray,
    counts: np.ndarray,
) -> None:
    """``into[labels[c]] = counts[c]`` for the ``codes`` ever counted, in that order."""
    for c in codes:
        if c < len(ever) and ever[c]:
            into[labels[c]] = float(counts[c]) if c < len(counts) else 0.0
