"""River adapters on airlines-like instances (a ``str`` feature), bad values, new classes."""

from __future__ import annotations

import csv
import gzip
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
from river import naive_bayes, tree
from streameval.pipeline.learners.base import StreamContext, argmax
from streameval.pipeline.learners.naive_bayes import MixedNB
from streameval.pipeline.learners.river_adapter import (
    RiverClassifier,
    RiverRegressor,
    as_learner,
    clean,
    with_one_hot,
)
from streameval.pipeline.learners.spec import CLASSIFIERS, build_learner, learner_lags

DATA_DIR = Path(os.environ.get("STREAMEVAL_DATA_DIR") or "/work/shared/datasets")
AIRLINES = DATA_DIR / "airlines_no_airports.csv.gz"
SPECS = [*sorted(CLASSIFIERS), "ta:ht", "ta2[fill=predicted]:nb", "tc:nb", "ta:tc:knn", "ta:arf"]

CRAFTED: list[tuple[dict[str, Any], str]] = [
    ({"Airline": "CO", "Flight": 269.0, "DayOfWeek": 3.0, "Time": 15.0, "Length": 205.0}, "1"),
    ({"Airline": "US", "Flight": 1558.0, "DayOfWeek": 3.0, "Time": 15.0, "Length": 222.0}, "1"),
    ({"Airline": "AA", "Flight": 2400.0, "DayOfWeek": 3.0, "Time": 20.0, "Length": 165.0}, "1"),
    ({"Airline": "AA", "Flight": 2466.0, "DayOfWeek": 3.0, "Time": 20.0, "Length": 195.0}, "1"),
    ({"Airline": "AS", "Flight": 108.0, "DayOfWeek": 3.0, "Time": 30.0, "Length": 202.0}, "0"),
    ({"Airline": "CO", "Flight": 1094.0, "DayOfWeek": 3.0, "Time": 30.0, "Length": 181.0}, "1"),
    ({"Airline": "DL", "Flight": 1768.0, "DayOfWeek": 3.0, "Time": 30.0, "Length": 220.0}, "0"),
]


