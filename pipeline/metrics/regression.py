"""Prequential MAE and RMSE with whole, window or fading forgetting.

The errors are averaged with the estimators of
``prequential-error-fading-factors.txt`` Algorithms 1-3 (``forgetting.py``),
with the loss ``|y - yhat|`` for MAE and ``(y - yhat)^2`` for RMSE.

A ``None`` prediction (nothing could be predicted yet) adds no error and no
weight but still takes one slot of the window: each estimator averages
``m_i * e_i`` and a third one averages the indicator ``m_i`` of a prediction,
so ``MAE = mean(m |e|) / mean(m)`` over exactly the same observations.
"""

from __future__ import annotations

import math

from streameval.pipeline.metrics.forgetting import Forgetting


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
        self._has = forgetting.make_mean()
        self._abs = forgetting.make_mean()
        self._sq = forgetting.make_mean()

    def update(self, y_true: float, y_pred: float | None) -> None:
        if y_pred is None:
            self._has.update(0.0)
            self._abs.update(0.0)
            self._sq.update(0.0)
            return
        e = y_true - y_pred
        self._has.update(1.0)
        self._abs.update(abs(e))
        self._sq.update(e * e)

    def get(self) -> dict[str, float]:
        has = self._has.get()
        if not has > 0.0:  # no prediction in the window, or no observation (nan)
            return {"n": 0.0, "mae": math.nan, "rmse": math.nan}
        # window sums of floats may round slightly below 0 when all errors left
        mse = max(0.0, self._sq.get()) / has
        return {
            "n": has * self._has.n,
            "mae": max(0.0, self._abs.get()) / has,
            "rmse": math.sqrt(mse),
        }
