"""The mixed naive Bayes on features without spread in a class (MOA's point mass).

River's ``GaussianNB`` gives a feature that is constant within a class a density of 0
(``log(1e-9)``) even at that constant, so 0/1 indicator columns (Covertype's 44) swamp
the informative ones; :class:`PointMassGaussianNB` gives the constant the density 1, as
MOA's ``GaussianEstimator`` does, and is river's ``GaussianNB`` wherever every class has
spread.
"""

from __future__ import annotations

import math
import numbers
import pickle
import random

import numpy as np
import pytest
from river import compose, naive_bayes, preprocessing
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.learners import MixedNB
from streameval.pipeline.learners.base import argmax
from streameval.pipeline.learners.gaussian_rows import row_sums
from streameval.pipeline.learners.naive_bayes import _EXACT_INT, PointMassGaussianNB, _Instance
from streameval.pipeline.learners.river_adapter import clean
from streameval.pipeline.streams.datasets import load


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


# ------------------------------------------------------------ the arrays against river's objects


class RiverMixedNB:
    """The mixed naive Bayes as river's own objects compose it (how :class:`MixedNB` was
    built before it kept the statistics in arrays): the reference of the tests below."""

    def __init__(self) -> None:
        self.numeric = compose.SelectType(numbers.Number)
        self.categorical = compose.SelectType(str) | preprocessing.OneHotEncoder(drop_zeros=True)
        self.gaussian = PointMassGaussianNB()
        self.multinomial = naive_bayes.MultinomialNB(alpha=1.0)

    def learn_one(self, x: dict, y: str) -> None:
        self.gaussian.learn_one(self.numeric.transform_one(x), y)
        self.multinomial.learn_one(self.categorical.transform_one(x), y)

    def predict_proba_one(self, x: dict) -> dict:
        jll = self.gaussian.joint_log_likelihood(self.numeric.transform_one(x))
        if not jll:
            return {}
        tokens = self.categorical.transform_one(x)
        if tokens and self.multinomial.n_terms:
            categorical = self.multinomial.joint_log_likelihood(tokens)
            for label in jll:
                jll[label] += categorical[label] - math.log(self.multinomial.p_class(label))
        top = max(jll.values())
        weights = {label: math.exp(ll - top) for label, ll in jll.items()}
        total = sum(weights.values())
        return {label: w / total for label, w in weights.items()}


@pytest.mark.parametrize("kinds", ["fs", "fis", "fisB", "fisb", "s", ""])
def test_an_instance_is_split_as_rivers_select_type_splits_it(kinds: str) -> None:
    """Numbers to the Gaussians, strings to one-hot tokens, as river's ``SelectType`` and
    ``OneHotEncoder`` split them, whichever mix of value types (f float, i int, B an int
    past 2**53, s str, b bool) an instance holds."""
    numeric = compose.SelectType(numbers.Number)
    categorical = compose.SelectType(str) | preprocessing.OneHotEncoder(drop_zeros=True)
    draw = {
        "f": lambda r: r.gauss(0, 3),
        "i": lambda r: r.randint(-5, 5),
        "B": lambda r: r.choice([-1, 1]) * (_EXACT_INT + r.randint(1, 9)),
        "s": lambda r: r.choice("uvw"),
        "b": lambda r: r.random() < 0.5,
    }
    rng = random.Random(kinds)
    for _ in range(200):
        x = (
            {f"k{j}": draw[rng.choice(kinds)](rng) for j in range(rng.randint(1, 6))}
            if kinds
            else {}
        )
        inst = _Instance(x)
        num = numeric.transform_one(x)
        assert list(inst.keys) == list(num) and inst.values == list(num.values())
        assert inst.tokens == categorical.transform_one(x)
        assert inst.scalar_only == any(
            not isinstance(v, float | int) or (type(v) is int and abs(v) > _EXACT_INT)
            for v in num.values()
        )
        assert (inst.floats is None) == inst.scalar_only
        if inst.floats is not None:
            assert inst.floats.tolist() == [float(v) for v in inst.values]