def airlines(n: int) -> list[tuple[dict[str, Any], str]]:
    """The first ``n`` rows of the airlines stream, or the crafted rows repeated."""
    if not AIRLINES.exists():
        return (CRAFTED * (n // len(CRAFTED) + 1))[:n]
    rows = []
    with gzip.open(AIRLINES, "rt", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        for row in reader:
            if len(rows) == n:
                break
            x: dict[str, Any] = {k: float(v) for k, v in zip(header[1:-1], row[1:-1], strict=True)}
            x[header[0]] = row[0]
            rows.append((x, row[-1]))
    return rows


def prequential(spec: str, rows: list[tuple[dict[str, Any], str]]) -> float:
    ctx = StreamContext()
    ctx.require_recent(learner_lags(spec))
    model = build_learner(spec, context=ctx)
    hits = 0
    for x, y in rows:
        at = ctx.arrive()
        proba = model.predict_proba_one(x, at=at)
        assert all(isinstance(p, float) and math.isfinite(p) for p in proba.values())
        hits += argmax(proba) == y
        model.learn_one(x, y, at=at)
        ctx.receive(at, y)
    return hits / len(rows)


@pytest.mark.parametrize("spec", SPECS)
def test_airlines_like_stream_does_not_crash(spec: str) -> None:
    accuracy = prequential(spec, airlines(400))
    assert 0.0 <= accuracy <= 1.0


@pytest.mark.parametrize("spec", SPECS)
def test_bad_values_and_new_classes_mid_stream(spec: str) -> None:
    rng = random.Random(3)
    rows = []
    for i, (x, y) in enumerate(CRAFTED * 6):
        x = dict(x)
        if i % 3 == 0:
            x["Length"] = rng.choice([float("nan"), float("inf"), float("-inf"), None])
        if i % 5 == 0:
            x["Airline"] = f"NEW{i}"  # categories never seen before
        if i >= 20:
            y = rng.choice(["0", "1", "late", "cancelled"])  # classes appear mid-stream
        rows.append((x, y))
    prequential(spec, rows)


def test_clean_drops_only_missing_values() -> None:
    import numpy as np

    x = {"a": 1, "b": np.float64("nan"), "c": True, "d": "x", "e": np.float32(2.5), "f": None}
    assert clean(x) == {"a": 1, "c": True, "d": "x", "e": np.float32(2.5)}


def test_adapter_gives_plain_floats_and_copes_before_learning() -> None:
    model = RiverClassifier(tree.HoeffdingTreeClassifier())
    assert model.predict_proba_one(CRAFTED[0][0]) == {}
    assert model.predict_one(CRAFTED[0][0]) is None
    for x, y in CRAFTED:
        model.learn_one(x, y, at=0)
    many = model.predict_proba_many([x for x, _ in CRAFTED], at=list(range(len(CRAFTED))))
    assert many == [model.predict_proba_one(x) for x, _ in CRAFTED]
    assert all(type(p) is float for proba in many for p in proba.values())


def test_one_hot_is_river_preprocessing() -> None:
    pipe = with_one_hot(naive_bayes.GaussianNB(), scale=True)
    for x, y in CRAFTED:
        pipe.learn_one(x, y)
    z = pipe.transform_one(CRAFTED[0][0])
    assert z["Airline_CO"] == 1 and z["Airline_AA"] == 0
    assert "Airline" not in z and -5 < z["Length"] < 5


def test_as_learner_wraps_river_models_once() -> None:
    assert isinstance(as_learner(tree.HoeffdingTreeClassifier()), RiverClassifier)
    wrapped = RiverClassifier(tree.HoeffdingTreeClassifier())
    assert as_learner(wrapped) is wrapped
    regressor = as_learner(tree.HoeffdingTreeRegressor(), task="regression")
    assert isinstance(regressor, RiverRegressor)
    assert as_learner(regressor, "regression") is regressor
    with pytest.raises(TypeError, match="HoeffdingTreeRegressor is a river regressor"):
        as_learner(tree.HoeffdingTreeRegressor())


def test_regressor_adapter_ignores_bad_targets() -> None:
    model = RiverRegressor(tree.HoeffdingTreeRegressor(leaf_prediction="mean"))
    for y in [1.0, float("nan"), 3.0, float("inf")]:
        model.learn_one({"a": 1.0, "c": "x"}, y)
    assert model.predict_one({"a": float("nan")}) == pytest.approx(2.0)
    assert model.predict_many([{}, {}], at=[0, 1]) == [pytest.approx(2.0)] * 2


# ------------------------------------------------------------ MixedNB


def test_mixed_nb_is_gaussian_nb_on_numbers() -> None:
    rng = random.Random(0)
    mixed, gaussian = MixedNB(), naive_bayes.GaussianNB()
    for _ in range(200):
        y = rng.choice("ab")
        x = {"u": rng.gauss(y == "a", 1), "v": rng.random()}
        assert mixed.predict_proba_one(x) == pytest.approx(gaussian.predict_proba_one(x))
        mixed.learn_one(x, y)
        gaussian.learn_one(x, y)


def test_mixed_nb_uses_categories_where_gaussian_nb_on_one_hot_fails() -> None:
    """A category constant within each class: the first instance alone has "?"."""
    rng = random.Random(0)
    rows = [({"u": rng.random(), "lag": "?"}, "b")]
    y = "b"
    for _ in range(600):
        previous = y
        y = previous if rng.random() < 0.9 else ("a" if previous == "b" else "b")
        rows.append(({"u": rng.random(), "lag": previous}, y))
    mixed, one_hot = MixedNB(), with_one_hot(naive_bayes.GaussianNB())
    hits = {"mixed": 0, "one_hot": 0}
    for x, y in rows:
        hits["mixed"] += argmax(mixed.predict_proba_one(x)) == y
        hits["one_hot"] += argmax(one_hot.predict_proba_one(x)) == y
        mixed.learn_one(x, y)
        one_hot.learn_one(x, y)
    assert hits["mixed"] / len(rows) > 0.85  # it learns "same as the lag"
    assert hits["one_hot"] / len(rows) < 0.6  # river's GaussianNB: always the "?" class
