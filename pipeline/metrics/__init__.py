"""Prequential metrics: the Kappa family with baselines, binned, regression, AUC, comparison.

Every metric takes a :class:`Forgetting` setting (whole history, sliding
window or fading factor, Algorithms 1-3 of
``prequential-error-fading-factors.txt``) except :class:`PrequentialAUC`,
which is defined over a sliding window only.
"""

from streameval.pipeline.metrics.auc import PrequentialAUC
from streameval.pipeline.metrics.binned import BinnedClassificationMetrics, BinnedRegressionMetrics
from streameval.pipeline.metrics.classification import ClassificationMetrics
from streameval.pipeline.metrics.comparison import QStatistic, SignedMcNemar
from streameval.pipeline.metrics.forgetting import (
    CumulativeMean,
    FadingMean,
    Forgetting,
    MeanEstimator,
    WindowMean,
)
from streameval.pipeline.metrics.regression import RegressionMetrics

__all__ = [
    "BinnedClassificationMetrics",
    "BinnedRegressionMetrics",
    "ClassificationMetrics",
    "CumulativeMean",
    "FadingMean",
    "Forgetting",
    "MeanEstimator",
    "PrequentialAUC",
    "QStatistic",
    "RegressionMetrics",
    "SignedMcNemar",
    "WindowMean",
]
