"""A hand-computed stream run the way the experiment uses the buffer and the bins.

Instance A: features at ``t = a_start``, label at ``t = a_start + 100``. Other
instances ``o0, o1, ...``: features at ``10 j - 95``, labels at ``10 j + 5``,
i.e. one label at ``t = 5, 15, 25, ...`` (latency 100). At equal times features
come before labels (``streameval.pipeline.events``).
"""

from __future__ import annotations

from typing import Any

import pytest
from streameval.pipeline.reeval.bins import bin_of, dominant_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer, PendingInstance

FEATURE, LABEL = 0, 1


def _predict(n_labels_learned: int) -> str:
    """A learner whose answer for A flips once it has learned 5 labels."""
    return "UP" if n_labels_learned < 5 else "DOWN"


def _run(k: int, a_start: float = 0.0) -> tuple[PendingInstance, list[float], float]:
    events: list[tuple[float, int, str]] = []
    for j in range(20):
        events += [(10.0 * j - 95, FEATURE, f"o{j}"), (10.0 * j + 5, LABEL, f"o{j}")]
    events += [(a_start, FEATURE, "A"), (a_start + 100, LABEL, "A")]
    events.sort()
    buf = PendingBuffer(k=k)
    n_labels = 0
    arrivals = 0
    a_repredicted_at: list[float] = []
    result: dict[str, Any] = {}
    for ts, kind, uid in events:
        if kind == FEATURE:
            buf.add(uid, at=arrivals, ts=ts, x={}, labels_seen=n_labels)
            buf.record(uid, "m", ts, _predict(n_labels))
            arrivals += 1
            continue
        inst = buf.pop(uid)
        n_labels += 1  # labels seen so far, this one included (the count of Algorithm 1)
        if uid == "A":
            result["inst"], result["t_end"] = inst, ts
        for m in buf.due(n_labels):
            buf.record(m.uid, "m", ts, _predict(n_labels))
            if m.uid == "A":
                a_repredicted_at.append(ts)
    return result["inst"], a_repredicted_at, result["t_end"]


def test_k10_one_reprediction_in_the_last_bin() -> None:
    # labels since A arrived: t=5 -> 1, 15 -> 2, ..., 95 -> 10 (a multiple of K=10), 100 -> A's.
    inst, times, t_end = _run(k=10)
    assert times == [95.0] and inst.n_repredictions == 1 and t_end == 100.0
    assert bin_of(95.0, inst.ts, t_end, 4) == 4  # [75, 100]
    assert bin_of(95.0, inst.ts, t_end, 10) == 10  # [90, 100]
    # 10 labels learned at t=95: DOWN from then on; bins of 25 and of 10
    assert inst.history["m"] == [(0.0, "UP"), (95.0, "DOWN")]
    assert dominant_per_bin(inst.history["m"], inst.ts, t_end, 4) == ["UP"] * 4
    assert dominant_per_bin(inst.history["m"], inst.ts, t_end, 10) == ["UP"] * 10


def test_k3_three_repredictions_one_on_an_edge() -> None:
    # multiples of 3 labels since arrival: 3 at t=25, 6 at t=55, 9 at t=85 (12th would be 115)
    inst, times, t_end = _run(k=3)
    assert times == [25.0, 55.0, 85.0] and inst.n_repredictions == 3
    # B=4: [0,25) [25,50) [50,75) [75,100] -- 25 is on an edge and starts bin 2
    assert [bin_of(t, 0.0, t_end, 4) for t in times] == [2, 3, 4]
    # B=10: bins of 10
    assert [bin_of(t, 0.0, t_end, 10) for t in times] == [3, 6, 9]
    # predictions: UP at 0 (0 labels), UP at 25 (3, merged), DOWN at 55 (6), DOWN at 85 (merged)
    assert inst.history["m"] == [(0.0, "UP"), (55.0, "DOWN")]
    # B=4: bin 3 [50,75) has UP 5, DOWN 20 -> DOWN
    assert dominant_per_bin(inst.history["m"], 0.0, t_end, 4) == ["UP", "UP", "DOWN", "DOWN"]
    # B=10: bin 6 [50,60) has UP 5, DOWN 5 -> tie -> UP, in force at the bin's start
    assert dominant_per_bin(inst.history["m"], 0.0, t_end, 10) == ["UP"] * 6 + ["DOWN"] * 4


def test_k3_counting_starts_at_arrival() -> None:
    # A arrives at t=30 after 3 labels (5, 15, 25); its label at 130.
    # labels since arrival: 35 -> 1, ..., 55 -> 3, 85 -> 6, 115 -> 9, 125 -> 10
    inst, times, t_end = _run(k=3, a_start=30.0)
    assert inst.labels_seen == 3
    assert times == [55.0, 85.0, 115.0]
    # B=4: [30,55) [55,80) [80,105) [105,130] -- 55 is on an edge and starts bin 2
    assert [bin_of(t, 30.0, t_end, 4) for t in times] == [2, 3, 4]
    assert [bin_of(t, 30.0, t_end, 10) for t in times] == [3, 6, 9]
    # predictions: UP at 30 (3 learned), DOWN at 55 (6 learned) -- on the edge of bin 2 (B=4)
    assert inst.history["m"] == [(30.0, "UP"), (55.0, "DOWN")]
    assert dominant_per_bin(inst.history["m"], 30.0, t_end, 4) == ["UP", "DOWN", "DOWN", "DOWN"]


@pytest.mark.parametrize("k", [1, 2, 5, 10, 50])
def test_no_more_repredictions_than_labels_over_k(k: int) -> None:
    # sect. 6.1: at most (labels arriving while A waits) / K re-predictions
    inst, times, _ = _run(k=k)
    assert inst.n_repredictions == len(times) == 10 // k
