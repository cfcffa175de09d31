"""Whole, window and fading estimates of weighted counts, from arrays.

``prequential-error-fading-factors.txt`` sect. 3.3: the whole-history sum
(Algorithm 1), the sum over the last ``w`` observations (Algorithm 2) and the
fading sum ``S(i) = e_i + alpha S(i-1)`` (Algorithm 3, eq. 1). The per-event
metrics compute them with float recursions; these functions give the same floats:

* counts of 0/1 observations are whole numbers, exact in any order, so the whole
  and window estimates are counts of the array or of its last ``w`` entries;
* a confusion matrix is faded lazily (:class:`~streameval.pipeline.metrics.faded.Faded`):
  observation ``i`` weighs ``g_i = g_{i-1} / alpha`` and every weight is divided by
  ``g_i`` once it passes ``1e100``. :func:`lazy_weights` gives the ``g_i`` with a
  sequential ``divide.accumulate`` and :func:`lazy_sum` adds them in stream order
  with ``add.accumulate`` (both sequential in numpy, as the recursion is);
  :class:`LazyFade` carries that state from one segment of the stream to the next;
* the sums of two learners' losses are faded eagerly, ``alpha * S + e``:
  :class:`EagerFade` runs that recursion as written (a tight loop over floats).

>>> g, rescaled = lazy_weights(3, 0.5)
>>> g.tolist(), rescaled
([1.0, 2.0, 4.0], [])
>>> lazy_sum(g, rescaled, np.array([True, False, True]))
5.0
>>> fade = EagerFade(0.5)
>>> fade.extend(3, {"e": [1.0, 0.0, 1.0]})  # ((1 * .5) + 0) * .5 + 1
>>> fade.sums["e"], fade.weight
(1.25, 1.75)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from streameval.pipeline.metrics.base import RESCALE_ABOVE


def lazy_weights(n: int, alpha: float, first: float = 1.0) -> tuple[np.ndarray, list[int]]:
    """The weights ``Faded`` gives ``n`` observations of a lazily faded state whose next
    observation weighs ``first``, and the indices after which it rescaled (divided every
    weight by that ``g_i``)."""
    g = np.empty(n)
    rescaled: list[int] = []
    # a rescale is due after about log(1e100) / -log(alpha) steps
    span = n if alpha >= 1.0 else min(n, int(math.log(RESCALE_ABOVE) / -math.log(alpha)) + 16)
    i = 0
    with np.errstate(over="ignore"):
        while i < n:
            m = min(span, n - i)
            steps = np.full(m, alpha)
            steps[0] = first
            seg = np.divide.accumulate(steps)
            over = np.flatnonzero(seg > RESCALE_ABOVE)
            if over.size:
                j = int(over[0])
                g[i : i + j + 1] = seg[: j + 1]
                rescaled.append(i + j)
                i, first = i + j + 1, 1.0 / alpha  # the unit is 1 after a rescale
            else:
                g[i : i + m] = seg
                i, first = i + m, seg[-1] / alpha
    return g, rescaled


def lazy_sum(g: np.ndarray, rescaled: list[int], mask: np.ndarray, start: float = 0.0) -> float:
    """``start`` plus the lazily faded weight of the observations in ``mask``, added in
    stream order and divided at every rescale, as the per-event counts are."""
    total = start
    begin = 0
    ends = rescaled if rescaled and rescaled[-1] == len(g) - 1 else [*rescaled, len(g) - 1]
    last = rescaled[-1] if rescaled else -1
    for end in ends:
        part = g[begin : end + 1][mask[begin : end + 1]]
        if part.size:
            total = float(np.add.accumulate(np.concatenate(([total], part)))[-1])
        if end <= last and end in rescaled:
            total = total / g[end]
        begin = end + 1
    return total


def final_unit(g: np.ndarray, rescaled: list[int], before: float = 1.0) -> float:
    """The weight one observation counts as after the last of ``g`` (``Faded``'s unit);
    ``before`` when ``g`` is empty."""
    if len(g) == 0:
        return before
    return 1.0 if rescaled and rescaled[-1] == len(g) - 1 else float(g[-1])


class LazyFade:
    """The lazily faded weight of named 0/1 masks, extended a segment at a time.

    The state :class:`~streameval.pipeline.metrics.faded.Faded` keeps for a lazily faded
    count (Algorithm 3): the weight of the next observation (``next``), the weight one
    observation counts as now (``unit``), the total weight and every named sum.
    :meth:`extend` adds a segment of observations, each sum receiving the weights of the
    observations its mask holds, in stream order, divided where the per-event code
    rescales; so the sums equal the per-event ones to the last bit however the stream is
    cut into segments.

    >>> fade = LazyFade(0.5)
    >>> fade.extend(2, {"a": np.array([True, False])})
    >>> fade.extend(1, {"a": np.array([True])})
    >>> fade.sums["a"], fade.total, fade.unit  # weights 1, 2, 4: "a" holds 1 + 4
    (5.0, 7.0, 4.0)
    """

    def __init__(self, alpha: float) -> None:
        self.alpha = float(alpha)
        self.next = 1.0
        self.unit = 1.0
        self.total = 0.0
        self.sums: dict[Any, float] = {}

    def extend(self, n: int, masks: Mapping[Any, np.ndarray]) -> None:
        """Add ``n`` observations; ``masks[name]`` says which of them count in ``name``
        (a name absent from ``masks`` receives none of them)."""
        if n == 0:
            return
        g, rescaled = lazy_weights(n, self.alpha, self.next)
        self.total = lazy_sum(g, rescaled, np.ones(n, dtype=bool), self.total)
        sums = self.sums
        for name, mask in masks.items():
            sums[name] = lazy_sum(g, rescaled, mask, sums.get(name, 0.0))
        if rescaled:
            none = np.zeros(n, dtype=bool)
            for name in sums.keys() - masks.keys():
                sums[name] = lazy_sum(g, rescaled, none, sums[name])
        self.unit = final_unit(g, rescaled, self.unit)
        self.next = self.unit / self.alpha


class EagerFade:
    """Sums faded eagerly, ``S = alpha * S + e`` (Algorithm 3 as written), and their
    common weight ``N = alpha * N + 1``, extended a segment at a time."""

    def __init__(self, alpha: float) -> None:
        self.alpha = float(alpha)
        self.weight = 0.0
        self.sums: dict[Any, float] = {}

    def extend(self, n: int, values: Mapping[Any, Iterable[float]]) -> None:
        """Add ``n`` observations: ``values[name]`` are the ``n`` observations of sum
        ``name``; every sum must be given, each sum being faded at every step."""
        alpha = self.alpha
        for name, column in values.items():
            s = self.sums.get(name, 0.0)
            for e in column:
                s = alpha * s + e
            self.sums[name] = s
        w = self.weight
        for _ in range(n):
            w = alpha * w + 1.0
        self.weight = w


def window_count(mask: np.ndarray, window: int | None) -> float:
    """How many of the last ``window`` observations (all, for ``None``) are in ``mask``."""
    part = mask if window is None else mask[len(mask) - min(window, len(mask)) :]
    return float(np.count_nonzero(part))
