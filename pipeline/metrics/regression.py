"""Prequential MAE and RMSE with whole, window or fading forgetting.

The errors are averaged with the estimators of
``prequential-error-fading-factors.txt`` Algorithms 1-3 (``forgetting.py``),
with the loss ``|y - yhat|`` for MAE and ``(y - yhat)^2`` for RMSE.

A ``None`` prediction (nothing could be predicted yet) adds no error and no
weight but still takes one slot of the window: :class:`Errors` sums ``m_i |e_i|``,
``m_i e_i^2`` and the indicator ``m_i`` of a prediction, and each metric divides the
mean of the first two by the mean of ``m``, over exactly the same observations.
"""

from __future__ import annotations

import math

from streameval.pipeline.metrics.base import NAN, Sums
from streameval.pipeline.metrics.forgetting import Forgetting


class Errors(Sums):
    """Sums of ``[has prediction, |e|, e^2]`` and their weight; ``get`` gives all three.

    >>> e = Errors()
    >>> for y, yhat in [(1.0, 2.0), (3.0, 0.0), (2.0, None)]:
    ...     e.update(y, yhat)
    >>> e.get()  # mae (1 + 3) / 2, rmse sqrt((1 + 9) / 2)
    {'n': 2.0, 'mae': 2.0, 'rmse': 2.23606797749979}
    """

    size = 3

    def values(self, y_true: float, y_pred: float | None) -> tuple[float, float, float]:
        if y_pred is None:
            return (0.0, 0.0, 0.0)
        e = y_true - y_pred
        return (1.0, abs(e), e * e)

    def get(self) -> dict[str, float]:
        has = self.mean(0)
        if not has > 0.0:  # no prediction in the window, or no observation (nan)
            return {"n": 0.0, "mae": NAN, "rmse": NAN}
        # window sums of floats may round slightly below 0 when all errors left
        mse = max(0.0, self.mean(2)) / has
        return {
            "n": has * self.weight,
            "mae": max(0.0, self.mean(1)) / has,
            "rmse": math.sqrt(mse),
        }


class MAE(Errors):
    """Mean absolute error of the predictions made.

    >>> m = MAE()
    >>> for y, yhat in [(1.0, 2.0), (3.0, 0.0), (2.0, None)]:
    ...     m.update(y, yhat)
    >>> m.get()
    2.0
    """

    def get(self) -> float:  # type: ignore[override]
        return super().get()["mae"]


class RMSE(Errors):
    """Root mean squared error of the predictions made.

    >>> m = RMSE()
    >>> for y, yhat in [(1.0, 2.0), (3.0, 0.0), (2.0, None)]:
    ...     m.update(y, yhat)
    >>> m.get()  # sqrt((1 + 9) / 2)
    2.23606797749979
    """

    def get(self) -> float:  # type: ignore[override]
        return super().get()["rmse"]


class RegressionMetrics:
    """MAE and RMSE of a stream regressor.

    >>> m = RegressionMetrics()
    >>> for y, yhat in [(1.0, 2.0), (3.0, 0.0), (2.0, None)]:
    ...     m.update(y, yhat)
    >>> m.get()  # mae (1 + 3) / 2, rmse sqrt((1 + 9) / 2)
    {'n': 2.0, 'mae': 2.0, 'rmse': 2.23606797749979}
    """

    def __init__(self, forgetting: Forgetting = Forgetting.whole()) -> None:  # noqa: B008
        self.forgetting = forgetting
        self.errors = Errors()
        self._feed = forgetting.wrap(self.errors, rebuild=True)

    def update(self, y_true: float, y_pred: float | None) -> None:
        self._feed.update(y_true, y_pred)

    def get(self) -> dict[str, float]:
        return self.errors.get()
