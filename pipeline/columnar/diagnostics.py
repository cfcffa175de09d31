"""The temporal-dependence diagnostics of a label sequence, counted with arrays.

:class:`~streameval.pipeline.diagnostics.temporal.TemporalDependence` reads the labels
in instance order (``temporal-dependence-evaluation-journal.txt``: class counts for
``P(M)``, eq. 6; consecutive pairs for ``P(T)``, eq. 7, and the transitions; runs of
equal labels for ``Delta(l)``, sect. 6.8). All of these are counts over the sequence,
so :func:`fill_temporal` sets them from an array of label codes at once: pairs from
the sequence and its shift by one, and the length of the run each position closes
from the start of its run.

:func:`instance_order` gives the sequence the per-event
:class:`~streameval.pipeline.diagnostics.ordered.InstanceOrder` would have handed on:
the labelled instances by arrival index, up to the first one still waiting (all of
them once the stream ended). That holds while no more than ``max_waiting`` labels
ever waited behind a gap; otherwise it replays ``InstanceOrder`` itself.

>>> from streameval.pipeline.diagnostics.temporal import TemporalDependence
>>> td = TemporalDependence(max_lag=1)
>>> fill_temporal(td, np.array([0, 0, 1, 0, 0, 0, 1]), ["A", "B"])
>>> td.get()["p_same"], td.get()["transition"]["A"]  # as its own doctest: "AABAAAB"
(0.5, {'A': 0.6, 'B': 0.4})
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from streameval.pipeline.diagnostics.ordered import InstanceOrder
from streameval.pipeline.diagnostics.temporal import TemporalDependence


def instance_order(
    arrival: np.ndarray, y: np.ndarray, ended: bool, max_waiting: int = 100_000
) -> np.ndarray:
    """The label codes ``y`` (in label order, of instances ``arrival``) in the order
    the diagnostics read them."""
    n = len(arrival)
    if n == 0:
        return y[:0]
    label_at = np.full(int(arrival.max()) + 1, n, dtype=np.int64)  # n: not labelled
    label_at[arrival] = np.arange(n)
    ready = np.maximum.accumulate(label_at)  # the label after which each one is handed on
    handed = np.searchsorted(ready, np.arange(n), side="right")
    if int((np.arange(1, n + 1) - handed).max()) > max_waiting:
        return _replay(arrival, y, ended, max_waiting)
    order = np.argsort(arrival, kind="stable")
    return y[order] if ended else y[order[: handed[-1]]]


def _replay(arrival: np.ndarray, y: np.ndarray, ended: bool, max_waiting: int) -> np.ndarray:
    """``InstanceOrder`` itself, for a sequence where it skipped a gap."""
    out: list[int] = []
    order = InstanceOrder(out.append, max_waiting)
    for at, code in zip(arrival.tolist(), y.tolist(), strict=True):
        order.push(at, code)
    if ended:
        order.flush()
    return np.asarray(out, dtype=y.dtype)


def fill_temporal(td: TemporalDependence, seq: np.ndarray, labels: Sequence[str]) -> None:
    """Set ``td`` as if it had been updated with ``labels[c]`` for each code of ``seq``."""
    n = len(seq)
    td.n = n
    if n == 0:
        td.counts, td.pairs, td.run, td.stay, td.quick_counts = {}, {}, {}, {}, {}
        td.quick_same, td.last, td.run_length = 0, None, 0
        return
    first = sorted(np.unique(seq, return_index=True)[1].tolist())
    present = [int(seq[i]) for i in first]  # codes in order of first appearance
    counts = np.bincount(seq, minlength=len(labels))
    td.counts = {labels[c]: int(counts[c]) for c in present}
    prev, nxt = seq[:-1], seq[1:]
    td.pairs = {}
    for c in present:
        row = np.bincount(nxt[prev == c], minlength=len(labels))
        if row.any():
            td.pairs[labels[c]] = {labels[j]: int(row[j]) for j in present if row[j]}
    positions = np.arange(n)
    starts = np.maximum.accumulate(np.where(np.r_[True, nxt != prev], positions, 0))
    run_length = positions - starts + 1  # of the run each position closes
    closes = run_length[:-1]
    same = nxt == prev
    td.run, td.stay = {}, {}
    for c in present:
        is_c = prev == c
        td.run[labels[c]] = [
            int(np.count_nonzero(is_c & (closes > m))) for m in range(td.max_lag + 1)
        ]
        td.stay[labels[c]] = [
            int(np.count_nonzero(is_c & same & (closes > m))) for m in range(td.max_lag + 1)
        ]
    quick = seq[: td.quick_n]
    qcounts = np.bincount(quick, minlength=len(labels))
    td.quick_counts = {labels[c]: int(qcounts[c]) for c in present if qcounts[c]}
    td.quick_same = int(np.count_nonzero(quick[1:] == quick[:-1]))
    td.last = labels[int(seq[-1])]
    td.run_length = int(run_length[-1])
