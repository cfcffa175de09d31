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
* the sums of two learners' losses are faded eagerly, ``alpha * S + e``:
  :func:`eager_sum` runs that recursion as written (a tight loop over floats).

>>> g, rescaled = lazy_weights(3, 0.5)
>>> g.tolist(), rescaled
([1.0, 2.0, 4.0], [])
>>> lazy_sum(g, rescaled, np.array([True, False, True]))
5.0
>>> eager_sum(0.5, [1.0, 0.0, 1.0])  # ((1 * .5) + 0) * .5 + 1
1.25
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from streameval.pipeline.metrics.base import RESCALE_ABOVE


def lazy_weights(n: int, alpha: float) -> tuple[np.ndarray, list[int]]:
    """The weights ``Faded`` gives observations ``0..n-1`` of a lazily faded state, and
    the indices after which it rescaled (divided every weight by that ``g_i``)."""
    g = np.empty(n)
    rescaled: list[int] = []
    # a rescale is due after about log(1e100) / -log(alpha) steps
    span = n if alpha >= 1.0 else min(n, int(math.log(RESCALE_ABOVE) / -math.log(alpha)) + 16)
    i, first = 0, 1.0
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


def lazy_sum(g: np.ndarray, rescaled: list[int], mask: np.ndarray) -> float:
    """The lazily faded weight of the observations in ``mask``, added in stream order."""
    total = 0.0
    start = 0
    ends = [*rescaled, len(g) - 1] if not rescaled or rescaled[-1] != len(g) - 1 else rescaled
    for end in ends:
        part = g[start : end + 1][mask[start : end + 1]]
        if part.size:
            total = float(np.add.accumulate(np.concatenate(([total], part)))[-1])
        if rescaled and end in rescaled:
            total = total / g[end]
        start = end + 1
    return total


def final_unit(g: np.ndarray, rescaled: list[int]) -> float:
    """The weight one fresh observation counts as after the last one (``Faded``'s unit)."""
    if len(g) == 0:
        return 1.0
    return 1.0 if rescaled and rescaled[-1] == len(g) - 1 else float(g[-1])


def eager_sum(alpha: float, values: Iterable[float], start: float = 0.0) -> float:
    """``S = alpha * S + e`` over ``values`` (Algorithm 3 as written)."""
    s = start
    for e in values:
        s = alpha * s + e
    return s


def window_count(mask: np.ndarray, window: int | None) -> float:
    """How many of the last ``window`` observations (all, for ``None``) are in ``mask``."""
    part = mask if window is None else mask[len(mask) - min(window, len(mask)) :]
    return float(np.count_nonzero(part))
