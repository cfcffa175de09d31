"""PredictionHistory: the compact (t, label) history of a pending instance."""

from __future__ import annotations

import pickle
import sys

import pytest
from streameval.pipeline.reeval.bins import average_per_bin, dominant_per_bin, durations_per_bin
from streameval.pipeline.reeval.history import PredictionHistory, columns

from streameval.bench import deep_sizeof

ENTRIES = [(0.0, "UP"), (12.0, "DOWN"), (18.0, "UP"), (24.0, "DOWN"), (39.5, "UP")]


def history_of(entries: list[tuple[float, object]]) -> PredictionHistory:
    h = PredictionHistory(*entries[0])
    for entry in entries[1:]:
        h.append(entry)
    assert h == PredictionHistory.of(entries)
    return h


def test_reads_like_the_list_it_replaces() -> None:
    h = history_of(ENTRIES)
    assert len(h) == 5 and h[0] == (0.0, "UP") and h[-1] == (39.5, "UP") and h[3][0] == 24.0
    assert list(h) == ENTRIES and h == ENTRIES and h != ENTRIES[:-1]
    assert h == history_of(ENTRIES) and h != history_of(ENTRIES[:2])
    assert columns(h) == (h.times, h.labels)
    assert columns(ENTRIES)[0] == [0.0, 12.0, 18.0, 24.0, 39.5]
    with pytest.raises(IndexError):
        h[5]


def test_pickles_exactly() -> None:
    h = history_of([(0.1, "a"), (1e-300, None), (2.5, 3.25)])
    back = pickle.loads(pickle.dumps(h))
    assert back == h and back.times == [0.1, 1e-300, 2.5] and back.labels == ["a", None, 3.25]


@pytest.mark.parametrize("n_bins", [1, 2, 4, 7, 50])
def test_bins_read_it_as_they_read_the_list(n_bins: int) -> None:
    h = history_of(ENTRIES)
    assert dominant_per_bin(h, 0.0, 40.0, n_bins) == dominant_per_bin(ENTRIES, 0.0, 40.0, n_bins)
    assert durations_per_bin(h, 0.0, 40.0, n_bins) == durations_per_bin(ENTRIES, 0.0, 40.0, n_bins)
    values = [(0.0, 1.0), (12.0, 3.0), (18.0, None), (24.0, 2.0)]
    assert average_per_bin(history_of(values), 0.0, 40.0, n_bins) == average_per_bin(
        values, 0.0, 40.0, n_bins
    )


def test_an_entry_costs_a_fraction_of_a_tuple_in_a_list() -> None:
    labels = ["UP", "DOWN"]  # class labels: shared objects
    rounds = [float(i) for i in range(1000)]  # one time per re-evaluation round, shared
    entries = [(rounds[i], labels[i % 2]) for i in range(1000)]
    shared = (
        deep_sizeof(labels) + deep_sizeof(rounds) - sys.getsizeof(labels) - sys.getsizeof(rounds)
    )
    compact = deep_sizeof(history_of(entries)) - shared
    plain = deep_sizeof(entries) - shared
    # two 8-byte references, plus over-allocation; a list of tuples: a 56-byte tuple more
    assert 16 <= compact / 1000 < 20 and plain / 1000 >= 64, (compact, plain)
