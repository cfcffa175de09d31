"""The weighted summary Psi_W and its weight presets (delayed-labelling paper, sect. 7.3)."""

from __future__ import annotations

import itertools

import pytest
from streameval.pipeline.reeval.summary import DEFAULT_RATE, weighted_summary, weights_preset

# binned accuracy for B = 2: bins 0 (first), 1, 2, 3 (test-then-train)
ACC = [0.5, 0.6, 0.8, 0.9]


def test_presets_reproduce_the_papers_special_cases() -> None:
    assert weighted_summary(ACC, weights_preset("first-time", 4)) == 0.5
    assert weighted_summary(ACC, weights_preset("test-then-train", 4)) == 0.9
    assert weighted_summary(ACC, weights_preset("uniform", 4)) == pytest.approx(0.7)
    assert weighted_summary(ACC, weights_preset("1,0,0,1", 4)) == pytest.approx(0.7)


def test_exponential_weights() -> None:
    assert weights_preset("exponential", 3) == pytest.approx([1.0, DEFAULT_RATE, DEFAULT_RATE**2])
    assert weights_preset("exponential", 3, rate=3.0) == [1.0, 3.0, 9.0]
    w = weights_preset("exponential[rate=2]", 4, rate=3.0)  # the name wins
    assert w == [1.0, 2.0, 4.0, 8.0]
    # (0.5*1 + 0.6*2 + 0.8*4 + 0.9*8) / 15 = 12.1 / 15
    assert weighted_summary(ACC, w) == pytest.approx(12.1 / 15)
    # growing: each bin at least as heavy as the one before, the last the heaviest
    w = weights_preset("exponential", 52)
    assert all(a < b for a, b in itertools.pairwise(w))
    assert w[-1] / w[0] == pytest.approx(DEFAULT_RATE**51)


def test_vectors_with_an_ellipsis() -> None:
    assert weights_preset("1,0,...,0,1", 6) == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert weights_preset("1, 0, …, 0, 1", 4) == [1.0, 0.0, 0.0, 1.0]  # an empty gap
    assert weights_preset("0,...,1", 3) == [0.0, 0.0, 1.0]  # `...` repeats the 0 before it
    assert weights_preset("0, 0.5, 1", 3) == [0.0, 0.5, 1.0]


def test_zero_weight_bins_are_left_out() -> None:
    assert weighted_summary([0.5, float("nan"), 0.9], [1, 0, 1]) == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("values", "weights"),
    [
        ([0.5, 0.6], [1, 1, 1]),  # lengths differ
        ([0.5, 0.6], [1, -1]),  # negative
        ([0.5, 0.6], [0, 0]),  # all zero
        ([0.5, 0.6], [1, float("inf")]),
        ([], []),
    ],
)
def test_weighted_summary_rejects(values: list[float], weights: list[float]) -> None:
    with pytest.raises(ValueError):
        weighted_summary(values, weights)


@pytest.mark.parametrize(
    ("name", "n"),
    [
        ("1,0,0", 4),  # too short
        ("1,0,0,0,1", 4),  # too long
        ("1,0,...,0,0,1", 4),  # too long even with an empty gap
        ("1,-1,0,1", 4),
        ("0,0,0,0", 4),
        ("1,x,0,1", 4),
        ("...,1", 4),
        ("1,...,0,...,1", 6),
        ("sideways", 4),
        ("uniform[rate=2]", 4),
        ("exponential[rate=0]", 4),
        ("exponential[speed=2]", 4),
        ("uniform", 1),  # n_bins_total is B + 2 >= 2
    ],
)
def test_weights_preset_rejects(name: str, n: int) -> None:
    with pytest.raises(ValueError):
        weights_preset(name, n)


def test_exponential_overflow_is_an_error() -> None:
    with pytest.raises(ValueError):
        weights_preset("exponential", 100_000, rate=10.0)
