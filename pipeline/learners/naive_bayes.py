"""Naive Bayes for mixed numeric and categorical features, from river's parts.

River's ``GaussianNB`` models every feature with a normal density. Fed with
one-hot encoded categories it goes badly wrong: an indicator that is constant
within a class (say ``_y_lag1_?``, which is 1 only for the very first
instance) has zero variance there, and river then gives the class a flat
density of ``1e-9`` *even when the value matches*, while the other class,
with a tiny but positive variance, gets a huge density. On Electricity with
one lag feature (``ta:nb``) this drives the accuracy below 45 %, under the
Majority baseline.

:class:`MixedNB` keeps river's ``GaussianNB`` for the numeric features and
gives the ``str`` features a categorical likelihood instead: river's
``MultinomialNB`` (Laplace smoothing ``alpha``) over their one-hot tokens
(river's ``OneHotEncoder`` without the zeros). With every instance carrying
the same number of categorical features, the multinomial over the tokens is
the product of one categorical distribution per feature, as in the naive
Bayes of MOA used by ``temporal-dependence-evaluation-journal.txt`` (sect.
6.2). Both parts include the class prior, so one copy is taken out:

``log P(y|x) = log GaussianNB(y, x_num) + log MultinomialNB(y, x_str) - log P(y) + const``.

Without ``str`` features the answer is river's ``GaussianNB``'s (to rounding).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from typing import Any

from river import base, compose, naive_bayes, preprocessing


class MixedNB(base.Classifier):
    """Gaussian naive Bayes on numbers, categorical naive Bayes on strings.

    >>> model = MixedNB()
    >>> for x, y in [({"t": 1.0, "lag": "UP"}, "UP"), ({"t": 1.1, "lag": "UP"}, "UP"),
    ...              ({"t": 0.9, "lag": "DOWN"}, "DOWN"), ({"t": 1.2, "lag": "DOWN"}, "DOWN")]:
    ...     model.learn_one(x, y)
    >>> proba = model.predict_proba_one({"t": 1.05, "lag": "DOWN"})
    >>> max(proba, key=proba.get)
    'DOWN'
    """

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha
        self.numeric = compose.SelectType(numbers.Number)
        self.categorical = compose.SelectType(str) | preprocessing.OneHotEncoder(drop_zeros=True)
        self.gaussian = naive_bayes.GaussianNB()
        self.multinomial = naive_bayes.MultinomialNB(alpha=alpha)

    def learn_one(self, x: dict[str, Any], y: Hashable) -> None:
        self.gaussian.learn_one(self.numeric.transform_one(x), y)
        self.multinomial.learn_one(self.categorical.transform_one(x), y)

    def predict_proba_one(self, x: dict[str, Any]) -> dict[Hashable, float]:
        jll = self.gaussian.joint_log_likelihood(self.numeric.transform_one(x))
        if not jll:
            return {}
        tokens = self.categorical.transform_one(x)
        if tokens:
            categorical = self.multinomial.joint_log_likelihood(tokens)
            for label in jll:
                jll[label] += categorical[label] - math.log(self.multinomial.p_class(label))
        # Normalised here rather than with scipy's logsumexp: same result, half the time.
        top = max(jll.values())
        weights = {label: math.exp(ll - top) for label, ll in jll.items()}
        total = sum(weights.values())
        return {label: w / total for label, w in weights.items()}

    @property
    def _multiclass(self) -> bool:
        return True
