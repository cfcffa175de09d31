"""The papers' findings, reproduced on the real files (STREAMEVAL_DATA_DIR)."""

from __future__ import annotations

import itertools

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.streams.datasets import load

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def electricity(data_dir):
    config = ExperimentConfig(
        "electricity", ["nochange", "majority", "ht", "ta:ht"], dataset="electricity", window=1000
    )
    return evaluate_config(config, data_dir=data_dir)


def test_electricity_nochange_accuracy_is_the_share_of_repeated_labels(electricity, data_dir):
    """No delay: No-Change predicts y_{t-1}; its first prediction (t = 0) has nothing to repeat.

    Accuracy = #{t : y_t = y_{t-1}} / n, and P(same) over the n-1 pairs is the datasets
    README's 0.8533 (the pitfalls paper's Table 2: No-Change 0.85, majority 0.58).
    """
    labels = list(load("electricity", data_dir=data_dir).iter_labels())
    same = sum(a == b for a, b in itertools.pairwise(labels))
    n = len(labels)
    assert n == 45_312
    assert electricity["learners"]["nochange"]["accuracy"] == same / n
    assert round(same / (n - 1), 4) == 0.8533
    assert round(electricity["diagnostics"]["p_same"], 4) == 0.8533
    assert round(electricity["learners"]["majority"]["accuracy"], 2) == 0.58
    assert electricity["learners"]["nochange"]["kappa_per"] == 0.0


def test_electricity_temporal_augmentation_beats_nochange_plain_tree_does_not(electricity):
    """temporal-dependence paper sect. 6.5-6.6: HT fails the No-Change baseline, TA:HT beats it."""
    learners = electricity["learners"]
    assert learners["ht"]["kappa_per"] < 0 < learners["ta:ht"]["kappa_per"]
    assert learners["ta:ht"]["kappa_plus"] > 0 == learners["ht"]["kappa_plus"]
    assert (
        learners["ta:ht"]["accuracy"]
        > learners["nochange"]["accuracy"]
        > learners["ht"]["accuracy"]
    )
    # the plain kappa alone would call the tree good (kappa > 0.5): the pitfall
    assert learners["ht"]["kappa"] > 0.5


def test_airlines_natural_delay_with_reevaluation(data_dir):
    config = ExperimentConfig(
        "airlines",
        ["nochange", "majority", "nb", "ht"],
        dataset="airlines",
        limit=3000,
        delay="natural",
        reeval_k=10,
        bins=50,
    )
    res = evaluate_config(config, data_dir=data_dir)
    assert res["n_labelled"] == 3000
    assert res["config"]["positive"] == "1"
    for spec, entry in res["learners"].items():
        acc = entry["binned"]["accuracy"]
        assert len(acc) == 52, spec
        assert acc[0] == entry["accuracy"]
        assert "auc" in entry
    # flights wait about two hours: the buffer holds hundreds, K=10 gives several
    # re-predictions per flight
    assert res["overhead"]["max_pending"] > 100
    assert res["overhead"]["N_R"] > 1.0


def test_covtype_limit_runs_and_binned_accuracy_rises(data_dir):
    """Delayed-labelling paper, cover type (delay 1000): predictions improve while labels wait."""
    config = ExperimentConfig(
        "covtype",
        ["nochange", "majority", "nb", "ht"],
        dataset="covtype",
        limit=2500,
        delay="natural",
        reeval_k=10,
        bins=50,
    )
    res = evaluate_config(config, data_dir=data_dir)
    assert res["classes"]  # multi-class: no AUC
    for spec, entry in res["learners"].items():
        acc = entry["binned"]["accuracy"]
        first_half = sum(acc[1:26]) / 25
        second_half = sum(acc[26:51]) / 25
        assert acc[0] < acc[-1], spec
        assert first_half < second_half, spec
