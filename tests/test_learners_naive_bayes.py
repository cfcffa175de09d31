"""The mixed naive Bayes on features without spread in a class (MOA's point mass).

River's ``GaussianNB`` gives a feature that is constant within a class a density of 0
(``log(1e-9)``) even at that constant, so 0/1 indicator columns (Covertype's 44) swamp
the informative ones; :class:`PointMassGaussianNB` gives the constant the density 1, as
MOA's ``GaussianEstimator`` does, and is river's ``GaussianNB`` wherever every class has
spread.
"""

from __future__ import annotations

import math
import random

import pytest
from river import naive_bayes
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.learners import MixedNB
from streameval.pipeline.learners.naive_bayes import PointMassGaussianNB


def _indicator_stream(n: int, seed: int = 7) -> list[tuple[dict[str, float], str]]:
    """Class A: ``t`` around 0, ten indicators always 0; class B: ``t`` around 1.5, each
    indicator 1 with probability 0.3 (a Covertype soil column in miniature)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        y = rng.choice("AB")
        x = {"t": rng.gauss(0.0 if y == "A" else 1.5, 1.0)}
        x |= {f"b{j}": float(y == "B" and rng.random() < 0.3) for j in range(10)}
        rows.append((x, y))
    return rows


def _accuracy(model, rows) -> float:
    hits = scored = 0
    for x, y in rows:
        proba = model.predict_proba_one(x)
        if proba:
            hits += max(proba, key=proba.get) == y
            scored += 1
        model.learn_one(x, y)
    return hits / scored


def test_a_point_mass_by_hand() -> None:
    model = PointMassGaussianNB()
    for x, y in [(3.0, "A"), (3.0, "A"), (2.0, "B"), (4.0, "B")]:
        model.learn_one({"v": x}, y)
    # A: the point 3 (density 1); B: N(3; mean 3, variance 1) = 1 / sqrt(2 pi); priors equal
    pdf_b = 1.0 / math.sqrt(2.0 * math.pi)
    expected_a = (1.0 + 1e-9) / (1.0 + 1e-9 + pdf_b + 1e-9)
    assert model.predict_proba_one({"v": 3.0})["A"] == pytest.approx(expected_a, rel=1e-12)
    # off the point: A has only river's floor left, B its density at 3.5
    pdf_b = math.exp(-0.125) / math.sqrt(2.0 * math.pi)
    expected_a = 1e-9 / (1e-9 + pdf_b + 1e-9)
    assert model.predict_proba_one({"v": 3.5})["A"] == pytest.approx(expected_a, rel=1e-9)


def test_river_gaussian_nb_wherever_every_class_has_spread() -> None:
    rng = random.Random(3)
    ours, river = PointMassGaussianNB(), naive_bayes.GaussianNB()
    compared = 0
    for i in range(600):
        y = rng.choice("ABC")
        x = {"u": rng.gauss(ord(y), 2.0), "w": rng.uniform(0, 1)}
        if i > 30:  # every class has seen two distinct values of every feature
            assert ours.joint_log_likelihood(x) == river.joint_log_likelihood(x)
            compared += 1
        ours.learn_one(x, y)
        river.learn_one(x, y)
    assert compared == 569


def test_indicator_columns_no_longer_swamp_the_informative_feature() -> None:
    rows = _indicator_stream(3000)
    river_acc = _accuracy(naive_bayes.GaussianNB(), rows)
    ours = _accuracy(MixedNB(), rows)
    # river: class A loses log(1e9) per indicator even at 0, so it predicts B nearly always
    assert river_acc < 0.6
    # B has a 1 in 97 % of its rows (1 - 0.7^10); A never: nearly perfect
    assert ours > 0.9


def test_the_batch_path_gives_the_point_mass_too() -> None:
    rows = _indicator_stream(400, seed=11)
    model = MixedNB()
    for x, y in rows[:300]:
        model.learn_one(x, y)
    xs = [x for x, _ in rows[300:]]
    batch = model.predict_proba_batch(xs)
    for got, x in zip(batch, xs, strict=True):
        one = model.predict_proba_one(x)
        assert got.keys() == one.keys()
        assert all(got[c] == pytest.approx(one[c], rel=1e-12, abs=1e-300) for c in one)


@pytest.mark.slow
def test_nb_on_a_covertype_prefix_is_well_above_majority(data_dir) -> None:
    config = ExperimentConfig("covtype", ["majority", "nb"], dataset="covtype", limit=20_000)
    learners = evaluate_config(config, data_dir=data_dir)["learners"]
    majority = learners["majority"]["accuracy"]
    nb = learners["nb"]["accuracy"]
    assert nb > majority + 0.1, (nb, majority)


def test_a_string_before_any_string_was_learned_tells_nothing() -> None:
    """A feature seen only as a number, then as a string (a stream that changed its
    type): with no token learned the categorical part has no vocabulary (river's
    multinomial would divide by zero) and leaves the numeric answer as it is."""
    model = MixedNB()
    model.learn_one({"a": 0.0, "t": 1.0}, "x")
    model.learn_one({"a": 1.0, "t": 2.0}, "y")
    numeric_only = model.predict_proba_one({"t": 1.2})
    assert model.predict_proba_one({"a": "u", "t": 1.2}) == numeric_only
    assert model.predict_proba_batch([{"a": "u", "t": 1.2}]) == [numeric_only]
