"""The columnar core against the per-event core: the same outputs and the same results JSON.

Every comparison is text for text (``json.dumps`` keeps key order and every digit), for
learners that read the features (naive Bayes, Hoeffding trees, a temporal wrapper) and
for the label-only baselines, under count, time and per-instance delays, with every
estimator, the AUC, snapshots, drift detectors and resets, stops, evictions, evolving
instances and labels of unknown instances; and for any cut of the stream into the
segments the scoreboard takes (``FLUSH_EVERY`` down to one label).
"""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from streameval.pipeline.columnar import ColumnarExperiment, drive_columnar, supports
from streameval.pipeline.columnar import held as columnar_held
from streameval.pipeline.columnar.diagnostics import Ordered
from streameval.pipeline.columnar.driver import drive_labels, evaluate_columnar
from streameval.pipeline.columnar.schedule import LabelSchedule
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.diagnostics.ordered import InstanceOrder
from streameval.pipeline.evaluate import drive, evaluate_config, prepare, schedule
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.streams.base import Dataset, Instance
from streameval.pipeline.streams.delay import (
    FeatureTimeDelay,
    InstanceDelay,
    TimeDelay,
    parse_delay,
)
from streameval.pipeline.streams.schedule import replay_schedule

BOTH = ["nochange", "majority"]
READERS = ["nochange", "nb", "ht", "majority"]


