"""The Gaussian log-density sums of many instances at once (re-evaluation rounds).

A round of continuous re-evaluation asks a naive Bayes for the classes of ~``delay /
K`` pending instances, whose features come as a
:class:`~streameval.pipeline.learners.frame.NumericFrame`. :func:`row_sums` gives, for
each row and class of a :class:`~streameval.pipeline.learners.gaussians.GaussianTable`,
the sum over the row's features of ``log(1e-9 + density)``, computed with numpy (in any
order, see :meth:`~streameval.pipeline.learners.gaussians.GaussianTable.error_bound`).

A 0/1 indicator column (44 of Covertype's 54; the frame's ``binary`` says which
columns have held nothing else) adds ``t0 + x (t1 - t0)``, where ``t0`` and ``t1`` are
its two log-densities in the class: kept per class between rounds, they turn the
column's part of every row's sum into one matrix product with the 0/1 values
themselves. The other columns are computed cell by cell, the rows innermost (numpy's
inner loops run over the rows). Without ``binary``, a column present in every row that
takes two values in the batch is summed the same way from its two log-densities.

How a frame's columns map onto the table's (which are indicators, which are never
learned, contiguous blocks as slices) is a :class:`RowPlan`, kept while the frames keep
their layout (the same ``index`` and ``binary`` objects, as the pending buffer's
:class:`~streameval.pipeline.reeval.rows.FeatureRows` hands them out).

>>> from streameval.pipeline.learners.frame import NumericFrame
>>> from streameval.pipeline.learners.gaussians import GaussianTable
>>> table = GaussianTable()
>>> for x, c in [({"u": 0.1, "b": 0.0}, 0), ({"u": 0.4, "b": 1.0}, 0), ({"u": 0.9, "b": 1.0}, 1),
...              ({"u": 1.3, "b": 1.0}, 1)]:
...     _ = c < table.n_classes or table.add_class()
...     table.learn(c, table.columns_for(x), np.array(list(x.values())))
>>> xs = [{"u": 0.2, "b": 1.0}, {"u": 1.0, "b": 0.0}]
>>> sums = row_sums(table, NumericFrame(xs))
>>> exact = [table.exact_sums([0, 1], list(x), list(x.values())) for x in xs]
>>> bool(np.allclose(sums, exact, rtol=1e-12))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np
from streameval.pipeline.learners.frame import NumericFrame
from streameval.pipeline.learners.gaussians import LOG_PDF_EPS, GaussianTable, _log_densities


def _compact(index: np.ndarray) -> np.ndarray | slice:
    """``index`` as a slice when it is a contiguous ascending range (a view, no copy)."""
    if len(index) and index[-1] - index[0] + 1 == len(index) and (np.diff(index) == 1).all():
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


class RowPlan:
    """Where the columns of frames with one layout go in a table."""

    def __init__(self, table: GaussianTable, frame: NumericFrame) -> None:
        self.index = frame.index
        self.binary = frame.binary
        self.n_features = table.n_features
        cols = table.columns_of(frame.index)
        known = cols >= 0
        indicator = known & (frame.binary if frame.binary is not None else False)
        other = known & ~indicator
        self.n_unknown = int(len(cols) - known.sum())
        self.n_indicator = int(indicator.sum())
        self.n_other = int(other.sum())
        self.frame_indicator = _compact(np.flatnonzero(indicator))
        self.table_indicator = _compact(cols[indicator])
        self.frame_other = _compact(np.flatnonzero(other))
        self.table_other = _compact(cols[other])

    def fits(self, table: GaussianTable, frame: NumericFrame) -> bool:
        return (
            frame.index is self.index
            and frame.binary is self.binary
            and table.n_features == self.n_features
        )


def row_sums(table: GaussianTable, frame: NumericFrame) -> np.ndarray:
    """The log-density sums of the frame's rows for every class, ``(rows, classes)``."""
    values, present = frame.values, frame.present
    if not values.shape[0]:
        return np.zeros((0, table.n_classes))
    if not present.all():
        cols = table.columns_of(frame.index)
        return masked_row_sums(table, values, present, cols, frame.binary)
    plan: RowPlan | None = table.__dict__.get("_row_plan")
    if plan is None or not plan.fits(table, frame):
        plan = table.__dict__["_row_plan"] = RowPlan(table, frame)
    k, p = table.n_classes, table.parameters()
    out = np.zeros((k, values.shape[0]))
    if plan.n_indicator:
        p.indicator_terms(table)
        ti = plan.table_indicator
        out += p.rise[:k, ti] @ values[:, plan.frame_indicator].T
        out += p.ends[:k, 0, ti].sum(axis=1)[:, None]
    if plan.n_other:
        to = plan.table_other
        terms = _log_densities(
            values[:, plan.frame_other].T[None, :, :],
            table.mean[:k, to, None],
            p.h[:k, to, None],
            p.c[:k, to, None],
            p.point[:k, to, None] if p.any_point else None,
            p,
        )  # (K, J, n): the rows innermost, where numpy's loops are long
        out += terms.sum(axis=1)
    if plan.n_unknown:
        out += plan.n_unknown * LOG_PDF_EPS
    return out.T


