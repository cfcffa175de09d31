"""Fading-factor estimate of any weighted metric: ``Faded(metric, alpha)``.

Gama, Sebastiao & Rodrigues, *On evaluating stream learning algorithms*
(``prequential-error-fading-factors.txt``), sect. 3.2 and Algorithm 3: the fading
sum ``S_alpha(i) = e_i + alpha S_alpha(i-1)``, the fading increment
``N_alpha(i) = 1 + alpha N_alpha(i-1)`` and the estimate ``S_alpha(i) / N_alpha(i)``
(eq. 1), i.e. observation ``k`` of ``i`` weighs ``alpha^(i-k)``. A fading factor
of 1 is the whole history.

Two ways of giving those weights, chosen by the metric's state
(:mod:`streameval.pipeline.metrics.base`):

* eager (``metric.eager_fading``): ``metric.fade(alpha)`` multiplies every stored
  sum by ``alpha``, then the observation is added with weight 1 -- Algorithm 3 as
  written, for states of a few sums;
* lazy: observation ``i`` is added with weight ``g_i = g_{i-1} / alpha``
  (``alpha^-(i-1)``), ``metric.unit`` is set to ``g_i`` so that the effective
  ``N_alpha(i)`` is the total weight divided by ``unit``, and once ``g_i`` exceeds
  ``1e100`` ``metric.rescale(g_i)`` divides every stored weight by it (``unit``
  becomes 1). Every statistic is a ratio of weights, so the common factor
  ``alpha^-(i-1)`` cancels: ``O(1)`` per update for a state that grows with the
  classes.
"""

from __future__ import annotations

from typing import Any

from streameval.pipeline.metrics.base import RESCALE_ABOVE


class Faded:
    """``metric`` with the weights ``alpha^(i-k)`` of Algorithm 3.

    >>> from streameval.pipeline.metrics.kappa import Accuracy
    >>> acc = Faded(Accuracy(), alpha=0.5)
    >>> for y, y_pred in [("a", "a"), ("a", "b")]:
    ...     acc.update(y, y_pred)
    >>> acc.get()  # (0.5 * 1 + 1 * 0) / (0.5 + 1)
    0.3333333333333333
    """

    def __init__(self, metric: Any, alpha: float) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"fading factor must be in (0, 1], got {alpha}")
        self.eager = bool(getattr(metric, "eager_fading", False))
        if not self.eager and not hasattr(metric, "rescale"):
            raise TypeError(
                f"{type(metric).__name__} has neither fade() nor rescale(): it cannot be faded"
            )
        self.metric = metric
        self.alpha = float(alpha)
        self._next = 1.0  # lazy: the weight of the next observation

    def update(self, *args: Any) -> None:
        metric = self.metric
        if self.eager:
            metric.fade(self.alpha)
            metric.update(*args)
            return
        g = self._next
        metric.update(*args, w=g)
        metric.unit = g
        if g > RESCALE_ABOVE:
            metric.rescale(g)
        self._next = metric.unit / self.alpha

    def get(self) -> Any:
        return self.metric.get()

    def __repr__(self) -> str:
        return f"Faded({self.metric!r}, alpha={self.alpha})"