def _wide_stream(n: int, seed: int = 5) -> list[tuple[dict, str]]:
    """Five classes, six real features, twenty 0/1 indicators, ints, bools, a str, a
    feature sometimes absent: the numpy path (26 x 5 > SMALL)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        y = rng.choice("ABCDE")
        shift = "ABCDE".index(y)
        x: dict = {f"r{j}": rng.gauss(shift * (j % 3) / 2, 1.0 + j / 4) for j in range(6)}
        x |= {f"b{j}": float(rng.random() < 0.1 + 0.15 * (shift == j % 5)) for j in range(20)}
        x["count"] = rng.randint(0, 3 + shift)
        x["flag"] = rng.random() < 0.2 * shift
        x["kind"] = rng.choice(["u", "v"] if shift < 3 else ["v", "w"])
        if rng.random() < 0.1:
            del x["r1"]
        rows.append((x, y))
    return rows


def test_state_is_rivers_to_the_last_bit_and_predictions_agree() -> None:
    ours, river = MixedNB(), RiverMixedNB()
    exact = 0
    for x, y in _wide_stream(1500):
        got, want = ours.predict_proba_one(x), river.predict_proba_one(x)
        assert list(got) == list(want)
        assert argmax(got) == argmax(want)
        assert all(got[c] == pytest.approx(want[c], rel=1e-12, abs=1e-300) for c in want)
        exact += got == want
        ours.learn_one(x, y)
        river.learn_one(x, y)
    table = ours.gaussians
    for c, row in ours._rows.items():
        for feature, col in table.columns.items():
            var = river.gaussian.gaussians[c][feature]._var
            assert table.count[row, col] == var.mean.n
            assert table.mean[row, col] == var.mean._mean  # bit for bit
            assert table.m2[row, col] == var._S
    assert exact < 1500  # numpy's exp and log: not every probability to the last bit


def test_a_small_model_gives_rivers_probabilities_to_the_last_bit() -> None:
    ours, river = MixedNB(), RiverMixedNB()
    for x, y in _indicator_stream(600):
        small = {"t": x["t"], "b0": x["b0"], "lag": "up" if x["t"] > 0.7 else "down"}
        assert ours.predict_proba_one(small) == river.predict_proba_one(small)
        ours.learn_one(small, y)
        river.learn_one(small, y)


def test_a_near_tie_is_decided_by_the_scalar_formula() -> None:
    """Two classes with mirrored data: their log-likelihoods tie exactly at the centre, and
    the numpy sums (other rounding) must not pick a side; the tie goes to the smaller label."""
    ours, river = MixedNB(), RiverMixedNB()
    rng = random.Random(1)
    for _ in range(200):
        v = [rng.gauss(0.0, 1.0) for _ in range(30)]
        for y, sign in (("P", 1.0), ("N", -1.0)):
            x = {f"f{j}": 1.0 + sign * v[j] for j in range(30)}
            ours.learn_one(x, y)
            river.learn_one(x, y)
    centre = {f"f{j}": 1.0 for j in range(30)}
    want = river.predict_proba_one(centre)
    assert ours.predict_proba_one(centre) == want
    assert ours.predict_labels_batch([centre, centre]) == [argmax(want)] * 2 == ["N", "N"]


def test_batches_rank_as_the_instances_do() -> None:
    from streameval.pipeline.reeval.rows import FeatureRows

    data = _wide_stream(900, seed=9)
    model = MixedNB()
    rows = FeatureRows()
    for x, y in data[:700]:
        model.learn_one(x, y)
    xs = [{k: v for k, v in x.items() if not isinstance(v, str)} for x, _ in data[700:]]
    batch = rows.batch(xs, [rows.acquire(x) for x in xs])
    want = [argmax(model.predict_proba_one(x)) for x in xs]
    assert batch.frame is not None and batch.frame.binary is not None
    assert int(batch.frame.binary.sum()) == 21  # the 20 indicators and the bool
    assert model.predict_labels_batch(batch, batch.frame) == want  # buffer frame, indicators
    assert model.predict_labels_batch(xs) == want  # a frame of the dicts, one feature absent


def test_rounds_between_labels_rank_as_the_instances_do() -> None:
    # re-evaluation rounds: a few labels learned between two batches, so only the classes
    # they bring have new parameters; a class of one repeated value is a point mass
    from streameval.pipeline.reeval.rows import FeatureRows

    data = _wide_stream(1200, seed=11)
    model = MixedNB()
    for _ in range(3):
        model.learn_one({"r0": 7.5, "b0": 1.0}, "P")
    pending = [{k: v for k, v in x.items() if not isinstance(v, str)} for x, _ in data[1000:]]
    pending.append({"r0": 7.5, "b0": 1.0})
    whole = [x for x in pending if len(x) == 28]  # every feature: the 0/1 columns' products
    batches = []
    for xs in (pending, whole):
        buffer = FeatureRows()
        batches.append((xs, buffer.batch(xs, [buffer.acquire(x) for x in xs])))
    table = model.gaussians
    for start in range(0, 1000, 10):
        for x, y in data[start : start + 10]:
            model.learn_one(x, y)
        classes = [model._rows[c] for c in model.class_counts]
        for xs, batch in batches:
            want = [argmax(model.predict_proba_one(x)) for x in xs]
            assert model.predict_labels_batch(batch, batch.frame) == want, start
            sums = row_sums(table, batch.frame)  # every class's parameters current
            exact = [table.exact_sums(classes, list(x), list(x.values())) for x in xs]
            np.testing.assert_allclose(sums[:, classes], exact, rtol=1e-12, err_msg=str(start))
    assert argmax(model.predict_proba_one(pending[-1])) == "P"
    assert len(whole) > 100 and batches[1][1].frame.present.all()


def test_a_pickle_of_the_river_parts_loads_into_the_arrays() -> None:
    """A checkpoint written when MixedNB held river's objects restores to the same model."""
    river = RiverMixedNB()
    data = _wide_stream(400, seed=3)
    for x, y in data[:300]:
        river.learn_one(x, y)
    old = MixedNB.__new__(MixedNB)
    old.__setstate__({"alpha": 1.0, **vars(river)})
    restored = pickle.loads(pickle.dumps(old))
    for x, y in data[300:]:
        assert argmax(restored.predict_proba_one(x)) == argmax(river.predict_proba_one(x))
        restored.learn_one(x, y)
        river.learn_one(x, y)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "n"), [("electricity", None), ("covtype", 100_000), ("airlines", 50_000)]
)
def test_the_real_streams_are_predicted_as_by_rivers_objects(
    name: str, n: int | None, data_dir
) -> None:
    ours, river = MixedNB(), RiverMixedNB()
    compared = 0
    for inst in load(name, data_dir=data_dir).iter_instances(n):
        x = clean(inst.x)
        got, want = ours.predict_proba_one(x), river.predict_proba_one(x)
        assert argmax(got) == argmax(want), compared
        if name != "covtype":  # small models: the scalar formula
            assert got == want, compared
        ours.learn_one(x, inst.y)
        river.learn_one(x, inst.y)
        compared += 1
    assert compared == (n or 45_312)
