"""The Gaussians of a naive Bayes, one per class and numeric feature, held in arrays.

River's ``GaussianNB`` keeps a ``proba.Gaussian`` object (a ``stats.Var`` with
``ddof=0``) per class and feature: learning an instance updates one object per feature,
predicting calls one per class and feature. :class:`GaussianTable` keeps the same
running statistics as three ``(classes, features)`` float arrays -- the weight ``n``,
the mean and the sum of squared deviations ``m2`` (river's ``Var._S``) -- and updates a
class's row with river's formulas, in river's order, element by element::

    n += 1.0;  mean_new = mean + (1.0 / n) * (x - mean);  m2 += (x - mean) * (x - mean_new)

Elementwise ``+ - * /`` are the same IEEE operations in numpy as in Python, so the
arrays hold exactly the numbers river's objects would hold (values are read as
``float``, as river's arithmetic reads ``int`` and ``bool``).

The log-density of a value ``x`` for a class is river's ``log(1e-9 + pdf(x))``, with
MOA's point mass for a class whose values of the feature are all equal
(:class:`~streameval.pipeline.learners.naive_bayes.PointMassGaussianNB`): density 1 at
that value, 0 elsewhere. Two ways to sum it over the features of an instance:

* :meth:`GaussianTable.exact_sums`: river's scalar formula with ``math``'s ``exp``,
  ``log`` and ``sqrt``, the features added one after the other in the instance's order:
  to the last bit what river computes;
* :meth:`GaussianTable.sums` (one instance) and
  :func:`~streameval.pipeline.learners.gaussian_rows.row_sums` (many):
  numpy, whose ``exp`` and ``log`` may differ from ``math``'s in the last bit, summed in
  any order. A row's sum then differs from the exact one by at most
  :meth:`GaussianTable.error_bound`; callers rank classes with it and go back to
  :meth:`~GaussianTable.exact_sums` where two classes are closer than that.

The sums of many instances at once (re-evaluation rounds) are in
:mod:`~streameval.pipeline.learners.gaussian_rows`.

>>> from river import stats
>>> var, table = stats.Var(ddof=0), GaussianTable()
>>> row = table.add_class()
>>> for x in (1.0, 2.0, 4.0):
...     var.update(x)
...     table.learn(row, table.columns_for(["a"]), np.array([x]))
>>> (float(table.mean[0, 0]), float(table.m2[0, 0])) == (var.mean._mean, var._S)
True
>>> exact = table.exact_sums([0], ["a"], [2.0])[0]
>>> abs(exact - float(table.sums(table.columns_of(["a"]), np.array([2.0]))[0])) < 1e-12
True
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

#: River's ``GaussianNB`` adds this to every density before taking its log.
PDF_EPS = 10e-10
LOG_PDF_EPS = math.log(PDF_EPS)
LOG_ONE_EPS = math.log(1.0 + PDF_EPS)
SQRT_TAU = math.sqrt(2.0 * math.pi)


def exact_term(n: float, mean: float, m2: float, x: Any) -> float:
    """River's ``log(1e-9 + density)`` of ``x`` for one class and feature, to the last bit.

    ``n == 0``: the class never saw the feature (river has no Gaussian: ``log(1e-9)``);
    ``m2 / n <= 0``: all its values were equal, MOA's point mass; otherwise river's
    ``Gaussian.__call__``.

    >>> exact_term(0.0, 0.0, 0.0, 1.0) == LOG_PDF_EPS
    True
    >>> exact_term(2.0, 3.0, 0.0, 3.0) == LOG_ONE_EPS, exact_term(2.0, 3.0, 0.0, 2.0) == LOG_PDF_EPS
    (True, True)
    >>> round(exact_term(2.0, 0.0, 2.0, 0.0), 6)  # log(1e-9 + 1 / sqrt(2 pi))
    -0.918939
    """
    if n == 0.0:
        return LOG_PDF_EPS
    variance = m2 / n
    if variance <= 0.0:
        return math.log(PDF_EPS + (1.0 if x == mean else 0.0))
    pdf = 0.0
    if variance > 0.0:
        sigma = math.sqrt(variance)
        try:
            z = (x - mean) / sigma
            pdf = math.exp(-0.5 * z * z) / SQRT_TAU / sigma
        except (ValueError, OverflowError):
            pdf = 0.0
    return math.log(PDF_EPS + pdf)


class _Parameters:
    """What the numpy sums need of every class and feature, ``(classes, features)``:
    the log-density is ``log(1e-9 + exp(h * (x - mean) ** 2 + c))`` with ``h = -1 / (2
    var)`` and ``c = -log(sigma sqrt(2 pi))``; ``c = -inf`` where there is no density
    (no value seen, or a variance that is not a positive number); ``point`` marks the
    point masses (the mean is their value)."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.h = np.zeros(shape)
        self.c = np.full(shape, -np.inf)
        self.point = np.zeros(shape, dtype=bool)
        self.any_point = False
        self.stale = set(range(shape[0]))
        #: Largest ``|log-density|`` any value can get: ``log(1e-9) <= log(1e-9 + pdf) <=
        #: max(c, log(1e-9)) + log 2``.
        self.t_max = -LOG_PDF_EPS
        #: Some parameter so large that the numpy sums may overflow (and warn) on the way.
        self.extreme = False
        #: ``[class, v, feature]``: the log-density of the value ``v`` (0 or 1), for the
        #: columns of 0/1 indicators; made on demand (:meth:`indicator_terms`).
        self.ends = np.zeros((shape[0], 2, shape[1]))
        #: ``ends[:, 1] - ends[:, 0]``: what a 1 adds instead of a 0.
        self.rise = np.zeros(shape)
        self.stale_ends = set(range(shape[0]))

    def refresh(self, table: GaussianTable) -> None:
        """Recompute the rows of the classes that learned since the last call (together:
        a round after K labels finds a few)."""
        if self.stale:
            rows = np.fromiter(self.stale, dtype=np.intp, count=len(self.stale))
            n, m2 = table.count[rows], table.m2[rows]
            variance = np.divide(m2, n, out=np.full(n.shape, np.nan), where=n > 0.0)
            normal = variance > 0.0  # nan (nothing seen, nan values) is neither
            safe = np.where(normal, variance, 1.0)
            h = self.h[rows] = np.where(normal, -0.5 / safe, 0.0)
            c = self.c[rows] = np.where(normal, -np.log(np.sqrt(safe) * SQRT_TAU), -np.inf)
            self.point[rows] = variance <= 0.0
            self.t_max = max(self.t_max, float(c.max()) + math.log(2.0))
            mean = float(np.abs(table.mean[rows]).max(initial=0.0))  # nan: a nan value seen
            self.extreme = self.extreme or not (mean < _LARGE and -float(h.min()) < _LARGE)
        self.stale_ends |= self.stale
        self.stale.clear()
        self.any_point = bool(self.point.any())

    def indicator_terms(self, table: GaussianTable) -> np.ndarray:
        """:attr:`ends`, current for every class (call :meth:`refresh` first)."""
        if self.stale_ends:
            rows = np.fromiter(self.stale_ends, dtype=np.intp, count=len(self.stale_ends))
            point = self.point[rows, None, :] if self.any_point else None
            ends = self.ends[rows] = _log_densities(
                _ZERO_ONE, table.mean[rows, None, :], self.h[rows, None, :],
                self.c[rows, None, :], point, self,
            )  # fmt: skip
            self.rise[rows] = ends[:, 1] - ends[:, 0]
            self.stale_ends.clear()
        return self.ends