def synthetic(n: int, seed: int = 1) -> list[Instance]:
    """Runs of labels (temporal dependence), a third class from the middle on, irregular
    event times, a waiting time per instance (so event-time delays reorder labels) and
    two features that say something about the label (so the learners learn)."""
    rng = random.Random(seed)
    out, y, ts = [], "up", 0.0
    for i in range(n):
        if rng.random() < 0.15:
            y = rng.choice(["up", "down", "down"] if i < n // 2 else ["up", "down", "flat"])
        ts += rng.choice([0.0, 0.5, 1.0, 3.0])
        level = {"up": 1.0, "down": -1.0, "flat": 0.0}[y] + rng.gauss(0.0, 0.8)
        x = {"wait": rng.choice([0.0, 2.0, 30.0]), "level": level, "kind": rng.choice("ab")}
        out.append(Instance(str(i), ts, x, y))
    return out


def document(doc: dict[str, Any]) -> str:
    """The results JSON without its runtime, key order kept."""
    return json.dumps({k: v for k, v in doc.items() if k != "runtime"})


def outputs_text(outputs: list[Any]) -> str:
    return json.dumps([asdict(o) for o in outputs], default=str)


def reference_of(config: ExperimentConfig, events: list[InputEvent], emit: bool = False) -> Any:
    exp = Experiment(config, emit_predictions=emit)
    outputs = exp.run(events)
    return outputs, exp.results()


def columnar_of(config: ExperimentConfig, events: list[InputEvent], emit: bool = False) -> Any:
    exp = ColumnarExperiment(config, emit_predictions=emit)
    outputs = exp.run(events)
    return outputs, exp.results()


def same_as_reference(config: ExperimentConfig, events: list[InputEvent], emit: bool = False):
    ref_out, ref = reference_of(config, events, emit)
    got_out, got = columnar_of(config, events, emit)
    assert document(got) == document(ref)
    assert outputs_text(got_out) == outputs_text(ref_out)
    return ref


SYNTHETIC_CASES = [
    (READERS, {}, InstanceDelay(0)),
    # no AUC: the baselines are answered by the references, also their final predictions
    (READERS, {"window": 30}, InstanceDelay(13)),
    (READERS, {"window": 50, "fading": 0.9, "positive": "up", "auc_window": 40}, InstanceDelay(0)),
    (READERS, {"window": 7, "fading": 0.97, "positive": "down"}, InstanceDelay(13)),
    (["nb", "ta:ht"], {"window": 100, "fading": 0.5, "positive": "flat"}, TimeDelay(4.0)),
    (BOTH, {"window": 20, "fading": 0.8, "positive": "up"}, FeatureTimeDelay("wait", 1.0)),
    (
        ["ht", *BOTH],
        {"window": 3000, "fading": 1.0, "positive": "up", "max_lag": 2},
        InstanceDelay(400),
    ),
]


@pytest.mark.parametrize(("learners", "settings", "delay"), SYNTHETIC_CASES)
@pytest.mark.parametrize("flush_every", [1, 7, 8192])
def test_synthetic_streams_same_outputs_and_json(
    learners, settings, delay, flush_every, monkeypatch
) -> None:
    # fading 0.9 and 0.5 rescale the lazily faded counts many times in 1,500 labels;
    # snapshots every 97 labels cut the stream where no flush does
    monkeypatch.setattr(columnar_held, "FLUSH_EVERY", flush_every)
    config = ExperimentConfig("s", learners, snapshot_every=97, **settings)
    events = list(replay_schedule("s", synthetic(1500), delay))
    same_as_reference(config, events, emit=True)


def test_prediction_outputs_drift_alarms_and_resets() -> None:
    # emitted first and final predictions, Page-Hinkley alarms and the learners they restart
    config = ExperimentConfig(
        "s",
        READERS,
        positive="up",
        detectors=["ph[lambda=5]", "ddm"],
        drift_reset=True,
        snapshot_every=250,
    )
    events = list(replay_schedule("s", synthetic(1500, seed=4), InstanceDelay(3)))
    ref = same_as_reference(config, events, emit=True)
    alarms = [ref["learners"][n]["drift"]["ph[lambda=5]"]["n_alarms"] for n in READERS]
    assert sum(alarms) > 0 and ref["learners"]["nb"]["drift_resets"] > 0


def test_stop_at_labels_and_a_learner_given_as_an_object() -> None:
    from river import tree
    from streameval.pipeline.learners.baselines import NoChange

    config = ExperimentConfig("s", ["tree", "nochange"], stop_at_labels=600, positive="up")
    events = list(replay_schedule("s", synthetic(1000, seed=2), InstanceDelay(5)))
    reference = Experiment(
        config,
        learners={"tree": tree.HoeffdingTreeClassifier(grace_period=50), "nochange": NoChange()},
    )
    reference.run(events)
    columnar = ColumnarExperiment(
        config,
        learners={"tree": tree.HoeffdingTreeClassifier(grace_period=50), "nochange": NoChange()},
    )
    columnar.run(events)
    assert document(columnar.results()) == document(reference.results())
    assert columnar.n_labelled == 600 and columnar.counters["after_stop"] > 0


def test_evictions_evolving_features_and_unknown_labels() -> None:
    # a cap of 3 pending instances, features that change while pending, labels for ids
    # never seen, labels of evicted instances, features of an evicted instance again
    rng = random.Random(9)
    events: list[InputEvent] = []
    seq = 0
    waiting: list[int] = []
    for i in range(400):
        x = {"level": rng.gauss(0.0, 1.0), "kind": rng.choice("ab")}
        events.append(FeatureEvent("s", str(i), float(i), x, seq))
        seq += 1
        waiting.append(i)
        if rng.random() < 0.2:
            j = rng.choice(waiting)
            events.append(FeatureEvent("s", str(j), float(i), {"level": 5.0, "kind": "c"}, seq))
            seq += 1
        if rng.random() < 0.1:
            events.append(LabelEvent("s", f"ghost{i}", float(i), "up", seq))
            seq += 1
        if rng.random() < 0.1 and i > 10:
            events.append(FeatureEvent("s", str(rng.randrange(i)), float(i), {"level": 1.0}, seq))
            seq += 1
        while waiting and rng.random() < 0.55:
            j = waiting.pop(rng.randrange(len(waiting)))
            events.append(LabelEvent("s", str(j), float(i), rng.choice(["up", "down"]), seq))
            seq += 1
    events.append(EndOfStream("s", 400.0, seq, seq))
    config = ExperimentConfig("s", READERS, pending_cap=3, window=30, positive="up")
    ref = same_as_reference(config, events, emit=True)
    counters = ref["counters"]
    assert counters["unknown_labels"] > 0 and counters["feature_updates"] > 0
    assert ref["overhead"]["evicted"] > 0 and ref["overhead"]["labels_of_evicted"] > 0


def test_a_checkpoint_in_the_middle_resumes_with_the_same_results() -> None:
    config = ExperimentConfig("s", ["nb", "ta:ht", *BOTH], window=40, fading=0.95, positive="up")
    events = list(replay_schedule("s", synthetic(1200, seed=6), InstanceDelay(20)))
    whole = ColumnarExperiment(config)
    whole.run(events)
    first = ColumnarExperiment(config)
    first.run(events[:1111])
    resumed = pickle.loads(pickle.dumps(first))
    resumed.run(events[1111:])
    assert document(resumed.results()) == document(whole.results())
    _, ref = reference_of(config, events)
    assert document(whole.results()) == document(ref)


def test_a_checkpoint_that_held_rows_in_the_core_itself_resumes_with_the_same_results() -> None:
    # checkpoints written before HeldLabels kept the held rows as the core's attributes
    config = ExperimentConfig("s", ["nb", *BOTH], window=40, positive="up")
    events = list(replay_schedule("s", synthetic(900, seed=7), InstanceDelay(20)))
    whole = ColumnarExperiment(config)
    whole.run(events)
    first = ColumnarExperiment(config)
    first.run(events[:1111])
    state = pickle.loads(pickle.dumps(first)).__dict__
    held = state.pop("held")
    assert len(held.rows) > 0 and len(held.scores) > 0
    state.update(_rows=held.rows, _scores=held.scores, _segments=held.segments, _n_held=0)
    old = ColumnarExperiment.__new__(ColumnarExperiment)
    old.__setstate__(state)
    old.run(events[1111:])
    assert document(old.results()) == document(whole.results())


def test_results_in_the_middle_of_the_stream() -> None:
    # labels out of order (a waiting time per instance): the diagnostics read only the
    # labels up to the first instance still waiting, both cores alike
    config = ExperimentConfig("s", READERS, window=40, fading=0.9, positive="down")
    events = list(replay_schedule("s", synthetic(1200, seed=5), FeatureTimeDelay("wait", 1.0)))
    for cut in (333, 1500):
        reference = Experiment(config)
        reference.run(events[:cut])
        columnar = ColumnarExperiment(config)
        for start in range(0, cut, 100):
            columnar.process_block(events[start : min(cut, start + 100)])
        assert document(columnar.results()) == document(reference.results()), cut


def test_hand_counted_accuracies_under_a_delay() -> None:
    # labels a a b b a, delay 1: F0 F1 L0 F2 L1 F3 L2 F4 L3 L4. At F2 the learners know
    # [a], at F3 [a, a], at F4 [a, a, b]. No-Change predicts -, -, a, a, b: never right;
    # Majority predicts -, -, a, a, a: right on the last label only.
    rows = [Instance(str(i), float(i), {}, y) for i, y in enumerate("aabba")]
    exp = ColumnarExperiment(ExperimentConfig("s", BOTH))
    exp.process_block(list(replay_schedule("s", rows, InstanceDelay(1))))
    res = exp.results()["learners"]
    assert res["nochange"]["accuracy"] == 0.0
    assert res["majority"]["accuracy"] == 0.2
    assert res["nochange"]["kappa_per"] == 0.0  # eq. 13 against itself: exactly 0
    assert res["majority"]["kappa_m"] == 0.0
    assert res["majority"]["p_per"] == 0.0 and res["nochange"]["p_maj"] == 0.2


def test_the_driver_chooses_the_columnar_path_when_it_applies(data_dir) -> None:
    config = ExperimentConfig("e", ["nochange", "nb"], dataset="electricity", limit=500)
    assert evaluate_config(config, data_dir=data_dir)["runtime"]["path"] == "columnar"
    assert supports(config)
    for changed in ({"reeval_k": 10, "bins": 5}, {"protocol": "moa"}):
        other = ExperimentConfig.from_dict({**config.to_dict(), **changed})
        assert not supports(other), changed
        assert "path" not in evaluate_config(other, data_dir=data_dir)["runtime"], changed
    with pytest.raises(ValueError, match="continuous re-evaluation"):
        ColumnarExperiment(ExperimentConfig("s", ["nb"], reeval_k=5))


@pytest.mark.parametrize("max_waiting", [3, 50, 10**6])
def test_instance_order_matches_the_per_event_reorder_also_when_it_skips_gaps(max_waiting):
    rng = random.Random(max_waiting)
    arrival = list(range(400))
    rng.shuffle(arrival)
    arrival = [a for a in arrival if a % 37 != 5]  # gaps that never fill
    arrival = list(range(50)) + [a + 50 for a in arrival]  # a consecutive head first
    codes = [rng.randrange(3) for _ in arrival]
    for ended in (False, True):
        seen: list[int] = []
        order = InstanceOrder(seen.append, max_waiting)
        for at, c in zip(arrival, codes, strict=True):
            order.push(at, c)
        if ended:
            order.flush()
        bulk, got = Ordered(max_waiting), []
        for start in range(0, len(arrival), 33):
            part = slice(start, start + 33)
            got += bulk.push(np.array(arrival[part]), np.array(codes[part])).tolist()
        if ended:
            got += bulk.flush().tolist()
        assert got == seen


def label_schedule_run(config: ExperimentConfig, dataset: Dataset, block: int) -> dict[str, Any]:
    delay = parse_delay(config.delay, dataset)
    return drive_labels(ColumnarExperiment(config), dataset, delay, None, False, block)


@pytest.mark.parametrize("delay", [InstanceDelay(0), InstanceDelay(17), TimeDelay(6.0)])
@pytest.mark.parametrize("snapshot_every", [0, 111])
def test_baselines_from_their_labels_alone_same_json(delay, snapshot_every) -> None:
    rows = synthetic(1500, seed=7)
    dataset = Dataset.from_instances("syn", rows)
    config = ExperimentConfig(
        "s",
        BOTH,
        window=25,
        fading=0.8,
        positive="flat",
        delay=str(delay),
        limit=1400,
        snapshot_every=snapshot_every,
    )
    events = list(replay_schedule("s", rows[:1400], delay))
    reference = document(drive(Experiment(config), events, None, False, None))
    for block in (1, 2, 3, 999):
        assert document(label_schedule_run(config, dataset, block)) == reference, block


def test_label_schedule_refuses_decreasing_event_times() -> None:
    with pytest.raises(ValueError, match="event time must not decrease"):
        LabelSchedule.build(np.array([0.0, 2.0, 1.0]), InstanceDelay(1))


def real_case(data_dir: Any, **settings: Any) -> tuple[ExperimentConfig, str]:
    dataset, config = prepare(ExperimentConfig("e", **settings), data_dir)
    events = list(schedule(config, dataset))
    reference = document(drive(Experiment(config), events, None, False, None))
    columnar = evaluate_columnar(config, dataset, None, False)
    assert columnar["runtime"]["path"] == "columnar"
    assert document(columnar) == reference
    assert document(drive_columnar(ColumnarExperiment(config), events, None, False)) == reference
    return config, reference


@pytest.mark.parametrize(("limit", "delay"), [(0, "0"), (0, "natural")])
def test_a_stream_with_no_label_scored_same_json(data_dir, limit, delay) -> None:
    # the AUC's window is read with nothing on the tape (`--limit 0` used to fail there)
    config, reference = real_case(
        data_dir,
        learners=["nochange", "majority", "nb", "ht"],
        dataset="electricity",
        limit=limit,
        delay=delay,
        snapshot_every=None,
    )
    assert config.positive == "UP"
    doc = json.loads(reference)
    nb = doc["learners"]["nb"]
    assert doc["n_labelled"] == 0 and nb["n_scored"] == 0 and nb["accuracy"] is None
    assert nb["window"]["auc"] == 1.0  # no positive-negative pair: MOA's value


@pytest.mark.slow
@pytest.mark.parametrize("delay", ["natural", "0"])
def test_electricity_the_default_line_up_same_json(data_dir, delay) -> None:
    # the command line's defaults: five learners, snapshots every 1 % (the curves), AUC
    config, reference = real_case(
        data_dir,
        learners=["nochange", "majority", "nb", "ht", "ta:ht"],
        dataset="electricity",
        limit=12_000,
        delay=delay,
        snapshot_every=None,
    )
    assert config.snapshot_every == 120 and config.positive == "UP"
    assert len(json.loads(reference)["curves"]["n_labelled"]) == 100


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "delay"),
    [
        ({"window": 1000, "fading": 0.99}, "0"),  # 0.99 rescales every ~23,000 labels
        ({"window": 500, "fading": 0.999, "auc_window": 2000}, "1000"),
        ({"window": 48, "fading": 0.9}, "time:86400"),  # a day of event time
    ],
)
def test_electricity_baselines_same_json(data_dir, settings, delay) -> None:
    # the labels and event times alone (no event objects, no features): blocks of one
    # instance and of sizes that do not divide
    config, reference = real_case(
        data_dir, learners=BOTH, dataset="electricity", delay=delay, snapshot_every=4000, **settings
    )
    dataset, _ = prepare(config, data_dir)
    for block in (2, 4097):
        assert document(label_schedule_run(config, dataset, block)) == reference, block


