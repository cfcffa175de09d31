"""The confusion matrix with the two reference classifiers of the Kappa family.

Zliobaite, Bifet, Read, Pfahringer & Holmes, *Evaluation methods and decision
theory for classification of streaming data with temporal dependence*
(``temporal-dependence-evaluation-journal.txt``), sect. 4.6: ``kappa`` and
``kappa_per`` need ``3k + 2`` estimators -- ``P(i)``, ``P_h(i)`` and the joint
``P(i, i)`` for each class, the accuracy and the previous label. We keep them as
weighted counts, with one generalisation: ``P(i, i)`` counts the events
``y_per == y_true == i`` where ``y_per`` is *the label the No-Change baseline
predicted under the same protocol* (with immediate labels ``y_per = y_{t-1}`` and
this is the paper's estimator; with delayed labels the No-Change baseline still
scores ``kappa_per == 0`` exactly). The agreement with the Majority baseline's
prediction ``y_maj`` gives ``p_maj`` (eq. 6) the same way.

Classes appear over time. Counts are weights (see :mod:`~streameval.pipeline.metrics.base`),
so :class:`~streameval.pipeline.metrics.rolling.Rolling` windows them through
``revert`` and :class:`~streameval.pipeline.metrics.faded.Faded` fades them lazily
through ``w``, ``unit`` and ``rescale``. ``p`` and ``p_per`` are each kept as one
running sum, updated alike, so that a learner predicting ``y_per`` gets
``kappa_per == 0.0`` to the last bit (summing ``k`` per-class floats would not).
"""

from __future__ import annotations

from collections.abc import Hashable

from streameval.pipeline.metrics.base import NAN


class ConfusionMatrix:
    """Weighted counts of (true label, prediction) pairs and of the references' hits.

    ``update(y_true, y_pred, y_per=None, y_maj=None, w=1.0)``: a ``None`` prediction
    (nothing could be predicted yet) is a wrong prediction and adds to no column of
    the prediction marginal ``P_h``; a ``None`` reference is a wrong reference.

    >>> cm = ConfusionMatrix()
    >>> for y, y_pred, y_per in [("a", "a", None), ("a", "b", "a"), ("b", "b", "a")]:
    ...     cm.update(y, y_pred, y_per)
    >>> cm["a", "b"], cm.correct, cm.per_total, cm.total
    (1.0, 2.0, 1.0, 3.0)
    >>> cm.rates()  # p, p_ran = (2*1 + 1*2) / 3^2, p_per, p_maj
    (0.6666666666666666, 0.4444444444444444, 0.3333333333333333, 0.0)
    >>> cm.revert("a", "a", None)
    >>> cm.classes, cm.correct, cm.n
    (['a', 'b'], 1.0, 2.0)
    """

    def __init__(self) -> None:
        self.total = 0.0  # sum of weights
        self.unit = 1.0  # the weight one observation made now counts as (lazy fading)
        self.correct = 0.0  # [y_pred == y_true]: the trace
        self.maj = 0.0  # [y_maj == y_true]
        self.per_total = 0.0  # [y_per == y_true] = sum_i P(i, i)
        self.true: dict[Hashable, float] = {}  # row sums: P(i)
        self.pred: dict[Hashable, float] = {}  # column sums: P_h(i), None left out
        self.hit: dict[Hashable, float] = {}  # diagonal: [y_pred == y_true == i]
        self.per: dict[Hashable, float] = {}  # P(i, i): [y_per == y_true == i]
        self.data: dict[tuple[Hashable, Hashable], float] = {}  # (y_true, y_pred) cells

    def __getitem__(self, cell: tuple[Hashable, Hashable]) -> float:
        return self.data.get(cell, 0.0)

    def update(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None = None,
        y_maj: Hashable | None = None,
        w: float = 1.0,
    ) -> None:
        if y_true is None:
            raise ValueError("y_true must be a label, got None")
        self.total += w
        true = self.true
        true[y_true] = true.get(y_true, 0.0) + w
        data = self.data
        cell = (y_true, y_pred)
        data[cell] = data.get(cell, 0.0) + w
        if y_pred is not None:
            pred = self.pred
            pred[y_pred] = pred.get(y_pred, 0.0) + w
            if y_pred == y_true:
                self.correct += w
                hit = self.hit
                hit[y_true] = hit.get(y_true, 0.0) + w
        if y_per == y_true:
            self.per_total += w
            per = self.per
            per[y_true] = per.get(y_true, 0.0) + w
        if y_maj == y_true:
            self.maj += w

    def revert(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None = None,
        y_maj: Hashable | None = None,
        w: float = 1.0,
    ) -> None:
        self.total -= w
        self.true[y_true] -= w
        self.data[y_true, y_pred] -= w
        if y_pred is not None:
            self.pred[y_pred] -= w
            if y_pred == y_true:
                self.correct -= w
                self.hit[y_true] -= w
        if y_per == y_true:
            self.per_total -= w
            self.per[y_true] -= w
        if y_maj == y_true:
            self.maj -= w

    def rescale(self, g: float) -> None:
        """Divide every stored weight (and ``unit``) by ``g``."""
        self.total /= g
        self.correct /= g
        self.maj /= g
        self.per_total /= g
        for counts in (self.true, self.pred, self.hit, self.per, self.data):
            for key in counts:
                counts[key] /= g
        self.unit /= g

    @property
    def n(self) -> float:
        """Effective number of observations: the count, ``min(w, i)`` or ``N_alpha(i)``."""
        return self.total / self.unit

    @property
    def classes(self) -> list[Hashable]:
        """The true labels with weight left, in order of appearance."""
        return [c for c, t in self.true.items() if t > 0.0]

    def rates(self) -> tuple[float, float, float, float]:
        """``(p, p_ran, p_per, p_maj)``: the accuracy of the evaluated classifier and of
        the Random (eq. 9), No-Change (eq. 7) and Majority (eq. 6) classifiers; all
        ``nan`` while there is no weight."""
        total = self.total
        if total <= 0.0:
            return NAN, NAN, NAN, NAN
        pred = self.pred
        p_ran = sum(t * pred.get(c, 0.0) for c, t in self.true.items()) / (total * total)
        return self.correct / total, p_ran, self.per_total / total, self.maj / total

    def recall(self) -> dict[Hashable, float]:
        """Per true class, ``[y_pred == y_true == i] / P(i)`` (``nan`` with no weight)."""
        hit = self.hit
        return {c: hit.get(c, 0.0) / t if t != 0 else NAN for c, t in self.true.items()}

    def __repr__(self) -> str:
        return f"ConfusionMatrix(n={self.n:g}, classes={self.classes!r})"
