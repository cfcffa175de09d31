"""Prequential metrics: one ``update`` / ``revert`` / ``get`` protocol, as in River.

* the state: :class:`ConfusionMatrix` (classes appear over time; also the hits of the
  No-Change and Majority references), :class:`~streameval.pipeline.metrics.base.Sums`
  (a few weighted sums: :class:`Mean`, :class:`Errors`, the comparisons' losses);
* the metrics read from it: :class:`Accuracy`, :class:`CohenKappa`,
  :class:`KappaTemporal`, :class:`KappaM`, :class:`KappaPlus`, :class:`GMean`,
  :class:`MAE`, :class:`RMSE`, :class:`AUC` (ties counted half);
* forgetting for any of them (``prequential-error-fading-factors.txt``):
  :class:`Rolling` (sliding window, Algorithm 2) and :class:`Faded` (fading factor,
  Algorithm 3), named by one :class:`Forgetting` setting;
* the sets an experiment records, built from those pieces:
  :class:`ClassificationMetrics`, :class:`BinnedClassificationMetrics`,
  :class:`RegressionMetrics`, :class:`BinnedRegressionMetrics`,
  :class:`PrequentialAUC` (sliding window only), :class:`QStatistic`,
  :class:`SignedMcNemar`.

>>> from streameval.pipeline.metrics import ConfusionMatrix, CohenKappa, KappaTemporal, Rolling
>>> cm = ConfusionMatrix()  # shared: update it once, read every metric
>>> kappa, kappa_per = CohenKappa(cm), KappaTemporal(cm)
>>> window = Rolling(cm, window=3)
>>> y = ["a", "a", "b", "b", "b"]
>>> for t, (label, y_pred) in enumerate(zip(y, ["a", "b", "b", "a", "b"])):
...     window.update(label, y_pred, y[t - 1] if t else None)
>>> kappa.get(), kappa_per.get()  # last 3: b/b, b/a, b/b; No-Change: a, b, b
(0.0, 0.0)
"""

from streameval.pipeline.metrics.auc import AUC, PrequentialAUC
from streameval.pipeline.metrics.binned import BinnedClassificationMetrics, BinnedRegressionMetrics
from streameval.pipeline.metrics.classification import ClassificationMetrics
from streameval.pipeline.metrics.comparison import QStatistic, SignedMcNemar
from streameval.pipeline.metrics.confusion import ConfusionMatrix
from streameval.pipeline.metrics.faded import Faded
from streameval.pipeline.metrics.forgetting import (
    CumulativeMean,
    FadingMean,
    Forgetting,
    Mean,
    MeanEstimator,
    WindowMean,
)
from streameval.pipeline.metrics.kappa import (
    Accuracy,
    CohenKappa,
    GMean,
    KappaM,
    KappaPlus,
    KappaTemporal,
)
from streameval.pipeline.metrics.regression import MAE, RMSE, Errors, RegressionMetrics
from streameval.pipeline.metrics.rolling import Rolling

__all__ = [
    "AUC",
    "MAE",
    "RMSE",
    "Accuracy",
    "BinnedClassificationMetrics",
    "BinnedRegressionMetrics",
    "ClassificationMetrics",
    "CohenKappa",
    "ConfusionMatrix",
    "CumulativeMean",
    "Errors",
    "Faded",
    "FadingMean",
    "Forgetting",
    "GMean",
    "KappaM",
    "KappaPlus",
    "KappaTemporal",
    "Mean",
    "MeanEstimator",
    "PrequentialAUC",
    "QStatistic",
    "RegressionMetrics",
    "Rolling",
    "SignedMcNemar",
    "WindowMean",
]
