"""Bins of a waiting period, d_D and d_A (delayed-labelling paper, sect. 4.1 and 7.1)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streameval.pipeline.reeval.bins import (
    average_per_bin,
    bin_edges,
    bin_of,
    dominant_per_bin,
    durations_per_bin,
)

UP, DOWN = "UP", "DOWN"
CRAFTED = [(0, UP), (12, DOWN), (18, UP), (24, DOWN)]


# --- edges and bin_of ---------------------------------------------------------------


def test_edges_are_equal_slices_ending_exactly_at_t_end() -> None:
    assert bin_edges(0, 40, 4) == [0.0, 10.0, 20.0, 30.0, 40.0]
    edges = bin_edges(0.1, 0.7, 3)
    assert edges[0] == 0.1 and edges[-1] == 0.7


def test_bin_of_half_open_bins_last_one_closed() -> None:
    # [0,25) [25,50) [50,75) [75,100]
    times = (0, 24.999, 25, 49.999, 50, 75, 99.9, 100)
    assert [bin_of(t, 0, 100, 4) for t in times] == [1, 1, 2, 2, 3, 4, 4, 4]
    # with a shifted start and B = 10: bins of 10 starting at 30
    assert [bin_of(t, 30, 130, 10) for t in (30, 39.9, 40, 125, 130)] == [1, 1, 2, 10, 10]


def test_bin_of_zero_latency_is_the_closed_last_bin() -> None:
    assert bin_of(5.0, 5.0, 5.0, 4) == 4


@pytest.mark.parametrize(
    "args",
    [(-1, 0, 10, 4), (11, 0, 10, 4), (5, 0, 10, 0), (5, 10, 0, 4)],
)
def test_bin_of_rejects(args: tuple[float, float, float, int]) -> None:
    with pytest.raises(ValueError):
        bin_of(*args)


def test_edges_reject_bad_input() -> None:
    with pytest.raises(ValueError):
        bin_edges(0, 10, 0)
    with pytest.raises(ValueError):
        bin_edges(10, 0, 2)
    with pytest.raises(ValueError):
        dominant_per_bin([(0, UP)], 0, 10, -1)
    with pytest.raises(ValueError):
        dominant_per_bin([], 0, 10, 2)


@given(
    t_start=st.floats(-1e6, 1e6),
    delta=st.floats(0, 1e6),
    n_bins=st.integers(1, 100),
    u=st.floats(0, 1),
)
def test_bin_of_agrees_with_edges(t_start: float, delta: float, n_bins: int, u: float) -> None:
    t_end = t_start + delta
    t = min(max(t_start + u * (t_end - t_start), t_start), t_end)
    b = bin_of(t, t_start, t_end, n_bins)
    edges = bin_edges(t_start, t_end, n_bins)
    assert 1 <= b <= n_bins
    if t_end > t_start:
        assert edges[b - 1] <= t
        assert t < edges[b] or (b == n_bins and t == t_end)


# --- d_D by hand ----------------------------------------------------------------------


def test_dominant_crafted_history_by_hand() -> None:
    # B = 4 over [0, 40]: bins of 10.
    # bin 1 [0,10):  UP 10                              -> UP
    # bin 2 [10,20): UP 2 (10-12), DOWN 6, UP 2 (18-20) -> UP 4 vs DOWN 6 -> DOWN
    # bin 3 [20,30): UP 4 (20-24), DOWN 6               -> DOWN
    # bin 4 [30,40]: DOWN 10                            -> DOWN
    assert dominant_per_bin(CRAFTED, t_start=0, t_end=40, n_bins=4) == [UP, DOWN, DOWN, DOWN]
    assert durations_per_bin(CRAFTED, 0, 40, 4) == [
        {UP: 10.0},
        {UP: 4.0, DOWN: 6.0},
        {UP: 4.0, DOWN: 6.0},
        {DOWN: 10.0},
    ]
    # B = 2 over [0, 40]: bin 1 [0,20): UP 12 + 2 = 14, DOWN 6 -> UP; bin 2: UP 4, DOWN 16.
    assert dominant_per_bin(CRAFTED, 0, 40, 2) == [UP, DOWN]
    # B = 1: UP 18, DOWN 22 -> DOWN
    assert dominant_per_bin(CRAFTED, 0, 40, 1) == [DOWN]


def test_dominant_tie_goes_to_the_label_in_force_at_the_bin_start() -> None:
    # B = 4 over [0, 40], UP at 0, DOWN at 15: bin 2 [10,20) has UP 5, DOWN 5 -> UP.
    assert dominant_per_bin([(0, UP), (15, DOWN)], 0, 40, 4) == [UP, UP, DOWN, DOWN]
    # ... and DOWN at 5 then UP at 15: bin 2 DOWN 5 (in force at 10) vs UP 5 -> DOWN.
    h = [(0, UP), (5, DOWN), (15, UP)]
    assert dominant_per_bin(h, 0, 40, 4) == [UP, DOWN, UP, UP]


def test_dominant_tie_goes_to_the_label_first_in_force_within_the_bin() -> None:
    # bin [10,20): A 1 (10-11) + 1 (19-20) = 2, B 4 (11-15), C 4 (15-19): B and C tie,
    # B came into force first.
    h = [(0, "A"), (11, "B"), (15, "C"), (19, "A")]
    assert dominant_per_bin(h, 0, 20, 2) == ["A", "B"]
    # a label that returns keeps the rank of its first coming into force: A 5 + 5, B 10
    h = [(0, "A"), (5, "B"), (15, "A")]
    assert dominant_per_bin(h, 0, 20, 1) == ["A"]
    # ... whereas B wins a tie it entered first: A 0 (in force at 0 for no time), B 10, C 10
    h = [(0, "A"), (0, "B"), (10, "C")]
    assert dominant_per_bin(h, 0, 20, 1) == ["B"]


def test_prediction_on_an_edge_starts_the_next_bin() -> None:
    # DOWN made exactly at 10, the start of bin 2: bin 1 all UP, bin 2 all DOWN.
    assert durations_per_bin([(0, UP), (10, DOWN)], 0, 20, 2) == [{UP: 10.0}, {DOWN: 10.0}]


def test_same_instant_predictions_last_one_is_in_force() -> None:
    h = [(0, UP), (10, DOWN), (10, UP)]
    assert durations_per_bin(h, 0, 20, 1) == [{UP: 20.0, DOWN: 0.0}]
    assert dominant_per_bin(h, 0, 20, 2) == [UP, UP]


def test_predictions_at_the_label_time_weigh_nothing_and_later_ones_are_ignored() -> None:
    h = [(0, UP), (40, DOWN), (50, DOWN)]
    assert dominant_per_bin(h, 0, 40, 4) == [UP] * 4
    assert dominant_per_bin([(0, UP), (50, DOWN)], 0, 40, 2) == [UP, UP]
    assert average_per_bin([(0, 1), (50, 2.0)], 0, 40, 2) == [1.0, 1.0]


def test_zero_latency_every_bin_is_the_first_prediction() -> None:
    assert dominant_per_bin([(7.0, UP)], t_start=7.0, t_end=7.0, n_bins=5) == [UP] * 5
    assert average_per_bin([(7.0, 2.5)], 7.0, 7.0, 3) == [2.5] * 3
    # a re-prediction made at the same instant is the one in force (limit of a shrinking bin)
    assert dominant_per_bin([(7.0, UP), (7.0, DOWN)], 7.0, 7.0, 2) == [DOWN, DOWN]


def test_zero_bins_give_an_empty_list() -> None:
    assert dominant_per_bin(CRAFTED, 0, 40, 0) == []
    assert average_per_bin([(0, 1.0)], 0, 40, 0) == []
    assert durations_per_bin(CRAFTED, 0, 40, 0) == []


def test_varied_latencies_each_instance_its_own_bins() -> None:
    # the same two predictions, UP at 0 and DOWN at 30, under latencies 40 and 120 (B = 4)
    h = [(0, UP), (30, DOWN)]
    assert dominant_per_bin(h, 0, 40, 4) == [UP, UP, UP, DOWN]
    assert dominant_per_bin(h, 0, 120, 4) == [UP, DOWN, DOWN, DOWN]


def test_none_is_an_ordinary_label_for_dominant() -> None:
    assert dominant_per_bin([(0, None), (8, UP)], 0, 10, 1) == [None]


# --- d_A by hand ----------------------------------------------------------------------


def test_average_by_hand() -> None:
    h = [(0, 1.0), (12, 3.0), (18, 2.0)]
    # B = 2 over [0, 40]: bin 1 [0,20): (1*12 + 3*6 + 2*2) / 20 = 34/20 = 1.7; bin 2: 2.0
    assert average_per_bin(h, 0, 40, 2) == pytest.approx([1.7, 2.0])
    # B = 4: [0,10): 1; [10,20): (1*2 + 3*6 + 2*2)/10 = 2.4; then 2 and 2
    assert average_per_bin(h, 0, 40, 4) == pytest.approx([1.0, 2.4, 2.0, 2.0])


def test_average_skips_time_without_a_value() -> None:
    # None in force over [0,5): bin 1 [0,10) averages 4.0 over [5,10) only
    assert average_per_bin([(0, None), (5, 4.0), (15, 6.0)], 0, 20, 2) == pytest.approx([4.0, 5.0])
    assert average_per_bin([(0, None)], 0, 20, 2) == [None, None]
    # a value in force for no time does not count
    assert average_per_bin([(0, None), (10, 1.0), (10, None)], 0, 20, 1) == [None]


# --- properties -----------------------------------------------------------------------


@st.composite
def timelines(draw: st.DrawFn, integral: bool) -> tuple[list[tuple[float, str]], float, float, int]:
    n_bins = draw(st.integers(1, 30))
    if integral:  # integer times and edges: every duration exact, ties comparable
        t_start = float(draw(st.integers(-100, 100)))
        delta = float(n_bins * draw(st.integers(0, 5)))
        times = st.integers(int(t_start), int(t_start + delta)).map(float)
    else:
        t_start = draw(st.floats(-1e4, 1e4))
        delta = draw(st.floats(0, 1e4))
        times = st.floats(t_start, t_start + delta)
    t_end = t_start + delta
    labels = st.sampled_from("abc")
    later = sorted(draw(st.lists(times, max_size=25)))
    history = [(t_start, draw(labels))] + [(t, draw(labels)) for t in later]
    return history, t_start, t_end, n_bins


@given(timelines(integral=False))
def test_bins_partition_the_waiting_period(case: tuple) -> None:
    history, t_start, t_end, n_bins = case
    delta = t_end - t_start
    per_bin = durations_per_bin(history, t_start, t_end, n_bins)
    assert len(per_bin) == n_bins
    tol = 1e-9 * max(1.0, abs(t_start), abs(t_end))
    for durations in per_bin:
        assert all(d >= -tol for d in durations.values())
        assert math.isclose(sum(durations.values()), delta / n_bins, abs_tol=tol * 4)
    total = sum(sum(d.values()) for d in per_bin)
    assert math.isclose(total, delta, abs_tol=tol * 4 * n_bins)


def _in_force(history: list[tuple[float, str]], t: float) -> str:
    label = history[0][1]
    for when, y in history[1:]:
        if when <= t:
            label = y
    return label


def _reference_durations(
    history: list[tuple[float, str]], lo: float, hi: float
) -> dict[str, float]:
    """Integrate the in-force label over [lo, hi) from scratch (O(len(history)) per bin)."""
    points = sorted({lo, hi} | {t for t, _ in history if lo < t < hi})
    out: dict[str, float] = {_in_force(history, lo): 0.0}
    for a, b in itertools.pairwise(points):
        # the label coming into force at a, in recording order of the entries at a
        for t, y in history[1:]:
            if t == a and a > lo:
                out.setdefault(y, 0.0)
        label = _in_force(history, a)
        out[label] = out.get(label, 0.0) + (b - a)
    return out


@given(timelines(integral=True))
def test_dominant_matches_a_from_scratch_integration(case: tuple) -> None:
    history, t_start, t_end, n_bins = case
    edges = bin_edges(t_start, t_end, n_bins)
    expected = []
    for b in range(n_bins):
        lo, hi = edges[b], edges[b + 1]
        if hi == lo:
            expected.append(_in_force(history, lo))
            continue
        ref = _reference_durations(history, lo, hi)
        best = max(ref.values())
        expected.append(next(y for y, d in ref.items() if d == best))
    assert dominant_per_bin(history, t_start, t_end, n_bins) == expected


@given(timelines(integral=True))
def test_average_matches_a_from_scratch_integration(case: tuple) -> None:
    history, t_start, t_end, n_bins = case
    numeric = [(t, float("abc".index(y))) for t, y in history]
    edges = bin_edges(t_start, t_end, n_bins)
    expected = []
    for b in range(n_bins):
        lo, hi = edges[b], edges[b + 1]
        if hi == lo:
            expected.append(float("abc".index(_in_force(history, lo))))
            continue
        ref = _reference_durations(history, lo, hi)
        expected.append(sum("abc".index(y) * d for y, d in ref.items()) / (hi - lo))
    assert average_per_bin(numeric, t_start, t_end, n_bins) == pytest.approx(expected)


@given(timelines(integral=False))
def test_merging_repeated_predictions_changes_nothing(case: tuple) -> None:
    history, t_start, t_end, n_bins = case
    compact = [history[0]]
    for entry in history[1:]:
        if entry[1] != compact[-1][1]:
            compact.append(entry)
    assert dominant_per_bin(compact, t_start, t_end, n_bins) == dominant_per_bin(
        history, t_start, t_end, n_bins
    )
