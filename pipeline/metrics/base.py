"""The metric protocol: ``update`` / ``revert`` / ``get`` over a weighted state.

Every metric of this package follows River's protocol (``river.metrics``):
``update(*observation, w=1.0)`` adds one observation with weight ``w``,
``revert(*observation, w=1.0)`` takes it back out, ``get()`` reads the value.
Forgetting is not built into the metrics: :class:`~streameval.pipeline.metrics.rolling.Rolling`
gives any metric its sliding-window estimate through ``revert`` and
:class:`~streameval.pipeline.metrics.faded.Faded` its fading-factor estimate through the
weights ``w`` (``prequential-error-fading-factors.txt``, Algorithms 2 and 3).

Two kinds of state are faded:

* :class:`Sums` -- a handful of weighted sums and their total weight (a mean, the
  errors of a regressor, the losses of two learners). Faded *eagerly*, as Algorithm 3
  is written: every sum is multiplied by ``alpha`` before the next observation is
  added (``fade``).
* a state whose size grows with the classes (a confusion matrix). Faded *lazily* in
  ``O(1)`` per update: observation ``i`` is added with weight ``alpha^-(i-1)``, the
  state's ``unit`` (the weight one fresh observation counts as) follows it, and every
  statistic is a ratio of weights, so the common factor cancels; ``rescale(g)``
  divides every stored weight by ``g`` before they overflow.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

NAN = float("nan")
#: Lazy fading: stored weights are divided by the newest one once it exceeds this.
RESCALE_ABOVE = 1e100


def ratio(num: float, den: float) -> float:
    """``num / den``, ``nan`` when the denominator is 0 (an undefined statistic).

    >>> ratio(1.0, 4.0), ratio(1.0, 0.0)
    (0.25, nan)
    """
    return num / den if den != 0 else NAN


class Metric(Protocol):
    """What :class:`Rolling` needs: ``update`` and ``revert`` with the same arguments."""

    def update(self, *args: Any, w: float = 1.0) -> None: ...

    def revert(self, *args: Any, w: float = 1.0) -> None: ...

    def get(self) -> Any: ...


class Sums:
    """Weighted sums of the ``values`` of each observation, with their total ``weight``.

    Subclasses say which values an observation contributes (``values``) and what is
    read from the sums (``get``). Sums of floats lose low bits when a value is
    reverted, so a :class:`Rolling` window over them nets the leaving and the arriving
    value first (``replace``: ``S + (e_i - e_{i-w})``, which leaves ``S`` exactly
    unchanged when the two are equal) and is rebuilt once per turn of the window
    (``Rolling(..., rebuild=True)``).

    >>> class Total(Sums):
    ...     size = 1
    ...     def values(self, x): return (x,)
    ...     def get(self): return self.sums[0]
    >>> t = Total()
    >>> t.update(2.0); t.update(1.0, w=3.0); t.revert(2.0)
    >>> t.get(), t.weight
    (3.0, 3.0)
    """

    #: :class:`Faded` multiplies these sums by ``alpha`` at every step (Algorithm 3).
    eager_fading = True
    #: How many values one observation contributes.
    size = 0

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to no observation."""
        self.sums: list[float] = [0.0] * self.size
        self.weight = 0.0

    def values(self, *args: Any) -> Sequence[float]:
        raise NotImplementedError

    def update(self, *args: Any, w: float = 1.0) -> None:
        values = self.values(*args)
        if w != 1.0:
            values = [w * x for x in values]
        self.sums = list(map(operator.add, self.sums, values))
        self.weight += w

    def revert(self, *args: Any, w: float = 1.0) -> None:
        values = self.values(*args)
        if w != 1.0:
            values = [w * x for x in values]
        self.sums = list(map(operator.sub, self.sums, values))
        self.weight -= w

    def replace(self, old: Sequence[Any], new: Sequence[Any]) -> None:
        """Revert ``old`` and add ``new`` (both of weight 1) in one step."""
        delta = map(operator.sub, self.values(*new), self.values(*old))
        self.sums = list(map(operator.add, self.sums, delta))

    def rebuild(self, items: Iterable[Sequence[Any]]) -> None:
        """Recompute the sums from the observations ``items`` (each of weight 1), as
        ``Rolling(..., rebuild=True)`` does once per turn of its window."""
        rows = [self.values(*item) for item in items]
        self.sums = (
            [float(sum(column)) for column in zip(*rows, strict=True)]
            if rows
            else [0.0] * self.size
        )
        self.weight = float(len(rows))

    def fade(self, alpha: float) -> None:
        """Multiply every stored weight by ``alpha`` (Algorithm 3, before adding ``e_i``)."""
        self.sums = [alpha * s for s in self.sums]
        self.weight = alpha * self.weight

    def mean(self, i: int) -> float:
        """The weighted mean of value ``i`` (``nan`` before any weight)."""
        weight = self.weight
        return self.sums[i] / weight if weight else NAN
