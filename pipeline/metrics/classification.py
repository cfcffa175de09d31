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

Forgetting (``prequential-error-fading-factors.txt`` sect. 3.3) is not built in:
the counts live in one :class:`~streameval.pipeline.metrics.confusion.ConfusionMatrix`,
fed through :class:`~streameval.pipeline.metrics.rolling.Rolling` (Algorithm 2) or
:class:`~streameval.pipeline.metrics.faded.Faded` (Algorithm 3, lazily weighted) as
:class:`Forgetting` says, and every statistic is read from it as the metrics of
:mod:`~streameval.pipeline.metrics.kappa` read it. The effective number of observations
``n`` is the count, ``min(w, i)`` or ``N_alpha(i)`` of eq. 1.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from streameval.pipeline.metrics.base import NAN, RESCALE_ABOVE, ratio
from streameval.pipeline.metrics.confusion import ConfusionMatrix
from streameval.pipeline.metrics.forgetting import Forgetting
from streameval.pipeline.metrics.kappa import geometric_mean, kappa_plus, kappa_stats

__all__ = [
    "RESCALE_ABOVE",
    "ClassificationMetrics",
    "geometric_mean",
    "kappa_plus",
    "kappa_stats",
    "ratio",
]


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
        self.cm = ConfusionMatrix()
        self._feed = forgetting.wrap(self.cm)

    def update(
        self,
        y_true: Hashable,
        y_pred: Hashable | None,
        y_per: Hashable | None,
        y_maj: Hashable | None,
    ) -> None:
        if y_true is None:  # before a window evicts anything
            raise ValueError("y_true must be a label, got None")
        self._feed.update(y_true, y_pred, y_per, y_maj)

    @property
    def n(self) -> float:
        """Effective number of observations: count, ``min(w, i)`` or ``N_alpha``."""
        return self.cm.n

    def get(self) -> dict[str, Any]:
        """All statistics; undefined values (a zero denominator) are ``nan``.

        Scalars: ``n``, ``accuracy``, ``error``, ``p_ran``, ``p_per``, ``p_maj``,
        ``kappa``, ``kappa_se``, ``kappa_z``, ``kappa_per``, ``kappa_plus``,
        ``kappa_m``, ``gmean``. Dicts keyed by every class seen as a true
        label: ``recall`` (nan for a class with no weight left in the window),
        ``priors`` (``P(i)``) and ``p_per_joint`` (``P(i, i)``, summing to
        ``p_per``). ``gmean`` is over the classes with a positive weight.
        """
        cm = self.cm
        total = cm.total
        true = cm.true
        recall = cm.recall()
        present = [r for c, r in recall.items() if true[c] > 0.0]
        p, p_ran, p_per, p_maj = cm.rates()
        if total <= 0.0:
            priors = dict.fromkeys(true, NAN)
            joint = dict.fromkeys(true, NAN)
        else:
            priors = {c: t / total for c, t in true.items()}
            joint = {c: cm.per.get(c, 0.0) / total for c in true}
        n = cm.n
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
