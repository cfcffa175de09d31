"""MOA's mapping of an instance's predictions to the bins of its waiting period.

The authors' MOA implementation of continuous re-evaluation
(``delayed-labelling-continuous-reevaluation.txt``, Alg. 1) maps predictions to bins
differently from the time-weighted ``d_D`` of sect. 4.1
(:func:`~streameval.pipeline.reeval.bins.dominant_per_bin`):

* the bin of a re-prediction made at ``t`` is ``1 + floor((t - t0) / (t1 - t0) * B)``
  (``t0`` the first prediction's time, ``t1`` the label's), ``B + 1`` counted as ``B``;
* a bin holding exactly one re-prediction takes it, whatever was in force before it;
* a bin holding several weighs them by time: the prediction in force at the bin's
  start from ``floor(t0 + (b - 1) / B * (t1 - t0))``, each re-prediction until the
  next, the last one until ``floor(t0 + b / B * (t1 - t0))``; the label with the most
  time wins, ties to the lowest class index;
* a bin holding none repeats the prediction made before it.

Here a history lists every prediction made (not only the changes): the first one,
then each re-prediction, with its time.

One detail is not followed: MOA gives an untrained ``MajorityClass`` an empty vote, which
weighs nothing in a bin of several re-predictions; here an untrained prediction is
class index 0 (the protocol's cold start) and weighs its time. It can only matter for
instances that arrive before the first labels; the paper's Cover type figures are
reproduced exactly all the same.

>>> index = {"a": 0, "b": 1}.__getitem__
>>> h = [(0, "b"), (3, "a"), (6, "b"), (8, "a")]  # bins of 5: [0, 5), [5, 10)
>>> moa_bins(h, 0, 10, 2, index)  # bin 1: its one re-prediction; bin 2: a 1 + 2, b 2
['a', 'a']
>>> moa_bins([(0, "b"), (5, "b"), (7.5, "a")], 0, 10, 2, index)  # bin 2: a 2.5 = b 2.5
['b', 'a']
>>> moa_bins([(0, "b"), (7, "a")], 0, 10, 4, index)  # bins 1 and 2 repeat the first
['b', 'b', 'a', 'a']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

from streameval.pipeline.reeval.bins import History
from streameval.pipeline.reeval.history import columns


def moa_bin_of(t: float, t0: float, t1: float, n_bins: int) -> int:
    """The bin (``1..n_bins``) MOA gives a re-prediction made at ``t``.

    >>> [moa_bin_of(t, 0, 1000, 50) for t in (11, 21, 39, 991, 1000)]
    [1, 2, 2, 50, 50]
    """
    if t1 == t0:
        return 1
    b = 1 + math.floor((t - t0) / (t1 - t0) * n_bins)
    return min(b, n_bins)


def _edge(b: int, t0: float, t1: float, n_bins: int) -> float:
    """MOA's end of bin ``b``, floored to a whole time unit."""
    return math.floor(b / n_bins * (t1 - t0) + t0)


def moa_bins(
    history: History,
    t0: float,
    t1: float,
    n_bins: int,
    index: Callable[[Hashable], int],
) -> list[Any]:
    """The predictions of bins ``1..n_bins`` under MOA's mapping (module docstring).

    ``history`` is every prediction of the instance, the first one first; ``t0`` and
    ``t1`` the times of its features and of its label; ``index`` a label's class index.
    """
    times, labels = columns(history)
    n = len(labels)
    if n == 1:
        return [labels[0]] * n_bins
    span = t1 - t0
    floor = math.floor
    # each re-prediction's bin, as moa_bin_of computes it
    bins = (
        [1] * n if span == 0 else [min(1 + floor((t - t0) / span * n_bins), n_bins) for t in times]
    )
    out: list[Any] = []
    previous = labels[0]
    j = 1
    while j < n:
        b = bins[j]
        out.extend([previous] * (b - 1 - len(out)))
        k = j + 1
        while k < n and bins[k] == b:
            k += 1
        if k - j == 1:
            out.append(labels[j])
        else:
            points = [_edge(b - 1, t0, t1, n_bins), *times[j:k], _edge(b, t0, t1, n_bins)]
            in_force = [previous, *labels[j:k]]
            out.append(_longest(in_force, points, index))
        previous = labels[k - 1]
        j = k
    out.extend([previous] * (n_bins - len(out)))
    return out


def _longest(in_force: list[Any], points: list[float], index: Callable[[Hashable], int]) -> Any:
    """The label in force longest (``in_force[i]`` from ``points[i]`` to ``points[i+1]``),
    ties to the lowest class index."""
    first = in_force[0]
    if in_force.count(first) == len(in_force):  # one label all along (the common case)
        return first
    weight: dict[Any, float] = {}
    for label, start, end in zip(in_force, points, points[1:], strict=False):
        weight[label] = weight.get(label, 0.0) + (end - start)
    return min(weight, key=lambda c: (-weight[c], index(c)))
