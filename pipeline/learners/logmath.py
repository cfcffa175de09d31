"""Row-wise arithmetic of batched prediction, done as river's scalar code does it.

River's naive Bayes leaves turn log-likelihoods into probabilities with ``math.exp`` and
``math.log``, one value at a time, and Python's ``sum``. :func:`exp_list` and
:func:`log_list` apply them element by element and :func:`row_sums` adds left to right,
so that :func:`log_sum_exp_normalise` gives river's normalisation for whole matrices.
:func:`argmax_log_rows` ranks rows of log-likelihoods, normalising only the rows whose
top two classes are within :data:`CLEAR_GAP`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from streameval.pipeline.learners.base import argmax_rows


def exp_list(values: np.ndarray) -> np.ndarray:
    """``math.exp`` of every element (bit-identical to river's scalar code).

    >>> exp_list(np.array([[0.0, 1.0]])).tolist() == [[1.0, math.e]]
    True
    """
    flat = list(map(math.exp, values.ravel().tolist()))
    return np.asarray(flat, dtype=float).reshape(values.shape)


def log_list(values: np.ndarray) -> np.ndarray:
    """``math.log`` of every element (raises like it on 0 and negatives)."""
    flat = list(map(math.log, values.ravel().tolist()))
    return np.asarray(flat, dtype=float).reshape(values.shape)


def row_sums(matrix: np.ndarray) -> np.ndarray:
    """Sums of the rows, added left to right as Python's ``sum`` does."""
    total = np.zeros(matrix.shape[0])
    for j in range(matrix.shape[1]):
        total = total + matrix[:, j]
    return total


def log_sum_exp_normalise(votes: np.ndarray) -> np.ndarray:
    """Rows of log-likelihoods to probabilities as river's naive Bayes leaves do:
    ``exp(v - (max + log(sum(exp(v - max)))))``."""
    top = votes.max(axis=1)
    lse = top + log_list(row_sums(exp_list(votes - top[:, None])))
    return exp_list(votes - lse[:, None])


#: Rows whose two largest log-likelihoods are further apart than this (relative to
#: ``max(1, |top|)``) have the same most probable class before and after
#: normalisation: the rounding of ``exp``, ``log`` and ``/`` is many orders smaller.
CLEAR_GAP = 1e-6


def argmax_log_rows(
    classes: Sequence[Hashable],
    log_values: np.ndarray,
    normalise: Callable[[np.ndarray], np.ndarray],
) -> list[Hashable | None]:
    """``argmax_rows(classes, normalise(log_values))`` for finite log-likelihoods,
    normalising only the rows whose top two classes are within :data:`CLEAR_GAP`.

    ``normalise`` maps rows of log-likelihoods to probabilities, row by row,
    increasing in each value (log-sum-exp, or ``exp(v - max) / sum``). Where
    the largest value leads the second by more than the gap, the class with
    the largest probability is the class with the largest log-likelihood (the
    leader's probability exceeds the runner-up's by a factor ``>= 1 + 1e-6``,
    far beyond rounding); the other rows, ties included, are normalised and
    ranked with :func:`~streameval.pipeline.learners.base.argmax_rows` (ties to the
    smallest label).

    >>> lse = log_sum_exp_normalise
    >>> argmax_log_rows(["b", "a"], np.array([[0.0, -3.0], [-1.0, -1.0]]), lse)
    ['b', 'a']
    """
    n, k = log_values.shape
    if k == 0:
        return [None] * n
    if k == 1:
        return [classes[0]] * n
    top2 = np.partition(log_values, k - 2, axis=1)[:, k - 2 :]
    second, top = top2[:, 0], top2[:, 1]
    clear = (top - second) > CLEAR_GAP * np.maximum(1.0, np.abs(top))
    labels = list(classes)
    out = list(map(labels.__getitem__, np.argmax(log_values, axis=1).tolist()))
    if not clear.all():
        unclear = np.flatnonzero(~clear)
        ranked = argmax_rows(labels, normalise(log_values[unclear]))
        for r, label in zip(unclear.tolist(), ranked, strict=True):
            out[r] = label
    return out
