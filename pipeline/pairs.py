"""Every pair of learners compared on the same labels.

For each pair ``(a, b)`` of an experiment's learners, and under each prequential
estimator (whole, window, fading), the Q statistic of their losses and, for
classifiers, the signed McNemar statistic of their errors
(``prequential-error-fading-factors.txt``, sect. 4: comparing two algorithms with
forgetting). A label where either learner made no prediction (a NaN loss of a
regressor) is left out of that pair.

>>> from streameval.pipeline.metrics.forgetting import Forgetting
>>> pairs = PairwiseComparisons(["a", "b"], {"whole": Forgetting.whole()}, classification=True)
>>> for errors in ([0.0, 1.0], [0.0, 1.0], [1.0, 0.0]):
...     pairs.update(errors)
>>> ab = pairs.get()["a vs b"]  # a errs once, b twice
>>> round(ab["q"]["whole"], 4), round(ab["mcnemar"]["whole"], 4)  # log(1/2), -(1-2)^2/3
(-0.6931, -0.3333)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from streameval.pipeline.metrics.comparison import QStatistic, SignedMcNemar
from streameval.pipeline.metrics.forgetting import Forgetting


class PairwiseComparisons:
    """Q and signed McNemar statistics of every pair of ``names``, per estimator."""

    def __init__(
        self, names: Sequence[str], estimators: Mapping[str, Forgetting], *, classification: bool
    ) -> None:
        self.names = list(names)
        self.classification = classification
        self._pairs = list(combinations(range(len(self.names)), 2))
        self._q = {p: {n: QStatistic(f) for n, f in estimators.items()} for p in self._pairs}
        self._mcnemar = (
            {p: {n: SignedMcNemar(f) for n, f in estimators.items()} for p in self._pairs}
            if classification
            else {}
        )

    def update(self, losses: Sequence[float]) -> None:
        """The losses of every learner on one label, in the order of ``names``."""
        for pair in self._pairs:
            a, b = losses[pair[0]], losses[pair[1]]
            if math.isnan(a) or math.isnan(b):
                continue
            for q in self._q[pair].values():
                q.update(a, b)
            if self.classification:
                for m in self._mcnemar[pair].values():
                    m.update(a > 0, b > 0)

    def get(self) -> dict[str, Any]:
        """``{"a vs b": {"q": {estimator: value}, "mcnemar": {...}}}``."""
        out: dict[str, Any] = {}
        for i, j in self._pairs:
            key = f"{self.names[i]} vs {self.names[j]}"
            out[key] = {"q": {n: q.get() for n, q in self._q[(i, j)].items()}}
            if self.classification:
                out[key]["mcnemar"] = {n: m.get() for n, m in self._mcnemar[(i, j)].items()}
        return out
