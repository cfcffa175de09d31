"""One learner's confusion counts, from its arrays, under any prequential estimator.

The per-event :class:`~streameval.pipeline.metrics.confusion.ConfusionMatrix` adds each
scored label's weight to a handful of counts (``total``, ``correct``, the references'
hits, and per class the true label, the prediction, the hits). Here each count is the
estimate (:mod:`~streameval.pipeline.columnar.weights`) of one boolean mask over the
scored labels, and the matrix is filled with them, so the statistics of
:class:`~streameval.pipeline.metrics.classification.ClassificationMetrics` (the Kappa
family of ``temporal-dependence-evaluation-journal.txt`` eq. 6-14) are read by the
very same code. The cells of the joint ``(y, y_pred)`` table are not filled: no
statistic reads them.

>>> from streameval.pipeline.metrics.forgetting import Forgetting
>>> y, pred = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
>>> per, maj = np.array([-1, 0, 0, 1]), np.array([-1, 0, 0, 0])
>>> cm = confusion_matrix(["a", "b"], y, pred, per, maj, Forgetting.whole())
>>> cm.rates()  # the doctest of ClassificationMetrics: p, p_ran, p_per, p_maj
(0.75, 0.5, 0.5, 0.25)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
from streameval.pipeline.columnar.weights import (
    final_unit,
    lazy_sum,
    lazy_weights,
    window_count,
)
from streameval.pipeline.metrics.confusion import ConfusionMatrix
from streameval.pipeline.metrics.forgetting import Forgetting

Estimate = Callable[[np.ndarray], float]


def estimator(forgetting: Forgetting, n: int) -> tuple[Estimate, float]:
    """The weight of a mask over ``n`` scored labels under ``forgetting``, and the unit."""
    if forgetting.kind == "fading":
        assert forgetting.alpha is not None
        g, rescaled = lazy_weights(n, forgetting.alpha)
        return (lambda mask: lazy_sum(g, rescaled, mask)), final_unit(g, rescaled)
    window = forgetting.window if forgetting.kind == "window" else None
    return (lambda mask: window_count(mask, window)), 1.0


def confusion_matrix(
    labels: Sequence[Hashable],
    y: np.ndarray,
    pred: np.ndarray,
    per: np.ndarray,
    maj: np.ndarray,
    forgetting: Forgetting,
    estimate: tuple[Estimate, float] | None = None,
) -> ConfusionMatrix:
    """The matrix the per-event code holds after scoring these arrays of codes
    (``-1``: no prediction); ``labels[c]`` is the label of code ``c``."""
    weigh, unit = estimate or estimator(forgetting, len(y))
    cm = ConfusionMatrix()
    cm.unit = unit
    cm.total = weigh(np.ones(len(y), dtype=bool))
    hit = pred == y
    per_hit = per == y
    cm.correct = weigh(hit)
    cm.per_total = weigh(per_hit)
    cm.maj = weigh(maj == y)
    for code, label in enumerate(labels):
        is_y = y == code
        cm.true[label] = weigh(is_y)
        if (pred == code).any():
            cm.pred[label] = weigh(pred == code)
        if (hit & is_y).any():
            cm.hit[label] = weigh(hit & is_y)
        if (per_hit & is_y).any():
            cm.per[label] = weigh(per_hit & is_y)
    return cm