@pytest.mark.slow
def test_covtype_and_airlines_same_json(data_dir) -> None:
    # seven classes, a count delay; and a delay read from the features (the landing time)
    real_case(
        data_dir,
        learners=["nochange", "majority", "nb"],
        dataset="covtype",
        limit=4000,
        delay="100",
        window=300,
        fading=0.995,
        snapshot_every=500,
    )
    real_case(
        data_dir,
        learners=["nb", "nochange"],
        dataset="airlines",
        limit=4000,
        delay="natural",
        window=200,
        snapshot_every=700,
    )


@pytest.mark.moa
def test_moa_learners_same_json(data_dir) -> None:
    # MOA's learners through the generic calls (one Java call each way per instance)
    real_case(
        data_dir,
        learners=["moa:NaiveBayes", "moa:HoeffdingTree", "nochange"],
        dataset="electricity",
        limit=3000,
        delay="48",
        window=500,
        snapshot_every=300,
    )


@pytest.mark.parametrize("window", [None, 50])
def test_results_before_any_label_are_the_per_event_cores(window) -> None:
    # no label scored yet (a learner failed on the first instance, a snapshot asked early):
    # the windowed estimates read an empty tape, as the per-event core reads empty windows
    cfg = ExperimentConfig("s", ["nochange", "nb"], window=window, fading=0.9, positive="up")
    exp, ref = ColumnarExperiment(cfg), Experiment(cfg)
    assert document(exp.results()) == document(ref.results())
    for core in (exp, ref):
        core.process(FeatureEvent("s", "0", 0.0, {"a": 1.0}))
    got, expected = exp.results(), ref.results()
    assert got["n_instances"] == expected["n_instances"] == 1
    assert document(got) == document(expected)
