"""Accuracy, the Kappa family and G-mean, each read from a confusion matrix.

Zliobaite, Bifet, Read, Pfahringer & Holmes, *Evaluation methods and decision
theory for classification of streaming data with temporal dependence*
(``temporal-dependence-evaluation-journal.txt``), sect. 4:

* :class:`Accuracy` ``p``;
* :class:`CohenKappa` ``kappa = (p - p_ran) / (1 - p_ran)`` (eq. 10) with
  ``p_ran = sum_i P(i) P_h(i)`` (eq. 9), its standard error (eq. 11) and the z
  statistic ``kappa / delta_0`` of the test ``kappa = 0`` (eq. 12);
* :class:`KappaTemporal` ``kappa_per = (p - p_per) / (1 - p_per)`` (eq. 13), with
  ``p_per`` the accuracy of the Persistent (No-Change) classifier (eq. 7);
* :class:`KappaPlus` ``kappa^+ = sqrt(max(0, kappa) max(0, kappa_per))`` (eq. 14);
* :class:`KappaM` ``kappa_m = (p - p_maj) / (1 - p_maj)``, eq. 13 with the Majority
  classifier (eq. 6) in place of the Persistent one (the ``kappa_m`` of
  ``prequential-auc.txt`` sect. 5);
* :class:`GMean`, the geometric mean of the per-class recalls
  (``prequential-auc.txt`` sect. 2).

Naming: ``pitfalls-benchmarking-kappa-temporal.txt`` sect. 3 calls
``(p - p_per) / (1 - p_per)`` the "Kappa Plus" statistic; the journal version
renames it Kappa-Temporal (eq. 13) and uses ``kappa^+`` for the combination of
eq. 14. We follow the journal.

Each metric works on its own (``m = KappaTemporal(); m.update(...); m.get()``) or
reads a :class:`~streameval.pipeline.metrics.confusion.ConfusionMatrix` shared with
others (``cm=``, as in River): then update the matrix once and read every metric,
so that nothing is counted twice. Undefined values (a zero denominator) are ``nan``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from streameval.pipeline.metrics.base import NAN, ratio
from streameval.pipeline.metrics.confusion import ConfusionMatrix


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

    Eq. 10-14; ``n`` is the ``N`` of eq. 11-12.

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


class ConfusionMetric:
    """A metric read from a :class:`ConfusionMatrix` (its own, or ``cm`` shared).

    ``update`` / ``revert`` go to the matrix, and so do the ``unit`` and ``rescale``
    of lazy fading, so ``Rolling(metric, w)`` and ``Faded(metric, alpha)`` work on
    any subclass.
    """

    def __init__(self, cm: ConfusionMatrix | None = None) -> None:
        self.cm = ConfusionMatrix() if cm is None else cm

    def update(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None = None,
        y_maj: Hashable | None = None,
        w: float = 1.0,
    ) -> None:
        self.cm.update(y_true, y_pred, y_per, y_maj, w)

    def revert(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None = None,
        y_maj: Hashable | None = None,
        w: float = 1.0,
    ) -> None:
        self.cm.revert(y_true, y_pred, y_per, y_maj, w)

    @property
    def unit(self) -> float:
        return self.cm.unit

    @unit.setter
    def unit(self, value: float) -> None:
        self.cm.unit = value

    def rescale(self, g: float) -> None:
        self.cm.rescale(g)

    def get(self) -> float:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}: {self.get():.6g}"


class Accuracy(ConfusionMetric):
    """Share of right predictions ``p``.

    >>> m = Accuracy()
    >>> for y, y_pred in [("a", "a"), ("a", None), ("b", "b"), ("b", "a")]:
    ...     m.update(y, y_pred)
    >>> m.get()
    0.5
    """

    def get(self) -> float:
        return self.cm.rates()[0]


class CohenKappa(ConfusionMetric):
    """Cohen's kappa (eq. 10), with its standard error ``se`` (eq. 11) and ``z`` (eq. 12).

    >>> m = CohenKappa()
    >>> for y, y_pred in [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b")]:
    ...     m.update(y, y_pred)
    >>> m.p_ran, m.get()  # p_ran = .5 * .25 + .5 * .75; (.75 - .5) / .5
    (0.5, 0.5)
    >>> m.se, round(m.z, 4)  # sqrt(.75 * .25 / (4 * .25)); .5 / sqrt(.5 / (4 * .5))
    (0.4330127018922193, 1.0)
    """

    def _stats(self) -> dict[str, float]:
        p, p_ran, p_per, p_maj = self.cm.rates()
        return kappa_stats(p, p_ran, p_per, p_maj, self.cm.n)

    @property
    def p_ran(self) -> float:
        """Accuracy of the Random classifier (eq. 9)."""
        return self.cm.rates()[1]

    @property
    def se(self) -> float:
        return self._stats()["kappa_se"]

    @property
    def z(self) -> float:
        return self._stats()["kappa_z"]

    def get(self) -> float:
        return self._stats()["kappa"]


class KappaTemporal(ConfusionMetric):
    """Kappa-Temporal ``kappa_per`` (eq. 13): the gain over the No-Change classifier.

    ``y_per`` is what No-Change predicted: the previous label, with immediate labels.

    >>> m = KappaTemporal()
    >>> y = ["a", "a", "b", "b"]
    >>> for t, (label, y_pred) in enumerate(zip(y, ["a", "b", "b", "b"])):
    ...     m.update(label, y_pred, y_per=y[t - 1] if t else None)
    >>> m.p_per, m.get()  # p = .75, p_per = .5: (.75 - .5) / .5
    (0.5, 0.5)
    """

    @property
    def p_per(self) -> float:
        return self.cm.rates()[2]

    def get(self) -> float:
        p, _, p_per, _ = self.cm.rates()
        return ratio(p - p_per, 1.0 - p_per)


class KappaM(ConfusionMetric):
    """Kappa-M: eq. 13 against the Majority classifier's predictions ``y_maj``.

    >>> m = KappaM()
    >>> for y, y_pred, y_maj in [("a", "a", None), ("a", "b", "a"), ("b", "b", "a")]:
    ...     m.update(y, y_pred, y_maj=y_maj)
    >>> round(m.get(), 12)  # p = 2/3, p_maj = 1/3: (1/3) / (2/3)
    0.5
    """

    @property
    def p_maj(self) -> float:
        return self.cm.rates()[3]

    def get(self) -> float:
        p, _, _, p_maj = self.cm.rates()
        return ratio(p - p_maj, 1.0 - p_maj)


class KappaPlus(ConfusionMetric):
    """The combined ``kappa^+ = sqrt(max(0, kappa) max(0, kappa_per))`` (eq. 14).

    >>> m = KappaPlus()
    >>> y = ["a", "a", "b", "b"]
    >>> for t, (label, y_pred) in enumerate(zip(y, ["a", "b", "b", "b"])):
    ...     m.update(label, y_pred, y_per=y[t - 1] if t else None)
    >>> m.get()  # kappa = .5, kappa_per = .5
    0.5
    """

    def get(self) -> float:
        p, p_ran, p_per, _ = self.cm.rates()
        return kappa_plus(ratio(p - p_ran, 1.0 - p_ran), ratio(p - p_per, 1.0 - p_per))


class GMean(ConfusionMetric):
    """Geometric mean of the recalls of the classes with weight (``recall`` per class).

    >>> m = GMean()
    >>> for y, y_pred in [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b")]:
    ...     m.update(y, y_pred)
    >>> m.recall, round(m.get(), 4)  # sqrt(.5 * 1)
    ({'a': 0.5, 'b': 1.0}, 0.7071)
    """

    @property
    def recall(self) -> dict[Hashable, float]:
        return self.cm.recall()

    def get(self) -> float:
        true = self.cm.true
        return geometric_mean([r for c, r in self.cm.recall().items() if true[c] > 0.0])
