"""The pairwise comparisons of learners from their 0/1 errors, a segment at a time.

``prequential-error-fading-factors.txt`` sect. 4: the Q statistic ``log(S_A / S_B)``
of accumulated losses and the signed McNemar statistic of the disagreement counts
``n01``, ``n10``, each under the whole, window and fading estimators. The per-event
:class:`~streameval.pipeline.pairs.PairwiseComparisons` keeps them as sums;
:class:`PairsTally` keeps the same sums from segments -- counts for the whole
history, the last ``w`` labels of the tape for a window (0/1 losses sum exactly in any
order), Algorithm 3's recursion ``alpha S + e`` for a fading factor -- and
:meth:`PairsTally.fill` writes them into a ``PairwiseComparisons``.

>>> from streameval.pipeline.columnar.segment import Segment
>>> from streameval.pipeline.metrics.forgetting import Forgetting
>>> from streameval.pipeline.pairs import PairwiseComparisons
>>> estimators = {"whole": Forgetting.whole()}
>>> pairs = PairwiseComparisons(["a", "b"], estimators, classification=True)
>>> seg = Segment.of([0, 0, 0], [0, 1, 2], [-1] * 3, [-1] * 3, [[0, 1], [0, 1], [1, 0]])
>>> tally = PairsTally(estimators, 2)
>>> tally.extend(seg)
>>> tally.fill(pairs, None)
>>> ab = pairs.get()["a vs b"]  # a errs once, b twice
>>> round(ab["q"]["whole"], 4), round(ab["mcnemar"]["whole"], 4)  # log(1/2), -(1-2)^2/3
(-0.6931, -0.3333)
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
from streameval.pipeline.columnar.segment import Segment, Tape
from streameval.pipeline.columnar.weights import EagerFade
from streameval.pipeline.metrics.forgetting import Forgetting
from streameval.pipeline.pairs import PairwiseComparisons

Sums = dict[object, float]


def _counts(errors: np.ndarray, pairs: list[tuple[int, int]]) -> tuple[float, Sums]:
    """The weight and the sums of 0/1 ``errors`` (labels x learners), as counts."""
    sums: Sums = {}
    for i in range(errors.shape[1]):
        sums["loss", i] = float(np.count_nonzero(errors[:, i]))
    for i, j in pairs:
        a, b = errors[:, i], errors[:, j]
        sums["only", i, j] = float(np.count_nonzero(a & ~b))
        sums["only", j, i] = float(np.count_nonzero(b & ~a))
    return float(len(errors)), sums


class PairsTally:
    """The sums of every pair's Q and McNemar statistics under each estimator."""

    def __init__(self, estimators: Mapping[str, Forgetting], n_learners: int) -> None:
        self.estimators = dict(estimators)
        self.pairs = list(combinations(range(n_learners), 2))
        self.n = 0
        self.whole: Sums = {}
        self.fades = {
            name: EagerFade(f.alpha) for name, f in estimators.items() if f.kind == "fading"
        }

    def extend(self, seg: Segment) -> None:
        """Add a segment's errors."""
        errors = seg.errors()
        n, sums = _counts(errors, self.pairs)
        self.n += int(n)
        for key, value in sums.items():
            self.whole[key] = self.whole.get(key, 0.0) + value
        if not self.fades:
            return
        columns: dict[object, list[float]] = {}
        as_float = errors.astype(float)
        for i in range(errors.shape[1]):
            columns["loss", i] = as_float[:, i].tolist()
        for i, j in self.pairs:
            a, b = errors[:, i], errors[:, j]
            columns["only", i, j] = (a & ~b).astype(float).tolist()
            columns["only", j, i] = (b & ~a).astype(float).tolist()
        for fade in self.fades.values():
            fade.extend(len(errors), columns)

    def _sums(self, name: str, forgetting: Forgetting, tape: Tape | None) -> tuple[float, Sums]:
        if name in self.fades:
            fade = self.fades[name]
            return fade.weight, fade.sums
        if forgetting.kind == "window":
            assert tape is not None, "a window estimate reads the tape"
            return _counts(tape.tail(forgetting.window).errors(), self.pairs)
        return float(self.n), self.whole

    def fill(self, pairs: PairwiseComparisons, tape: Tape | None) -> None:
        """Set every pair's sums as the per-event updates would have left them."""
        for name, forgetting in self.estimators.items():
            weight, sums = self._sums(name, forgetting, tape)
            for i, j in self.pairs:
                a, b = sums.get(("loss", i), 0.0), sums.get(("loss", j), 0.0)
                q = pairs._q[(i, j)][name].sums
                q.sums, q.weight = [a, b, a, b], weight
                if pairs.classification:
                    m = pairs._mcnemar[(i, j)][name].sums
                    only = sums.get(("only", i, j), 0.0), sums.get(("only", j, i), 0.0)
                    m.sums, m.weight = list(only), weight
