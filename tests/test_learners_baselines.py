"""Baselines by hand: Persistent (NoChange), Majority Class, TargetMean."""

from __future__ import annotations

import pytest
from streameval.pipeline.learners.base import Classifier, Regressor, argmax
from streameval.pipeline.learners.baselines import Majority, NoChange, TargetMean


def test_nochange_predicts_last_learned_label() -> None:
    model = NoChange()
    assert model.predict_proba_one({}) == {}
    assert model.predict_one({}) is None
    predictions = []
    for y in ["UP", "UP", "DOWN", "UP", "new-class"]:
        predictions.append(model.predict_one({"x": 1.0}))
        model.learn_one({"x": 1.0}, y)
    assert predictions == [None, "UP", "UP", "DOWN", "UP"]
    # every learned label is there, the last one with probability 1 (as river's NoChangeClassifier)
    assert model.predict_proba_one({}) == {"UP": 0.0, "DOWN": 0.0, "new-class": 1.0}


def test_nochange_many_gives_independent_copies() -> None:
    model = NoChange()
    model.learn_one({}, "a")
    model.learn_one({}, "b")
    model.learn_one({}, "a")
    many = model.predict_proba_many([{}, {}, {}], at=[4, 5, 6])
    assert many == [{"a": 1.0, "b": 0.0}] * 3
    many[0]["a"] = 0.0
    assert many[1] == {"a": 1.0, "b": 0.0}
    assert model.predict_labels_many([{}, {}], at=[7, 8]) == ["a", "a"]
    with pytest.raises(ValueError):
        model.predict_proba_many([{}, {}], at=[1])


def test_majority_whole_history_with_tie() -> None:
    model = Majority()
    assert model.predict_proba_one({}) == {}
    for y in ["b", "a", "b", "a"]:
        model.learn_one({}, y)
    assert model.predict_proba_one({}) == {"b": 0.5, "a": 0.5}
    assert model.predict_one({}) == "a"  # tie: smallest label
    model.learn_one({}, "b")
    assert model.predict_one({}) == "b"
    assert model.predict_proba_one({})["b"] == pytest.approx(0.6)


def test_majority_window_forgets_and_handles_new_classes() -> None:
    model = Majority(window=3)
    seen = []
    for y in ["a", "a", "a", "b", "c", "c", "b"]:
        model.learn_one({}, y)
        seen.append(model.predict_one({}))
    # windows: a | aa | aaa | aab | abc (tie) | bcc | ccb
    assert seen == ["a", "a", "a", "a", "a", "c", "c"]
    # "a" left the window: still a known class, at probability 0
    assert model.predict_proba_one({}) == pytest.approx({"a": 0.0, "c": 2 / 3, "b": 1 / 3})
    assert model.counts["a"] == 0
    assert model.predict_proba_many([{}, {}]) == [model.predict_proba_one({})] * 2


def test_majority_window_one_is_nochange() -> None:
    majority, nochange = Majority(window=1), NoChange()
    for y in ["x", "y", "y", "z", "x"]:
        assert argmax(majority.predict_proba_one({})) == argmax(nochange.predict_proba_one({}))
        majority.learn_one({}, y)
        nochange.learn_one({}, y)


@pytest.mark.parametrize("window", [0, -1, True])
def test_bad_windows_are_refused(window: int) -> None:
    with pytest.raises(ValueError):
        Majority(window=window)
    with pytest.raises(ValueError):
        TargetMean(window=window)


def test_target_mean_whole_and_window() -> None:
    whole, last2 = TargetMean(), TargetMean(window=2)
    for y in [1.0, 2.0, float("nan"), 6.0, float("inf")]:
        whole.learn_one({}, y)
        last2.learn_one({}, y)
    assert whole.predict_one({}) == pytest.approx(3.0)
    assert last2.predict_one({}) == pytest.approx(4.0)
    assert last2.predict_many([{}, {}], at=[0, 1]) == [4.0, 4.0]


def test_target_mean_running_sum_stays_exact() -> None:
    model = TargetMean(window=3)
    values = [0.1 * i for i in range(1000)]
    for y in values:
        model.learn_one({}, y)
    assert model.predict_one({}) == pytest.approx(sum(values[-3:]) / 3, abs=1e-12)


def test_baselines_speak_the_protocol() -> None:
    assert isinstance(NoChange(), Classifier)
    assert isinstance(Majority(), Classifier)
    assert isinstance(TargetMean(), Regressor)
