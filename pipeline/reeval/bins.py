"""Bins of an instance's waiting period and the averaged prediction of each bin.

Continuous re-evaluation (``delayed-labelling-continuous-reevaluation.txt``,
sect. 4 and 4.1) cuts the waiting period of an instance -- from the time its
features arrive, ``t_start``, to the time its label arrives, ``t_end`` -- into
``B`` bins of equal length ``Δ / B`` with ``Δ = t_end - t_start`` (the latency,
sect. 3). Every instance has its own latency, so its bins are laid out only
once its label is known; nothing here assumes a fixed latency. Bin 0 (the first
prediction) and bin ``B + 1`` (the test-then-train prediction) hold exactly one
prediction each and are not handled here.

Boundaries
    Bin ``b`` in ``1..B`` covers ``[t_start + (b-1)Δ/B, t_start + bΔ/B)``; the
    last bin is closed at ``t_end``. The edges are computed once by
    :func:`bin_edges` (the last edge is ``t_end`` exactly, never a rounded sum)
    and :func:`bin_of` agrees with them to the last bit. With ``Δ = 0`` every
    bin is empty except that the closed last bin holds the instant ``t_start``.

Predictions in force
    A history is a list of ``(t, label)`` sorted by ``t`` whose first entry is
    the first prediction. The prediction *in force* at a moment ``τ`` is the
    most recent one made at or before ``τ``: the last entry with ``t <= τ``
    (of several entries at one instant, the one recorded last). The first entry
    is in force from ``t_start`` on whatever its own time; entries after
    ``t_end`` are ignored.

Averaged prediction of a bin
    ``U(S_i, b)`` is the prediction in force at the bin's start, the ones made
    during the bin and the one in force at its end (sect. 4.1). The sweep below
    measures, per bin, for how long each label was in force inside it, which is
    exactly the sum in the paper's formulas:

    * :func:`dominant_per_bin` -- ``d_D`` (sect. 4.1, classification): the label
      in force for the longest total time within the bin. **Ties** go to the
      label that came into force first within the bin (the label in force at
      the bin's start counts as coming into force at the start). ``None`` (a
      learner that knows no class yet) is an ordinary label here: if it was
      displayed longest, it is the bin's prediction, and it is never right.
    * :func:`average_per_bin` -- ``d_A`` (sect. 7.1.1, regression): the
      time-weighted average of the values in force. Time during which ``None``
      was in force is left out of the weights; a bin during which only ``None``
      was in force averages to ``None``.

    A bin of zero length (``Δ = 0``, i.e. latency 0) takes the prediction in
    force at its start -- the limit of the rule above for a shrinking bin. With
    a history holding only the first prediction, every bin is that prediction.

Each call sweeps the history and the bins together once: ``O(B + len(history))``.
:func:`dominant_per_bin`, called for every learner at every label, goes
faster: it finds the bin of each entry by bisection on the edges and only
looks inside the bins where the prediction changes, filling the bins between
with the label in force (``O(B)`` list copies plus ``O(len(history) log B)``),
with exactly the sweep's boundaries, durations and tie rule.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from typing import Any

from streameval.pipeline.reeval.history import columns

History = Sequence[tuple[float, Any]]


def _check(t_start: float, t_end: float, n_bins: int) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 0:
        raise ValueError(f"the number of bins must be an int >= 0, got {n_bins!r}")
    if not t_end >= t_start:
        raise ValueError(f"the label arrives before the features: t_start={t_start}, t_end={t_end}")


def _edge(t_start: float, t_end: float, b: int, n_bins: int) -> float:
    """The end of bin ``b`` (``0 <= b <= n_bins``); the start of bin ``b + 1``."""
    t_start, t_end = float(t_start), float(t_end)
    if b >= n_bins:
        return t_end
    return min(t_start + (t_end - t_start) * b / n_bins, t_end)


def _edges(t_start: float, t_end: float, n_bins: int) -> list[float]:
    """All ``n_bins + 1`` edges, each exactly as :func:`_edge` computes it."""
    t_start, t_end = float(t_start), float(t_end)
    delta = t_end - t_start
    edges = [min(t_start + delta * b / n_bins, t_end) for b in range(n_bins)]
    edges.append(t_end)
    return edges


_EDGES_CACHE: list[Any] = [None, None]  # [(t_start, t_end, n_bins), edges]: the last asked


def _edges_cached(t_start: float, t_end: float, n_bins: int) -> list[float]:
    """:func:`_edges`, remembered for the last waiting period (every learner of an
    instance asks for the same one). The list must not be modified."""
    key = (t_start, t_end, n_bins)
    if _EDGES_CACHE[0] != key:
        _EDGES_CACHE[1] = _edges(t_start, t_end, n_bins)
        _EDGES_CACHE[0] = key
    return _EDGES_CACHE[1]  # type: ignore[no-any-return]


def bin_edges(t_start: float, t_end: float, n_bins: int) -> list[float]:
    """The ``n_bins + 1`` edges of the bins of ``[t_start, t_end]``.

    Bin ``b`` (1-based) spans ``edges[b-1]`` to ``edges[b]``; ``edges[0]`` is
    ``t_start`` and ``edges[-1]`` is ``t_end`` exactly. Raises ``ValueError``
    for ``n_bins < 1`` (zero bins have no edges).

    >>> bin_edges(0, 100, 4)
    [0.0, 25.0, 50.0, 75.0, 100.0]
    >>> bin_edges(3.0, 3.0, 2)
    [3.0, 3.0, 3.0]
    """
    _check(t_start, t_end, n_bins)
    if n_bins < 1:
        raise ValueError("zero bins have no edges")
    return _edges(t_start, t_end, n_bins)


def bin_of(t: float, t_start: float, t_end: float, n_bins: int) -> int:
    """The bin (``1..n_bins``) of a re-prediction made at ``t`` in ``[t_start, t_end]``.

    Bins are half-open on the right except the last, closed at ``t_end``; so a
    prediction made exactly on an inner edge belongs to the later bin, and with
    ``t_start == t_end`` the only instant belongs to the last bin.

    >>> [bin_of(t, 0, 100, 4) for t in (0, 24.9, 25, 75, 100)]
    [1, 1, 2, 4, 4]
    """
    _check(t_start, t_end, n_bins)
    if n_bins < 1:
        raise ValueError("zero bins: no bin holds a re-prediction")
    if not t_start <= t <= t_end:
        raise ValueError(f"t={t} is outside the waiting period [{t_start}, {t_end}]")
    delta = t_end - t_start
    if delta <= 0:
        return n_bins
    b = min(max(int((t - t_start) * n_bins / delta) + 1, 1), n_bins)
    # The guess above may be off by one after rounding: settle it on the edges.
    while b > 1 and t < _edge(t_start, t_end, b - 1, n_bins):
        b -= 1
    while b < n_bins and t >= _edge(t_start, t_end, b, n_bins):
        b += 1
    return b


def _constant(history: History, t_start: float, t_end: float, n_bins: int) -> bool:
    """Whether the first prediction stays in force over the whole waiting period."""
    _check(t_start, t_end, n_bins)
    if not history:
        raise ValueError("an empty history: the first prediction is missing")
    return len(history) == 1 or history[1][0] > t_end


def _sweep(
    history: History, t_start: float, t_end: float, n_bins: int
) -> list[tuple[Any, dict[Any, float] | None, float]]:
    """Per bin: the label in force at its start, the time in force per label, its length.

    The durations are ``None`` when the label in force at the start stays in
    force over the whole bin (the common case, kept cheap); otherwise their keys
    are in the order the labels came into force within the bin.
    """
    _check(t_start, t_end, n_bins)
    if n_bins == 0:
        return []
    if not history:
        raise ValueError("an empty history: the first prediction is missing")
    edges = _edges(t_start, t_end, n_bins)
    times, labels = columns(history)
    out: list[tuple[Any, dict[Any, float] | None, float]] = []
    n = len(history)
    current = labels[0]
    j = 1
    # the time of the next entry, +inf once the history is used up
    next_t = times[1] if n > 1 else math.inf
    lo = edges[0]
    for hi in edges[1:]:
        while next_t <= lo:
            current = labels[j]
            j += 1
            next_t = times[j] if j < n else math.inf
        if next_t >= hi:
            out.append((current, None, hi - lo))
            lo = hi
            continue
        start = current
        durations: dict[Any, float] = {current: 0.0}
        pos = lo
        while next_t < hi:
            durations[current] += next_t - pos
            pos = next_t
            current = labels[j]
            if current not in durations:
                durations[current] = 0.0
            j += 1
            next_t = times[j] if j < n else math.inf
        durations[current] += hi - pos
        out.append((start, durations, hi - lo))
        lo = hi
    return out


def durations_per_bin(
    history: History, t_start: float, t_end: float, n_bins: int
) -> list[dict[Hashable, float]]:
    """For each bin, how long each label was in force inside it.

    Keys come in the order the labels came into force within the bin (the label
    in force at the bin's start first). The values of a bin sum to its length,
    so all bins together sum to the latency.

    >>> durations_per_bin([(0, "UP"), (12, "DOWN")], 0, 40, 2)
    [{'UP': 12.0, 'DOWN': 8.0}, {'DOWN': 20.0}]
    """
    return [
        {start: length} if durations is None else durations
        for start, durations, length in _sweep(history, t_start, t_end, n_bins)
    ]


def dominant_per_bin(history: History, t_start: float, t_end: float, n_bins: int) -> list[Any]:
    """``d_D`` for bins ``1..n_bins``: the label in force longest within each bin.

    ``delayed-labelling-continuous-reevaluation.txt``, sect. 4.1 (``d_D``).
    Ties go to the label that came into force first within the bin; a bin of
    zero length takes the label in force at its start; ``n_bins = 0`` gives
    ``[]``.

    >>> h = [(0, "UP"), (12, "DOWN"), (18, "UP"), (24, "DOWN")]
    >>> dominant_per_bin(h, t_start=0, t_end=40, n_bins=4)
    ['UP', 'DOWN', 'DOWN', 'DOWN']
    >>> dominant_per_bin([(0, "UP"), (15, "DOWN")], 0, 20, 1)  # 15 vs 5
    ['UP']
    >>> dominant_per_bin([(0, "UP"), (5, "DOWN")], 0, 10, 1)  # a 5-5 tie
    ['UP']
    """
    if _constant(history, t_start, t_end, n_bins):
        return [history[0][1]] * n_bins
    edges = _edges_cached(t_start, t_end, n_bins)
    times, labels = columns(history)
    out: list[Any] = []
    current = labels[0]
    n = len(history)
    j = 1
    done = 0  # bins 1..done are in out
    while j < n:
        t = times[j]
        k = bisect_left(edges, t)  # edges[k - 1] < t <= edges[k]
        if k > n_bins:  # after t_end: this entry and the later ones are ignored
            break
        if k == 0 or t == edges[k]:
            # on an edge (or before t_start): in force from the start of bin k + 1
            if k > done:
                out.extend([current] * (k - done))
                done = k
            current = labels[j]
            j += 1
            continue
        # inside bin k: the bins before it show the label in force, then weigh bin k
        if k - 1 > done:
            out.extend([current] * (k - 1 - done))
        lo, hi = edges[k - 1], edges[k]
        durations: dict[Any, float] = {current: 0.0}
        pos = lo
        while j < n and times[j] < hi:
            t = times[j]
            durations[current] += t - pos
            pos = t
            current = labels[j]
            if current not in durations:
                durations[current] = 0.0
            j += 1
        durations[current] += hi - pos
        # max keeps the first of equal maxima: the earliest in force
        out.append(max(durations, key=durations.__getitem__))
        done = k
    if done < n_bins:
        out.extend([current] * (n_bins - done))
    return out


def _dominant_by_sweep(history: History, t_start: float, t_end: float, n_bins: int) -> list[Any]:
    """:func:`dominant_per_bin` by the plain sweep (the reference the tests compare with)."""
    if _constant(history, t_start, t_end, n_bins):
        return [history[0][1]] * n_bins
    out: list[Any] = []
    for start, durations, _ in _sweep(history, t_start, t_end, n_bins):
        if durations is None:
            out.append(start)
        else:  # max keeps the first of equal maxima: the earliest in force
            out.append(max(durations, key=durations.__getitem__))
    return out


def average_per_bin(
    history: History, t_start: float, t_end: float, n_bins: int
) -> list[float | None]:
    """``d_A`` for bins ``1..n_bins``: the time-weighted average of the values in force.

    ``delayed-labelling-continuous-reevaluation.txt``, sect. 7.1.1 (``d_A``).
    Time during which ``None`` was in force is left out; a bin with no value in
    force for a positive time is ``None``; a bin of zero length takes the value
    in force at its start.

    >>> average_per_bin([(0, 1.0), (12, 3.0), (18, 2.0)], t_start=0, t_end=40, n_bins=2)
    [1.7, 2.0]
    >>> average_per_bin([(0, None), (5, 4.0)], 0, 20, 2)
    [4.0, 4.0]
    """
    if _constant(history, t_start, t_end, n_bins):
        first = history[0][1]
        return [None if first is None else float(first)] * n_bins
    out: list[float | None] = []
    for start, durations, _ in _sweep(history, t_start, t_end, n_bins):
        if durations is None:
            out.append(None if start is None else float(start))
            continue
        weighted = 0.0
        total = 0.0
        for value, duration in durations.items():
            if value is not None and duration > 0:
                weighted += value * duration
                total += duration
        out.append(weighted / total if total > 0 else None)
    return out
