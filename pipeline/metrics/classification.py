"""Prequential classification metrics with the Kappa family and the baselines.

Zliobaite, Bifet, Read, Pfahringer & Holmes, *Evaluation methods and decision
theory for classification of streaming data with temporal dependence*
(``temporal-dependence-evaluation-journal.txt``), sect. 4:

* accuracy ``p`` of the evaluated classifier;
* ``p_ran = sum_i P(y=i) P_h(yhat=i)``, accuracy of the Random classifier (eq. 9);
* ``kappa = (p - p_ran) / (1 - p_ran)`` (eq. 10), its standard error (eq. 11)
  and the z statistic ``kappa / delta_0`` of the test ``kappa = 0`` (eq. 12);
* ``p_per``, accuracy of the Persistent (No-Change) classifier (eq. 7) and the
  Kappa-Temporal statistic ``kappa_per = (p - p_per) / (1 - p_per)`` (eq. 13);
* ``kappa_plus = sqrt(max(0, kappa) max(0, kappa_per))`` (eq. 14);
* ``p_maj`` (eq. 6) and ``kappa_m = (p - p_maj) / (1 - p_maj)``, eq. 13 with
  the Majority baseline in place of the Persistent one (the ``kappa_m`` that
  ``prequential-auc.txt`` sect. 5 reports);
* per-class recall and their geometric mean (G-mean).

Naming: ``pitfalls-benchmarking-kappa-temporal.txt`` sect. 3 calls
``(p - p_per) / (1 - p_per)`` the "Kappa Plus" statistic; the journal version
renames it Kappa-Temporal (eq. 13) and uses ``kappa^+`` for the combination of
eq. 14. We follow the journal: ``kappa_per`` is eq. 13, ``kappa_plus`` eq. 14.

Estimators (sect. 4.6). The paper keeps ``3k + 2`` estimators: ``P(i)``,
``P_h(i)`` and the joint ``P(i, i)`` of two consecutive equal labels for each
class, the accuracy and the previous label. We keep the same estimators, with
one generalisation: the joint ``P(i, i)`` counts the events
``y_per == y_true == i`` where ``y_per`` is *the label the No-Change baseline
predicted under the same protocol*. With immediate labels ``y_per = y_{t-1}``
and this is exactly the paper's estimator; with delayed labels ``y_per`` is the
last label the baseline had received when it predicted, so the No-Change
baseline scores ``kappa_per == 0`` exactly under any delay (its ``p`` and
``p_per`` are the same estimate). ``p_maj`` is estimated the same way from the
Majority baseline's predictions ``y_maj``, so its ``kappa_m`` is exactly 0.
Two more per-class estimators (hits) serve recall and G-mean, and one more
scalar the agreement with ``y_maj``. ``p_per = sum_i P(i, i)`` is also kept as
one running sum updated exactly like the accuracy, so that the identities above
hold to the last bit (summing ``k`` floats in another order would not).

Forgetting (``prequential-error-fading-factors.txt`` sect. 3.3): every
estimator is a weighted count with the weights of Algorithm 1 (all 1),
Algorithm 2 (1 inside the last ``w`` observations, a ring buffer whose evicted
observation is subtracted) or Algorithm 3 (``alpha^(i-k)``). Multiplying ``k``
counts by ``alpha`` at every step would cost ``O(k)``; instead the newest
observation gets weight ``alpha^-(i-1)`` and all estimates are ratios, so the
common factor cancels (every stored value is rescaled once the weight exceeds
``1e100``). The effective number of observations ``n`` is the count, ``min(w, i)``
or ``N_alpha(i)`` of eq. 1. A fading factor of 1 gives the whole-history counts.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from streameval.pipeline.metrics.forgetting import Forgetting

NAN = float("nan")
RESCALE_ABOVE = 1e100  # lazy fading scale: renormalise stored weights above this


def ratio(num: float, den: float) -> float:
    """``num / den``, ``nan`` when the denominator is 0 (an undefined statistic)."""
    return num / den if den != 0 else NAN


def kappa_plus(kappa: float, kappa_per: float) -> float:
    """Eq. 14: ``sqrt(max(0, kappa) max(0, kappa_per))``; nan if either input is nan.

    >>> kappa_plus(0.64, 0.25), kappa_plus(0.5, -0.1)
    (0.4, 0.0)
    """
    if math.isnan(kappa) or math.isnan(kappa_per):
        return NAN
    return math.sqrt(max(0.0, kappa) * max(0.0, kappa_per))


def kappa_stats(p: float, p_ran: float, p_per: float, p_maj: float, n: float) -> dict[str, float]:
    """The Kappa family from the four accuracies and the effective sample size.

    Eq. 10-14 of ``temporal-dependence-evaluation-journal.txt``; ``n`` is the
    ``N`` of eq. 11-12. Undefined values (a zero denominator) are nan.

    >>> s = kappa_stats(p=0.75, p_ran=0.5, p_per=0.5, p_maj=0.5, n=4)
    >>> s["kappa"], s["kappa_per"], s["kappa_plus"], s["kappa_m"]
    (0.5, 0.5, 0.5, 0.5)
    """
    kappa = ratio(p - p_ran, 1.0 - p_ran)
    var = ratio(p * (1.0 - p), n * (1.0 - p_ran) ** 2)  # eq. 11, squared
    var0 = ratio(p_ran, n * (1.0 - p_ran))  # eq. 12, squared
    kappa_per = ratio(p - p_per, 1.0 - p_per)
    return {
        "kappa": kappa,
        "kappa_se": math.sqrt(var) if var >= 0.0 else NAN,
        "kappa_z": ratio(kappa, math.sqrt(var0)) if var0 >= 0.0 else NAN,
        "kappa_per": kappa_per,
        "kappa_plus": kappa_plus(kappa, kappa_per),
        "kappa_m": ratio(p - p_maj, 1.0 - p_maj),
    }


class ClassificationMetrics:
    """Accuracy, Kappa, Kappa-Temporal, Kappa+, Kappa-M, recall and G-mean.

    ``update(y_true, y_pred, y_per, y_maj)`` takes one labelled instance: the
    true label, the evaluated prediction, the No-Change baseline's prediction
    and the Majority baseline's prediction under the same protocol. Any of the
    three predictions may be ``None`` (nothing could be predicted yet): it is
    a wrong prediction and adds to no class of the prediction marginal
    ``P_h``. Classes are discovered as they appear.

    >>> m = ClassificationMetrics()
    >>> y = ["a", "a", "b", "b"]
    >>> pred = ["a", "b", "b", "b"]
    >>> per = [None, "a", "a", "b"]  # the previous label
    >>> maj = [None, "a", "a", "a"]  # majority so far (tie a/b -> a)
    >>> for args in zip(y, pred, per, maj):
    ...     m.update(*args)
    >>> s = m.get()
    >>> s["accuracy"], s["p_ran"], s["kappa"]  # p_ran = .5*.25 + .5*.75
    (0.75, 0.5, 0.5)
    >>> s["p_per"], s["kappa_per"], s["p_maj"], s["kappa_m"]
    (0.5, 0.5, 0.25, 0.6666666666666666)
    >>> s["recall"], round(s["gmean"], 4)
    ({'a': 0.5, 'b': 1.0}, 0.7071)
    """

    def __init__(self, forgetting: Forgetting = Forgetting.whole()) -> None:  # noqa: B008
        self.forgetting = forgetting
        self._fading = forgetting.kind == "fading"
        self._alpha = float(forgetting.alpha) if self._fading else 1.0  # type: ignore[arg-type]
        self._size = int(forgetting.window) if forgetting.kind == "window" else 0  # type: ignore[arg-type]
        self._ring: list[tuple[Hashable, Hashable, Hashable, Hashable] | None] | None = (
            [None] * self._size if self._size else None
        )
        self._pos = 0
        self._g = 1.0  # weight of the next observation
        self._last = 1.0  # weight of the newest observation (1 once rescaled)
        self._n = 0.0  # sum of weights
        self._correct = 0.0  # [y_pred == y_true]
        self._maj = 0.0  # [y_maj == y_true]
        self._per_total = 0.0  # [y_per == y_true] = sum_i P(i, i), see get()
        self._true: dict[Hashable, float] = {}  # P(i)
        self._pred: dict[Hashable, float] = {}  # P_h(i)
        self._per: dict[Hashable, float] = {}  # P(i, i): [y_per == y_true == i]
        self._hit: dict[Hashable, float] = {}  # [y_pred == y_true == i] (recall)

    def update(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None,
        y_maj: Hashable | None,
    ) -> None:
        if y_true is None:
            raise ValueError("y_true must be a label, got None")
        ring = self._ring
        if ring is not None:
            pos = self._pos
            old = ring[pos]
            if old is not None:
                self._evict(*old)
            ring[pos] = (y_true, y_pred, y_per, y_maj)
            pos += 1
            self._pos = 0 if pos == self._size else pos
        g = self._g
        self._n += g
        true = self._true
        true[y_true] = true.get(y_true, 0.0) + g
        if y_pred is not None:
            pred = self._pred
            pred[y_pred] = pred.get(y_pred, 0.0) + g
            if y_pred == y_true:
                self._correct += g
                hit = self._hit
                hit[y_true] = hit.get(y_true, 0.0) + g
        if y_per == y_true:
            self._per_total += g
            per = self._per
            per[y_true] = per.get(y_true, 0.0) + g
        if y_maj == y_true:
            self._maj += g
        if self._fading:
            self._last = g
            if g > RESCALE_ABOVE:
                self._rescale(g)
            self._g = self._last / self._alpha

    def _evict(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None,
        y_maj: Hashable | None,
    ) -> None:
        """Algorithm 2: subtract the observation leaving the window (weight 1)."""
        self._n -= 1.0
        self._true[y_true] -= 1.0
        if y_pred is not None:
            self._pred[y_pred] -= 1.0
            if y_pred == y_true:
                self._correct -= 1.0
                self._hit[y_true] -= 1.0
        if y_per == y_true:
            self._per_total -= 1.0
            self._per[y_true] -= 1.0
        if y_maj == y_true:
            self._maj -= 1.0

    def _rescale(self, g: float) -> None:
        """Divide every stored weight by ``g`` so that the newest one is 1."""
        self._n /= g
        self._correct /= g
        self._maj /= g
        self._per_total /= g
        for d in (self._true, self._pred, self._per, self._hit):
            for key in d:
                d[key] /= g
        self._last = 1.0

    @property
    def n(self) -> float:
        """Effective number of observations: count, ``min(w, i)`` or ``N_alpha``."""
        return self._n / self._last

    def get(self) -> dict[str, Any]:
        """All statistics; undefined values (a zero denominator) are ``nan``.

        Scalars: ``n``, ``accuracy``, ``error``, ``p_ran``, ``p_per``, ``p_maj``,
        ``kappa``, ``kappa_se``, ``kappa_z``, ``kappa_per``, ``kappa_plus``,
        ``kappa_m``, ``gmean``. Dicts keyed by every class seen as a true
        label: ``recall`` (nan for a class with no weight left in the window),
        ``priors`` (``P(i)``) and ``p_per_joint`` (``P(i, i)``, summing to
        ``p_per``). ``gmean`` is over the classes with a positive weight.
        """
        total = self._n
        true = self._true
        recall = {c: ratio(self._hit.get(c, 0.0), t) for c, t in true.items()}
        present = [r for c, r in recall.items() if true[c] > 0.0]
        if total <= 0.0:
            p = p_ran = p_per = p_maj = NAN
            priors = dict.fromkeys(true, NAN)
            joint = dict.fromkeys(true, NAN)
        else:
            pred = self._pred
            p = self._correct / total
            p_ran = sum(t * pred.get(c, 0.0) for c, t in true.items()) / (total * total)
            # sum_i P(i, i), accumulated in one running sum exactly like the
            # accuracy, so a learner predicting y_per gets kappa_per == 0.0
            p_per = self._per_total / total
            p_maj = self._maj / total
            priors = {c: t / total for c, t in true.items()}
            joint = {c: self._per.get(c, 0.0) / total for c in true}
        n = self.n
        stats = kappa_stats(p, p_ran, p_per, p_maj, n)
        return {
            "n": n,
            "accuracy": p,
            "error": 1.0 - p,
            "kappa": stats["kappa"],
            "kappa_se": stats["kappa_se"],
            "kappa_z": stats["kappa_z"],
            "p_ran": p_ran,
            "p_per": p_per,
            "p_per_joint": joint,
            "p_maj": p_maj,
            "kappa_per": stats["kappa_per"],
            "kappa_plus": stats["kappa_plus"],
            "kappa_m": stats["kappa_m"],
            "recall": recall,
            "gmean": geometric_mean(present),
            "priors": priors,
        }


def geometric_mean(values: list[float]) -> float:
    """Geometric mean of non-negative values; nan for an empty list or a nan value.

    >>> geometric_mean([0.5, 0.5]), geometric_mean([1.0, 0.0]), geometric_mean([])
    (0.5, 0.0, nan)
    """
    if not values or any(math.isnan(v) for v in values):
        return NAN
    product = math.prod(values)
    if product > 0.0 or min(values) <= 0.0:
        return product ** (1.0 / len(values))
    # the product underflowed although every value is positive
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))
