"""The Experiment protocol: re-evaluation bins, reference baselines, hand-counted re-predictions."""

from __future__ import annotations

import pickle

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent, PredictionEvent
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.reeval.bins import bin_of
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay
from streameval.pipeline.streams.schedule import replay_schedule


def crafted(n: int) -> list[Instance]:
    """Runs of 7 equal labels (a strong temporal dependence), one informative feature."""
    out = []
    for i in range(n):
        y = "a" if (i // 7) % 2 == 0 else "b"
        out.append(
            Instance(str(i), float(i), {"x": (1.0 if y == "a" else -1.0) + (i % 3) * 0.1}, y)
        )
    return out


def run(config: ExperimentConfig, instances: list[Instance], delay: int, emit: bool = False):
    exp = Experiment(config, emit_predictions=emit)
    outputs = exp.run(replay_schedule(config.stream, instances, InstanceDelay(delay)))
    return exp, outputs


LEARNERS = ["nochange", "majority", "nb", "ta:nb"]


def test_delay_zero_every_bin_equals_the_whole_stream_accuracy() -> None:
    config = ExperimentConfig("s", LEARNERS, reeval_k=10, bins=5, window=50, fading=0.99)
    exp, _ = run(config, crafted(600), delay=0)
    res = exp.results()
    for spec, entry in res["learners"].items():
        binned = entry["binned"]
        assert len(binned["accuracy"]) == 7
        # bins 0 (first) and B+1 (test-then-train) are the same prediction under no delay,
        # and every bin in between is the first prediction (zero waiting time)
        assert binned["accuracy"] == [entry["accuracy"]] * 7, spec
        assert binned["kappa"] == pytest.approx([entry["kappa"]] * 7, abs=0, nan_ok=True)
        assert binned["window"]["accuracy"] == [entry["window"]["accuracy"]] * 7
    assert res["overhead"]["n_repredictions"] == 0


def test_b_zero_keeps_only_first_and_test_then_train_bins() -> None:
    config = ExperimentConfig("s", LEARNERS, reeval_k=10, bins=0)
    exp, _ = run(config, crafted(300), delay=20)
    for entry in exp.results()["learners"].values():
        assert len(entry["binned"]["accuracy"]) == 2
        assert entry["binned"]["accuracy"][0] == entry["accuracy"]


def test_reference_baselines_score_zero_under_delay_in_every_bin() -> None:
    """kappa_per of No-Change and kappa_m of Majority are exactly 0, whole, window, fading, bins."""
    config = ExperimentConfig(
        "s", LEARNERS, reeval_k=5, bins=8, window=40, fading=0.98, positive="a"
    )
    exp, _ = run(config, crafted(500), delay=11)
    res = exp.results()
    nochange, majority = res["learners"]["nochange"], res["learners"]["majority"]
    for block in (nochange, nochange["window"], nochange["fading"]):
        assert block["kappa_per"] == 0.0
    for block in (majority, majority["window"], majority["fading"]):
        assert block["kappa_m"] == 0.0
    assert nochange["binned"]["kappa_per"] == [0.0] * 10
    assert majority["binned"]["kappa_m"] == [0.0] * 10
    # and a real learner is not trivially 0
    assert res["learners"]["ta:nb"]["kappa_per"] != 0.0


def test_hand_counted_repredictions_and_bins() -> None:
    """Labels 100 instances late, K = 10 (delayed-labelling paper, Algorithm 1).

    Instance i arrives after the labels of 0..i-101 (labels_seen = max(0, i-100)); its
    label is released after the features of i+100. While it waits, the labels of
    i-100..i-1 arrive (for i >= 100): it is re-predicted whenever the count since its
    arrival is a multiple of 10: 10 times. Instances i < 100 see i labels: floor(i/10).
    With n = 300: sum_{i<100} floor(i/10) = 450, plus 200 instances x 10 = 2000
    (the tail's labels arrive at the end, 100 labels after arrival too): 2450.
    """
    config = ExperimentConfig("s", ["nochange"], reeval_k=10, bins=10)
    exp, outputs = run(config, crafted(300), delay=100, emit=True)
    res = exp.results()
    assert res["overhead"]["n_repredictions"] == 2450
    assert res["overhead"]["N_R"] == pytest.approx(2450 / 300)
    re = [o for o in outputs if isinstance(o, PredictionEvent) and o.kind == "repredict"]
    assert len(re) == 2450
    # instance 150 arrives at ts 150 with 50 labels seen; label j arrives at ts j+100, so
    # the count 50+10m is reached when label 49+10m arrives, at ts 149+10m, m = 1..10
    mine = [o.ts for o in re if o.id == "150"]
    assert mine == [149.0 + 10 * m for m in range(1, 11)]
    # its label arrives at ts 250: waiting time 100, B = 10 bins of 10 time units
    assert [bin_of(t, 150.0, 250.0, 10) for t in mine] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    finals = [o for o in outputs if isinstance(o, PredictionEvent) and o.kind == "final"]
    assert {o.bin for o in finals} == {11}
    firsts = [o for o in outputs if isinstance(o, PredictionEvent) and o.kind == "first"]
    assert len(firsts) == len(finals) == 300


def test_nochange_bins_follow_the_dominant_prediction() -> None:
    """No-Change re-predicts the last label received before each model update: check d_D.

    Instance 150 (delay 100, K = 10, B = 10): first prediction at ts 150 is y_49 (the last
    label received); the re-prediction at ts 149+10m is made before label 49+10m is
    learned, so it is y_{48+10m}. Bin m covers [140+10m, 150+10m) and the re-prediction
    at 149+10m holds for 1 unit of it, the previous one for 9: d_D is the previous one.
    """
    config = ExperimentConfig("s", ["nochange"], reeval_k=10, bins=10)
    exp = Experiment(config)
    y = {inst.id: inst.y for inst in crafted(300)}
    captured = {}
    original = exp._on_label

    def spy(ev):
        if ev.id == "150":
            captured["history"] = list(exp.buffer.get("150").history["nochange"])
        return original(ev)

    exp._on_label = spy  # type: ignore[method-assign]
    exp.run(replay_schedule("s", crafted(300), InstanceDelay(100)))
    # the buffer merges consecutive equal predictions; expand to the times predicted
    history = captured["history"]
    in_force = [max((t, p) for t, p in history if t <= moment)[1] for moment in range(150, 250)]
    expected = [y["49"]] * 9 + [
        p for m in range(1, 11) for p in ([y[str(48 + 10 * m)]] * (10 if m < 10 else 1))
    ]
    assert in_force == expected[:100]


def test_checkpoint_roundtrip_gives_identical_results() -> None:
    """A pickle taken mid-stream continues to exactly the uninterrupted results."""
    config = ExperimentConfig("s", [*LEARNERS, "ht"], reeval_k=7, bins=6, window=30)
    events = list(replay_schedule("s", crafted(400), InstanceDelay(25)))
    whole = Experiment(config)
    whole.run(events)
    first = Experiment(config)
    first.run(events[:333])
    resumed = pickle.loads(pickle.dumps(first))
    resumed.run(events[333:])
    assert resumed.results() == whole.results()


def test_unknown_labels_and_evolving_features_are_counted() -> None:
    config = ExperimentConfig("s", ["nochange", "nb"], reeval_k=2, bins=2)
    exp = Experiment(config)
    exp.process(FeatureEvent("s", "a", 0.0, {"x": 1.0}, 0))
    exp.process(FeatureEvent("s", "a", 1.0, {"x": 2.0}, 1))  # evolving instance
    assert exp.buffer.get("a").x == {"x": 2.0}
    exp.process(LabelEvent("s", "zzz", 2.0, "u", 2))  # never seen
    exp.process(LabelEvent("s", "a", 3.0, "u", 3))
    exp.process(EndOfStream("s", 3.0, 4, 4))
    res = exp.results()
    assert res["counters"]["feature_updates"] == 1
    assert res["counters"]["unknown_labels"] == 1
    assert res["n_labelled"] == 1 and res["n_instances"] == 1


def test_new_class_mid_stream_grows_the_class_set() -> None:
    rows = [Instance(str(i), float(i), {"x": float(i)}, "a" if i < 50 else "c") for i in range(80)]
    config = ExperimentConfig("s", ["nochange", "nb", "ta:ht"], reeval_k=3, bins=4)
    exp, _ = run(config, rows, delay=5)
    res = exp.results()
    assert res["classes"] == ["a", "c"]
    assert set(res["learners"]["nb"]["recall"]) == {"a", "c"}


def test_drift_events_and_reset_on_a_known_drift(data_dir) -> None:
    """A ratio detector on a synthetic stream with a known drift point reports delay/misses."""
    config = ExperimentConfig(
        "sea",
        ["nb"],
        detectors=["ratio_fading", "random[p=0.01]"],
        drift_reset=True,
        dataset="sea_drift[n=8000,drift_at=4000,seed=3]",
    )
    res = evaluate_config(config)
    drift = res["learners"]["nb"]["drift"]
    assert res["config"]["drift_points"] == [4000]
    det = drift["ratio_fading"]["detection"]
    assert det["detected"] + det["misses"] == 1
    assert drift["random[p=0.01]"]["n_alarms"] > 10  # ~ (8000 / 30 + ...) alarms at p = 0.01
    assert res["learners"]["nb"]["drift_resets"] >= drift["random[p=0.01]"]["n_alarms"]


def test_regression_stream_with_delayed_targets_is_binned() -> None:
    """Delayed-labelling paper sect. 7.1: d_A per bin and MAE/RMSE per bin for regressors."""
    config = ExperimentConfig(
        "friedman",
        ["mean", "linreg", "htr"],
        task="regression",
        reeval_k=10,
        bins=5,
        window=100,
        dataset="friedman[n=800,seed=2]",
        delay="50",
    )
    res = evaluate_config(config)
    assert res["task"] == "regression"
    assert res["overhead"]["N_R"] == pytest.approx(5.0, abs=0.5)  # ~50 labels waited / K
    for spec, entry in res["learners"].items():
        mae = entry["binned"]["mae"]
        assert len(mae) == 7 and len(entry["binned"]["rmse"]) == 7, spec
        assert mae[0] == pytest.approx(entry["mae"]), spec
        assert entry["rmse"] >= entry["mae"] > 0
    # a linear model on Friedman #1 beats the target mean, first and test-then-train bins
    assert (
        res["learners"]["linreg"]["binned"]["mae"][0] < res["learners"]["mean"]["binned"]["mae"][0]
    )
    assert (
        res["learners"]["linreg"]["binned"]["mae"][-1]
        < res["learners"]["mean"]["binned"]["mae"][-1]
    )


def test_pending_cap_evicts_the_oldest_and_counts_them() -> None:
    config = ExperimentConfig("s", ["nochange", "nb"], pending_cap=10, positive="a")
    exp, _ = run(config, crafted(200), delay=50)
    res = exp.results()
    # every arrival past 10 pending evicts the oldest; a label comes 50 instances late, so
    # only the 10 instances still pending at the end (their labels follow the last
    # features) are ever scored, and the 190 others' labels are counted as evicted
    assert res["overhead"]["max_pending"] == 10
    assert res["overhead"]["evicted"] == 190 and res["n_labelled"] == 10
    # none of the 190 labels finds its instance; the buffer remembers the ids of the last
    # `cap` evicted instances, so 10 of them are recognised as labels of evicted instances
    assert res["counters"]["unknown_labels"] == 190
    assert res["overhead"]["labels_of_evicted"] == 10
    assert len(exp._first_scores) <= 10  # nothing kept for instances that will never score
