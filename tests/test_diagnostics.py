"""Temporal dependence diagnostics: hand-computed cases, brute force, real datasets."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.diagnostics import TemporalDependence, diagnose
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.datasets import load


def stats_of(labels: str | list[str], **kwargs: int) -> dict:
    td = TemporalDependence(**kwargs)
    for y in labels:
        td.update(y)
    return td.get()


def test_hand_computed_small_sequence() -> None:
    # A A B A A A B: pairs AA AB BA AA AA AB
    s = stats_of("AABAAAB", max_lag=2)
    assert s["n"] == 7
    assert s["priors"] == {"A": 5 / 7, "B": 2 / 7}
    assert (s["majority"], s["p_majority"]) == ("A", 5 / 7)
    assert s["p_same"] == 3 / 6
    assert s["iid_baseline"] == pytest.approx((5 / 7) ** 2 + (2 / 7) ** 2)
    assert s["dependent"] is False
    assert s["transition"] == {"A": {"A": 3 / 5, "B": 2 / 5}, "B": {"A": 1.0, "B": 0.0}}
    # class A: P(A) = 5/7; after one A (t = 1,3,4,5,6): A,B,A,A,B -> 3/5;
    # after two As (t = 2,5,6): B,A,B -> 1/3; after three As (t = 6): B -> 0
    assert s["p_given_run"]["A"] == pytest.approx([5 / 7, 3 / 5, 1 / 3, 0.0])
    assert s["delta"]["A"] == pytest.approx([5 / 7 - 3 / 5, 3 / 5 - 1 / 3, 1 / 3])
    # class B: P(B) = 2/7; after one B (t = 3): A -> 0; never two Bs in a row
    assert s["p_given_run"]["B"] == [2 / 7, 0.0, None, None]
    assert s["delta"]["B"] == [2 / 7, None, None]


def test_quick_test_verdicts() -> None:
    sticky = stats_of("A" * 30 + "B" * 30 + "A" * 40, quick_n=100)["quick_test"]
    # majority A = 70/100; persistent: 97 equal pairs out of 99
    assert sticky["n"] == 100 and sticky["majority"] == "A"
    assert sticky["p_majority"] == 0.7 and sticky["p_persistent"] == 97 / 99
    assert sticky["persistent_wins"] is True
    assert "Temporally Augmented" in sticky["verdict"]
    flipping = stats_of("AB" * 10 + "A" * 200, quick_n=20)["quick_test"]
    assert flipping["n"] == 20 and flipping["p_persistent"] == 0.0
    assert flipping["p_majority"] == 0.5 and flipping["persistent_wins"] is False
    assert flipping["verdict"].startswith("no sign")
    assert stats_of("A", quick_n=5)["quick_test"]["persistent_wins"] is False


def test_dependent_is_proposition_7() -> None:
    assert stats_of("AAAABBBB")["dependent"] is True  # P(T) = 6/7 > P(M) = 1/2
    assert stats_of("ABABABAB")["dependent"] is False


def test_empty_and_single() -> None:
    empty = TemporalDependence().get()
    assert empty["n"] == 0 and empty["p_same"] is None and empty["priors"] == {}
    one = stats_of("A")
    assert one["p_same"] is None and one["priors"] == {"A": 1.0} and one["transition"] == {}


def brute_conditional(labels: list[str], label: str, m: int) -> float | None:
    hits = [labels[t] == label for t in range(m, len(labels)) if set(labels[t - m : t]) <= {label}]
    return sum(hits) / len(hits) if hits else None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from("xyz"), min_size=2, max_size=80), st.integers(0, 4))
def test_incremental_matches_brute_force(labels: list[str], max_lag: int) -> None:
    s = stats_of(labels, max_lag=max_lag)
    counts = Counter(labels)
    for label in counts:
        expected = [counts[label] / len(labels)] + [
            brute_conditional(labels, label, m) for m in range(1, max_lag + 2)
        ]
        got = s["p_given_run"][label]
        assert len(got) == max_lag + 2
        for a, b in zip(got, expected, strict=True):
            assert (a is None and b is None) or a == pytest.approx(b)
    pairs = list(itertools.pairwise(labels))
    assert s["p_same"] == pytest.approx(sum(a == b for a, b in pairs) / len(pairs))


def test_diagnose_instances_and_dataset() -> None:
    items = [Instance(str(i), float(i), {}, y) for i, y in enumerate("AABBB")]
    assert diagnose(items)["p_same"] == 3 / 4
    markov = diagnose(load("markov[k=4,p_stay=0.6,n=20000,seed=3]"), max_lag=2)
    assert abs(markov["p_same"] - 0.6) < 0.02 and markov["dependent"] is True
    # first-order chain: Delta(0) = 1/4 - 0.6, no higher-order dependence
    for deltas in markov["delta"].values():
        assert deltas[0] == pytest.approx(0.25 - 0.6, abs=0.03)
        assert abs(deltas[1]) < 0.03 and abs(deltas[2]) < 0.04


# --- the real datasets (labels only, whole files) ----------------------------------------


@pytest.mark.slow
def test_electricity_labels(data_dir: Path) -> None:
    s = diagnose(load("electricity", data_dir))
    assert s["n"] == 45_312
    assert round(s["p_same"], 4) == 0.8533
    assert round(s["iid_baseline"], 4) == 0.5114
    assert round(s["priors"]["DOWN"], 4) == 0.5755 and s["majority"] == "DOWN"
    assert s["dependent"] is True and s["quick_test"]["persistent_wins"] is True
    for deltas in s["delta"].values():  # strong first-order, some second-order dependence
        assert deltas[0] < -0.25 and deltas[1] < -0.01


@pytest.mark.slow
def test_covtype_labels(data_dir: Path) -> None:
    counts = Counter(load("covtype", data_dir).iter_labels())
    assert counts == {
        "1": 211_840,
        "2": 283_301,
        "3": 35_754,
        "4": 2_747,
        "5": 9_493,
        "6": 17_367,
        "7": 20_510,
    }
    s = diagnose(load("covtype", data_dir))
    assert round(s["p_same"], 4) == 0.9506 and round(s["iid_baseline"], 4) == 0.3769
    assert s["dependent"] is True


@pytest.mark.slow
def test_airlines_labels(data_dir: Path) -> None:
    s = diagnose(load("airlines", data_dir))
    assert s["n"] == 539_383
    assert round(s["p_same"], 4) == 0.5805 and round(s["iid_baseline"], 4) == 0.5060
    assert round(s["priors"]["0"], 4) == 0.5546
    # P(T) = 0.58 > P(M) = 0.55 over the stream, yet the first 100 labels say otherwise
    assert s["dependent"] is True and s["quick_test"]["persistent_wins"] is False


def test_within_class_shuffle_keeps_p_same(data_dir: Path) -> None:
    spec = "electricity[n=5000{}]"
    plain = diagnose(load(spec.format(""), data_dir))
    within = diagnose(load(spec.format(",shuffle=within-class,seed=2"), data_dir))
    full = diagnose(load(spec.format(",shuffle=full,seed=2"), data_dir))
    assert within["p_same"] == plain["p_same"]
    assert abs(full["p_same"] - full["iid_baseline"]) < 0.03


def test_delta_in_both_readings_on_a_hand_computed_stream() -> None:
    # A A B A A A B, class A: P(A | m previous are A) = 5/7, 3/5, 1/3, 0 for m = 0..3
    s = stats_of("AABAAAB", max_lag=2)
    # the formula as sect. 6.8 prints it: l = 0..2, P(. | l) - P(. | l + 1)
    assert s["delta"]["A"] == pytest.approx([5 / 7 - 3 / 5, 3 / 5 - 1 / 3, 1 / 3 - 0])
    # the paper's text: l = 1..3, the gain of the l-th previous A, P(. | l) - P(. | l - 1)
    assert s["delta_paper"]["A"] == pytest.approx([3 / 5 - 5 / 7, 1 / 3 - 3 / 5, 0 - 1 / 3])
    assert s["delta_paper"]["B"] == [-2 / 7, None, None]
    from streameval.pipeline.report.table import diagnostics_table

    text = diagnostics_table(s, "paper")
    assert "l = 1..L+1" in text and "A:  -0.1143  -0.2667  -0.3333" in text
    assert "A:   0.1143   0.2667   0.3333" in diagnostics_table(s)
    with pytest.raises(ValueError, match="delta reading 'other'"):
        diagnostics_table(s, "other")


def test_the_printed_transitions_show_a_label_that_only_came_last() -> None:
    # a a b: a follows a once, b follows a once; b precedes nothing, so it is a column only
    from streameval.pipeline.report.table import diagnostics_table

    s = stats_of("aab", max_lag=1)
    assert s["transition"] == {"a": {"a": 0.5, "b": 0.5}}
    lines = diagnostics_table(s).splitlines()
    at = lines.index("transition P(y_t=col | y_t-1=row):")
    assert lines[at + 1].split() == ["a", "b"]
    assert lines[at + 2].split() == ["a", "0.5000", "0.5000"]


def test_electricity_delta_48_is_the_papers_in_its_own_reading(data_dir: Path) -> None:
    """Sect. 6.8 reports Delta(48) = 0.02 on Elec2: the paper's reading gives it, the
    formula's gives -0.002 at l = 48 (and -0.022 at l = 47)."""
    s = diagnose(load("electricity", data_dir=data_dir), max_lag=48)
    assert round(s["delta_paper"]["DOWN"][48 - 1], 2) == 0.02
    assert round(s["delta"]["DOWN"][48], 3) == -0.002