def masked_row_sums(
    table: GaussianTable,
    values: np.ndarray,
    present: np.ndarray,
    cols: np.ndarray,
    binary: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`row_sums` of rows ``values`` where ``present``, the feature of ``values[:,
    j]`` in table column ``cols[j]`` (``-1``: never learned); ``binary`` as the frame's."""
    n, k = values.shape[0], table.n_classes
    out = np.zeros((k, n))
    known = cols >= 0
    if not known.all():
        out += LOG_PDF_EPS * present[:, ~known].sum(axis=1)[None, :]
        keep = np.flatnonzero(known)
        values, present, cols = values[:, keep], present[:, keep], cols[keep]
        binary = binary[keep] if binary is not None else None
    if not len(cols) or not n:
        return out.T
    p = table.parameters()
    if binary is not None:
        two = binary
        low, high = np.zeros(len(cols)), np.ones(len(cols))
    else:
        low, high = values.min(axis=0), values.max(axis=0)
        two = present.all(axis=0) & ((values == low) | (values == high)).all(axis=0)
    if two.any():
        j = np.flatnonzero(two)
        out += _two_valued(table, p, cols[j], values[:, j], present[:, j], low[j], high[j])
    rest = np.flatnonzero(~two)
    if len(rest):
        tc = cols[rest]
        terms = _log_densities(
            values[:, rest].T[None, :, :],
            table.mean[:k, tc, None],
            p.h[:k, tc, None],
            p.c[:k, tc, None],
            p.point[:k, tc, None] if p.any_point else None,
            p,
        )
        sub = present[:, rest]
        if not sub.all():
            terms *= sub.T[None, :, :]  # an absent feature adds nothing (terms are finite)
        out += terms.sum(axis=1)
    return out.T


def _two_valued(
    table: GaussianTable,
    p: Any,
    tc: np.ndarray,
    values: np.ndarray,
    present: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
) -> np.ndarray:
    """What columns taking two values (``low``, ``high``) add to each class and row,
    ``(K, n)``; absent values add nothing."""
    k = table.n_classes
    ends = np.stack([low, high])  # (2, J)
    terms = _log_densities(
        ends[None, :, :],
        table.mean[:k, None, tc],
        p.h[:k, None, tc],
        p.c[:k, None, tc],
        p.point[:k, None, tc] if p.any_point else None,
        p,
    )  # (K, 2, J)
    is_high = ((values == high) & present).T.astype(float)
    is_low = (present & (values != high)).T.astype(float)
    return terms[:, 0, :] @ is_low + terms[:, 1, :] @ is_high
