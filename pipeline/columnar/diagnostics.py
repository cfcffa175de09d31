"""The temporal-dependence diagnostics of the label sequence, a segment at a time.

:class:`~streameval.pipeline.diagnostics.temporal.TemporalDependence` reads the labels
in instance order (``temporal-dependence-evaluation-journal.txt``: class counts for
``P(M)``, eq. 6; consecutive pairs for ``P(T)``, eq. 7, and the transitions; runs of
equal labels for ``Delta(l)``, sect. 6.8). All of these are counts over the sequence,
so :func:`extend_temporal` adds a segment of label codes at once: pairs from the
segment and its shift by one (the first pair with the label before the segment), and
the length of the run each position closes from the start of its run, carried over
from the previous segment.

:class:`Ordered` hands labels on in the order of their instances, as the per-event
:class:`~streameval.pipeline.diagnostics.ordered.InstanceOrder` does (same rule, same
gap skipping); a run of labels of consecutive instances with none waiting, the common
case, goes straight through.

>>> from streameval.pipeline.diagnostics.temporal import TemporalDependence
>>> td = TemporalDependence(max_lag=1)
>>> extend_temporal(td, np.array([0, 0, 1, 0]), ["A", "B"])
>>> extend_temporal(td, np.array([0, 0, 1]), ["A", "B"])
>>> td.get()["p_same"], td.get()["transition"]["A"]  # as its own doctest: "AABAAAB"
(0.5, {'A': 0.6, 'B': 0.4})
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from streameval.pipeline.diagnostics.temporal import TemporalDependence


def _run_lengths(seq: np.ndarray, first: int) -> np.ndarray:
    """The length of the run of equal labels each position closes; ``first`` is that of
    position 0 (a run carried over from before the sequence)."""
    idx = np.arange(len(seq))
    starts = np.r_[True, seq[1:] != seq[:-1]]
    start = np.maximum.accumulate(np.where(starts, idx, 0))
    runs = idx - start + 1
    runs[start == 0] += first - 1
    return runs


def extend_temporal(td: TemporalDependence, seq: np.ndarray, labels: Sequence[str]) -> None:
    """Update ``td`` as ``td.update(labels[c])`` for each code ``c`` of ``seq`` would."""
    m = len(seq)
    if m == 0:
        return
    k, depth_max = len(labels), td.max_lag + 1
    if len(td.counts) < k:  # new classes, in order of first appearance
        for c in dict.fromkeys(seq.tolist()):
            if labels[c] not in td.counts:
                td.counts[labels[c]] = 0
                td.run[labels[c]] = [0] * depth_max
                td.stay[labels[c]] = [0] * depth_max
    n0 = td.n
    if n0:
        code = {label: c for c, label in enumerate(labels)}
        full = np.concatenate(([code[td.last]], seq))
        runs = _run_lengths(full, td.run_length)
    else:
        full, runs = seq, _run_lengths(seq, 1)
    prev, cur, depth = full[:-1], full[1:], np.minimum(runs[:-1], depth_max)
    _add_pairs(td, prev, cur, labels)
    same = cur == prev
    for c in np.unique(prev).tolist():
        of_c = prev == c
        _add_depths(td.run[labels[c]], depth[of_c], depth_max)
        _add_depths(td.stay[labels[c]], depth[of_c & same], depth_max)
    counts = np.bincount(seq, minlength=k)
    for c in np.flatnonzero(counts).tolist():
        td.counts[labels[c]] += int(counts[c])
    _add_quick(td, seq, same, n0, labels)
    td.run_length = int(runs[-1])
    td.last = labels[int(seq[-1])]
    td.n = n0 + m


def _add_pairs(
    td: TemporalDependence, prev: np.ndarray, cur: np.ndarray, labels: Sequence[str]
) -> None:
    k = len(labels)
    pairs, counts = np.unique(prev.astype(np.int64) * k + cur, return_counts=True)
    for pair, count in zip(pairs.tolist(), counts.tolist(), strict=True):
        row = td.pairs.setdefault(labels[pair // k], {})
        row[labels[pair % k]] = row.get(labels[pair % k], 0) + count


def _add_depths(counts: list[int], depths: np.ndarray, depth_max: int) -> None:
    """``counts[m] += 1`` for every ``m < depth`` of every depth (``m < depth_max``)."""
    if not len(depths):
        return
    at_least = np.cumsum(np.bincount(depths, minlength=depth_max + 1)[::-1])[::-1]
    for m in range(depth_max):
        counts[m] += int(at_least[m + 1])


def _add_quick(
    td: TemporalDependence, seq: np.ndarray, same: np.ndarray, n0: int, labels: Sequence[str]
) -> None:
    """The quick test's counts over the first ``quick_n`` labels of the stream."""
    room = td.quick_n - n0
    if room <= 0:
        return
    head = seq[:room]
    counts = np.bincount(head, minlength=len(labels))
    for c in dict.fromkeys(head.tolist()):
        td.quick_counts[labels[c]] = td.quick_counts.get(labels[c], 0) + int(counts[c])
    # ``same[t]``: label t of the stream (after the first) equals the one before it
    same_in = same[: len(head)] if n0 else same[: len(head) - 1]
    td.quick_same += int(np.count_nonzero(same_in))


class Ordered:
    """Labels in the order of their instances' arrival indices (``InstanceOrder``'s
    rule, in bulk): :meth:`push` takes a segment's arrival indices and codes and returns
    the codes handed on, in order."""

    def __init__(self, max_waiting: int = 100_000) -> None:
        self.max_waiting = max_waiting
        self._next = 0
        self._waiting: dict[int, int] = {}

    def push(self, at: np.ndarray, codes: np.ndarray) -> np.ndarray:
        m = len(at)
        if m == 0:
            return codes[:0]
        consecutive = int(at[0]) == self._next and int(at[-1]) == self._next + m - 1
        if not self._waiting and consecutive and (m == 1 or bool((np.diff(at) == 1).all())):
            self._next += m
            return codes
        out: list[int] = []
        waiting = self._waiting
        for a, c in zip(at.tolist(), codes.tolist(), strict=True):
            waiting[a] = c
            if len(waiting) > self.max_waiting:  # a gap that never fills
                self._next = min(waiting)
            while self._next in waiting:
                out.append(waiting.pop(self._next))
                self._next += 1
        return np.asarray(out, dtype=codes.dtype)

    def flush(self) -> np.ndarray:
        """Every code still waiting, in order (the stream has ended)."""
        out = [self._waiting[a] for a in sorted(self._waiting)]
        self._waiting.clear()
        return np.asarray(out, dtype=np.int32)