_FLOOR = -60.0
_ZERO_ONE = np.array([[0.0], [1.0]])  # the two values of a 0/1 indicator, as a column

#: Means, values and ``1 / variance`` below this keep ``h * (x - mean) ** 2`` finite.
_LARGE = 1e150


class GaussianTable:
    """Per class (row) and numeric feature (column): river's Gaussian statistics."""

    def __init__(self) -> None:
        self.columns: dict[Hashable, int] = {}
        self.n_classes = 0
        self.count = np.zeros((0, 0))
        self.mean = np.zeros((0, 0))
        self.m2 = np.zeros((0, 0))
        self._params: _Parameters | None = None

    # -- state ------------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        n, f = self.n_classes, len(self.columns)
        return {
            "columns": self.columns,
            "count": self.count[:n, :f].copy(),
            "mean": self.mean[:n, :f].copy(),
            "m2": self.m2[:n, :f].copy(),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.columns = state["columns"]
        self.count, self.mean, self.m2 = state["count"], state["mean"], state["m2"]
        self.n_classes = self.count.shape[0]
        self._params = None

    @property
    def n_features(self) -> int:
        return len(self.columns)

    def add_class(self) -> int:
        """A row for a new class (nothing seen yet); its index."""
        row = self.n_classes
        if row == self.count.shape[0]:
            self._grow(max(4, 2 * row), self.count.shape[1])
        self.n_classes += 1
        return row

    def columns_for(self, keys: Iterable[Hashable]) -> np.ndarray:
        """The columns of the features ``keys`` (new ones added, in order)."""
        columns = self.columns
        cols = []
        for key in keys:
            col = columns.get(key)
            if col is None:
                col = columns[key] = len(columns)
            cols.append(col)
        if len(columns) > self.count.shape[1]:
            self._grow(self.count.shape[0], max(8, 2 * len(columns)))
        return np.array(cols, dtype=np.intp)

    def columns_of(self, keys: Iterable[Hashable]) -> np.ndarray:
        """The columns of ``keys``, ``-1`` for a feature never learned."""
        get = self.columns.get
        return np.array([get(key, -1) for key in keys], dtype=np.intp)

    def _grow(self, rows: int, cols: int) -> None:
        def grown(old: np.ndarray) -> np.ndarray:
            new = np.zeros((rows, cols))
            new[: old.shape[0], : old.shape[1]] = old
            return new

        self.count, self.mean, self.m2 = grown(self.count), grown(self.mean), grown(self.m2)
        self._params = None

    # -- learning ---------------------------------------------------------------------------

    def learn(self, row: int, cols: np.ndarray | slice, values: np.ndarray) -> None:
        """One instance of class ``row``: its ``values`` in columns ``cols`` (distinct).

        River's ``Mean.update`` and ``Var.update`` with weight 1, elementwise."""
        n_row, mean_row, m2_row = self.count[row], self.mean[row], self.m2[row]
        n = n_row[cols] + 1.0
        old = mean_row[cols]
        diff = values - old
        new = old + (1.0 / n) * diff
        n_row[cols] = n
        mean_row[cols] = new
        m2_row[cols] = m2_row[cols] + diff * (values - new)
        if self._params is not None:
            self._params.stale.add(row)

    # -- exact sums -------------------------------------------------------------------------

    def exact_sums(
        self, rows: Sequence[int], keys: Sequence[Hashable], values: Sequence[Any]
    ) -> list[float]:
        """For each class row: ``sum`` of :func:`exact_term` over the features ``keys``
        with ``values``, added in that order (river's ``joint_log_likelihood`` without its
        prior)."""
        cols = [self.columns.get(key, -1) for key in keys]
        out = []
        for row in rows:
            n, mean, m2 = self.count[row].tolist(), self.mean[row].tolist(), self.m2[row].tolist()
            out.append(
                sum(
                    exact_term(n[c], mean[c], m2[c], x) if c >= 0 else LOG_PDF_EPS
                    for c, x in zip(cols, values, strict=True)
                )
            )
        return out

    # -- numpy sums -------------------------------------------------------------------------

    def parameters(self) -> _Parameters:
        """The derived parameters, current for every class."""
        params = self._params
        if params is None:
            params = self._params = _Parameters(self.count.shape)
        if params.stale:
            params.refresh(self)
        return params

    def error_bound(self, n_features: int) -> float:
        """How far :meth:`sums` and :meth:`row_sums` may be from :meth:`exact_sums` over
        ``n_features`` features: each log-density within a few units in the last place of
        ``t_max + 40`` (numpy's ``exp`` and ``log``, the algebraic form), their sum in any
        order within ``n_features * eps`` of the total magnitude; a factor 10 above."""
        t_max = self.parameters().t_max
        return 1e-15 * (n_features + 1) ** 2 * (t_max + 40.0)

    def sums(self, cols: np.ndarray | slice, values: np.ndarray) -> np.ndarray:
        """The log-density sums of one instance for every class, ``(classes,)``; ``cols``
        are the columns of ``values`` (``-1``: a feature never learned)."""
        k = self.n_classes
        p = self.parameters()
        unknown = 0
        if isinstance(cols, np.ndarray) and (cols < 0).any():
            known = cols >= 0
            unknown = int(len(cols) - known.sum())
            cols, values = cols[known], values[known]
        point = p.point[:k, cols] if p.any_point else None
        terms = _log_densities(
            values[None, :], self.mean[:k, cols], p.h[:k, cols], p.c[:k, cols], point, p
        )
        out = terms.sum(axis=1)
        if unknown:
            out += unknown * LOG_PDF_EPS
        return out


def _log_densities(
    values: np.ndarray,
    mu: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    point: np.ndarray | None,
    params: _Parameters,
) -> np.ndarray:
    """``log(1e-9 + density)`` of ``values`` under broadcast parameters (numpy).

    Nothing here can overflow unless a value, a mean or ``1 / variance`` is beyond
    :data:`_LARGE`; only then are numpy's floating-point warnings silenced."""
    if params.extreme or not float(np.abs(values).max(initial=0.0)) < _LARGE:
        with np.errstate(all="ignore"):
            return _log_densities_plain(values, mu, h, c, point)
    return _log_densities_plain(values, mu, h, c, point)


def _log_densities_plain(
    values: np.ndarray, mu: np.ndarray, h: np.ndarray, c: np.ndarray, point: np.ndarray | None
) -> np.ndarray:
    d = values - mu
    d *= d
    d *= h
    d += c
    # exp(-60) is below half a unit in the last place of 1e-9: the sum is 1e-9 from there
    # on, and numpy's exp is slow on arguments whose results are subnormal (or 0)
    np.maximum(d, _FLOOR, out=d)
    np.exp(d, out=d)
    d += PDF_EPS
    np.log(d, out=d)
    if point is not None and point.any():
        hit = np.where(values == mu, LOG_ONE_EPS, LOG_PDF_EPS)
        np.copyto(d, hit, where=point)
    return d
