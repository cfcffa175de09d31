"""The most probable class of many rows at a Hoeffding tree leaf, by matrix products.

A naive Bayes leaf of river's Hoeffding trees votes for class ``k`` (river's
``do_naive_bayes_prediction``) with its log-prior plus, for every numeric feature ``g``
of the instance whose Gaussian in class ``k`` is usable, river's ``Gaussian.log_pdf``::

    (x_g - mu_gk) ** 2 / (-2 var_gk) - log(2 pi) / 2 - log(var_gk) / 2

That is a quadratic form in ``x``. With the features centred on a point ``m`` of the
leaf (``x' = x - m``, ``mu' = mu - m``) it is ``a x'^2 + b x' + d`` with ``a = -1 / (2
var)``, ``b = -2 a mu'`` and ``d = a mu'^2 - log(2 pi) / 2 - log(var) / 2``, so the
votes of all the rows of a leaf and all its classes are one matrix product
``[x'^2, x', present] @ [a; b; d]``, instead of one term per row, feature and class.

The product adds in another order and expands the square, so its votes differ from
river's in the last bits. They are used only where they decide: a row's best class is
taken from them when it leads the second by more than the error of both sums (bounded
from the magnitudes of the terms, ``|[x'^2, x', present]| @ [|a|; |b|; |a| mu'^2 +
|c|]``, times ``1e-14 (G + 4)``, ten times the worst case of ``G + 4`` roundings of
``2^-53`` on three times the magnitude) and by :data:`CLEAR_GAP` relative; every other
row goes to river's own ``predict_proba_one``.

>>> mu = np.array([[[0.0], [1.0]]]); m2v = np.array([[[-2.0], [-2.0]]])
>>> hlv = np.zeros((1, 2, 1)); keep = np.ones((1, 2, 1))
>>> quad = Quadratic.of(mu, m2v, hlv, keep, (1.0, 1.0))
>>> best, clear = quad.rank(np.zeros(2), np.array([[0.1], [0.5], [0.9]]), np.ones((3, 1), bool))
>>> best.tolist(), clear.tolist()  # 0.5 is as close to 0 as to 1: left to river
([0, 0, 1], [True, False, True])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: ``0.5 * log(2 pi)``, as river's ``Gaussian.log_pdf`` subtracts it.
HALF_LOG_TAU = 0.5 * math.log(math.tau)

#: A row whose best vote leads the second by at most this (relative to ``max(1, |best|)``)
#: goes to river whatever the error bound says.
CLEAR_GAP = 1e-6


@dataclass
class Quadratic:
    """The coefficients of a leaf's votes, ``(3 G, K)``, centred on ``center`` (``(G,)``),
    made at the class weights ``weights``."""

    weights: tuple[float, ...]
    center: np.ndarray
    coef: np.ndarray
    magnitude: np.ndarray

    @classmethod
    def of(
        cls,
        mu: np.ndarray,
        minus_two_var: np.ndarray,
        half_log_var: np.ndarray,
        keep: np.ndarray,
        weights: tuple[float, ...],
    ) -> Quadratic:
        """From ``(G, K, 1)`` parameter arrays; ``keep`` is 1.0 where river adds the term."""
        mu, keep = mu[:, :, 0], keep[:, :, 0]
        a = keep / minus_two_var[:, :, 0]
        const = keep * (-HALF_LOG_TAU - half_log_var[:, :, 0])
        w = keep * np.asarray(weights, dtype=float)[None, :]
        total = w.sum(axis=1)
        center = np.divide((w * mu).sum(axis=1), total, out=np.zeros(len(total)), where=total > 0)
        shifted = (mu - center[:, None]) * keep
        coef = np.concatenate([a, -2.0 * a * shifted, a * shifted * shifted + const])
        magnitude = np.abs(coef)
        magnitude[2 * len(center) :] = np.abs(a) * shifted * shifted + np.abs(const)
        return cls(weights, center, coef, magnitude)

    def rank(
        self, prior: np.ndarray, values: np.ndarray, present: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """For rows ``values`` (``(n, G)``, valid where ``present``): the column of the best
        vote and whether it is certainly river's best (see the module docs)."""
        n, g = values.shape
        x = np.where(present, values - self.center, 0.0)
        terms = np.concatenate([x * x, x, present.astype(float)], axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            votes = terms @ self.coef
            votes += prior
            size = np.abs(terms) @ self.magnitude
            size += np.abs(prior)
        k = votes.shape[1]
        best = np.argmax(votes, axis=1)
        if k < 2:
            return best, np.isfinite(votes).all(axis=1)
        rows = np.arange(n)
        top = votes[rows, best]
        runner_up = votes.copy()
        runner_up[rows, best] = -np.inf
        second = np.argmax(runner_up, axis=1)
        gap = top - runner_up[rows, second]
        error = (size[rows, best] + size[rows, second]) * (1e-14 * (g + 4))
        margin = np.maximum(error, CLEAR_GAP * np.maximum(1.0, np.abs(top)))
        clear = np.isfinite(votes).all(axis=1) & np.isfinite(size).all(axis=1) & (gap > margin)
        return best, clear
