"""The pairwise comparisons of learners from their 0/1 error arrays.

``prequential-error-fading-factors.txt`` sect. 4: the Q statistic ``log(S_A / S_B)``
of accumulated losses and the signed McNemar statistic of the disagreement counts
``n01``, ``n10``, each under the whole, window and fading estimators. The per-event
:class:`~streameval.pipeline.pairs.PairwiseComparisons` keeps them as sums; here
they are set from the arrays: counts for the whole history and the window (0/1
losses sum exactly in any order), and Algorithm 3's recursion ``alpha S + e`` for a
fading factor.

>>> from streameval.pipeline.pairs import PairwiseComparisons
>>> from streameval.pipeline.metrics.forgetting import Forgetting
>>> estimators = {"whole": Forgetting.whole()}
>>> pairs = PairwiseComparisons(["a", "b"], estimators, classification=True)
>>> fill_pairs(pairs, [np.array([0.0, 0.0, 1.0]), np.array([1.0, 1.0, 0.0])], estimators)
>>> ab = pairs.get()["a vs b"]  # a errs once, b twice
>>> round(ab["q"]["whole"], 4), round(ab["mcnemar"]["whole"], 4)  # log(1/2), -(1-2)^2/3
(-0.6931, -0.3333)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from streameval.pipeline.columnar.weights import eager_sum, window_count
from streameval.pipeline.metrics.forgetting import Forgetting
from streameval.pipeline.pairs import PairwiseComparisons


def _weigh(forgetting: Forgetting, values: np.ndarray) -> float:
    """The estimate of the sum of 0/1 ``values`` under ``forgetting``."""
    if forgetting.kind == "fading":
        assert forgetting.alpha is not None
        return eager_sum(forgetting.alpha, values.astype(float).tolist())
    return window_count(values > 0, forgetting.window if forgetting.kind == "window" else None)


def fill_pairs(
    pairs: PairwiseComparisons,
    errors: Sequence[np.ndarray],
    estimators: Mapping[str, Forgetting],
) -> None:
    """Set every pair's sums as the per-event updates with ``errors`` would leave them."""
    n = len(errors[0]) if errors else 0
    weight = {name: _weigh(f, np.ones(n)) for name, f in estimators.items()}
    sums = {(i, name): _weigh(f, e) for i, e in enumerate(errors) for name, f in estimators.items()}
    for i, j in pairs._pairs:
        a_only = (errors[i] > 0) & (errors[j] == 0)
        b_only = (errors[j] > 0) & (errors[i] == 0)
        for name, f in estimators.items():
            q = pairs._q[(i, j)][name].sums
            a, b = sums[(i, name)], sums[(j, name)]
            q.sums, q.weight = [a, b, a, b], weight[name]
            if pairs.classification:
                m = pairs._mcnemar[(i, j)][name].sums
                m.sums, m.weight = [_weigh(f, a_only), _weigh(f, b_only)], weight[name]
