"""The columnar core against the per-event core: the same results JSON for any block size."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from streameval.pipeline.columnar import ColumnarExperiment, drive_columnar, supports
from streameval.pipeline.columnar.diagnostics import instance_order
from streameval.pipeline.columnar.driver import drive_labels
from streameval.pipeline.columnar.schedule import LabelSchedule
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.diagnostics.ordered import InstanceOrder
from streameval.pipeline.evaluate import drive, evaluate_config, prepare, schedule
from streameval.pipeline.events import InputEvent
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


def synthetic(n: int, seed: int = 1) -> list[Instance]:
    """Runs of labels (temporal dependence), a third class from the middle on, irregular
    event times and a waiting time per instance (so event-time delays reorder labels)."""
    rng = random.Random(seed)
    out, y, ts = [], "up", 0.0
    for i in range(n):
        if rng.random() < 0.15:
            y = rng.choice(["up", "down", "down"] if i < n // 2 else ["up", "down", "flat"])
        ts += rng.choice([0.0, 0.5, 1.0, 3.0])
        out.append(Instance(str(i), ts, {"wait": rng.choice([0.0, 2.0, 30.0])}, y))
    return out


def document(doc: dict[str, Any]) -> str:
    """The results JSON without its runtime, key order kept."""
    return json.dumps({k: v for k, v in doc.items() if k != "runtime"})


def label_schedule_run(config: ExperimentConfig, dataset: Dataset, block: int) -> dict[str, Any]:
    delay = parse_delay(config.delay, dataset)
    return drive_labels(ColumnarExperiment(config), dataset, delay, None, False, block)


def both_paths(config: ExperimentConfig, events: list[InputEvent], blocks: list[int]) -> None:
    reference = document(drive(Experiment(config), events, None, False, None))
    for block in blocks:
        columnar = drive_columnar(ColumnarExperiment(config), events, None, False, block)
        assert columnar["runtime"]["path"] == "columnar"
        assert document(columnar) == reference, f"block of {block} events"


SYNTHETIC_CASES = [
    ({}, InstanceDelay(0)),
    ({"window": 50, "fading": 0.9, "positive": "up", "auc_window": 40}, InstanceDelay(0)),
    ({"window": 7, "fading": 0.97, "positive": "down"}, InstanceDelay(13)),
    ({"window": 100, "fading": 0.5, "positive": "flat"}, TimeDelay(4.0)),
    ({"window": 20, "fading": 0.8, "positive": "up"}, FeatureTimeDelay("wait", 1.0)),
    ({"window": 3000, "fading": 1.0, "positive": "up", "max_lag": 2}, InstanceDelay(400)),
]


@pytest.mark.parametrize(("settings", "delay"), SYNTHETIC_CASES)
def test_synthetic_stream_same_json_for_every_block_size(settings, delay) -> None:
    # fading 0.9 and 0.5 rescale the lazily faded counts many times in 2,500 labels
    config = ExperimentConfig("s", BOTH, **settings)
    events = list(replay_schedule("s", synthetic(2500), delay))
    both_paths(config, events, [1, 7, 1000, 10**6])


def test_learner_order_and_a_single_learner() -> None:
    events = list(replay_schedule("s", synthetic(800, seed=3), InstanceDelay(5)))
    both_paths(ExperimentConfig("s", ["majority", "nochange"], window=30), events, [3, 64])
    both_paths(ExperimentConfig("s", ["majority"], fading=0.95, positive="up"), events, [5])


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


def test_the_driver_chooses_the_columnar_path_only_when_it_applies(data_dir) -> None:
    config = ExperimentConfig(
        "e", BOTH, dataset="electricity", limit=2000, window=100, snapshot_every=0
    )
    assert evaluate_config(config, data_dir=data_dir)["runtime"]["path"] == "columnar"
    assert supports(config, n_instances=2000)
    for changed in (
        {"learners": ["nochange", "nb"]},
        {"learners": ["majority[window=10]"]},
        {"reeval_k": 10, "bins": 5},
        {"detectors": ["ph"]},
        {"snapshot_every": 100},
        {"pending_cap": 1000},
    ):
        other = ExperimentConfig.from_dict({**config.to_dict(), **changed})
        assert not supports(other, n_instances=2000), changed
    assert not supports(config, n_instances=2000, streaming_outputs=True)
    assert not supports(config, n_instances=None)  # unknown length: eviction possible


def test_reevaluation_keeps_the_per_event_results(data_dir) -> None:
    # bins need the pending instances' re-predictions: that config stays per-event
    config = ExperimentConfig(
        "e", BOTH, dataset="electricity", limit=3000, delay="200", reeval_k=50, bins=5
    )
    doc = evaluate_config(config, data_dir=data_dir)
    assert "path" not in doc["runtime"]
    dataset, config = prepare(config, data_dir)
    exp = Experiment(config)
    reference = drive(exp, schedule(config, dataset), None, False, None)
    assert document(doc) == document(reference)


def test_results_in_the_middle_of_the_stream() -> None:
    # labels out of order (a waiting time per instance): the diagnostics read only the
    # labels up to the first instance still waiting, both paths alike
    config = ExperimentConfig("s", BOTH, window=40, fading=0.9, positive="down")
    events = list(replay_schedule("s", synthetic(1200, seed=5), FeatureTimeDelay("wait", 1.0)))
    for cut in (333, 1500):
        reference = Experiment(config)
        reference.run(events[:cut])
        columnar = ColumnarExperiment(config)
        for start in range(0, cut, 100):
            columnar.process_block(events[start : min(cut, start + 100)])
        assert document(columnar.results()) == document(reference.results()), cut


@pytest.mark.parametrize("max_waiting", [3, 50, 10**6])
def test_instance_order_matches_the_per_event_reorder_also_when_it_skips_gaps(max_waiting):
    rng = random.Random(max_waiting)
    arrival = list(range(400))
    rng.shuffle(arrival)
    arrival = [a for a in arrival if a % 37 != 5]  # gaps that never fill
    codes = [rng.randrange(3) for _ in arrival]
    for ended in (False, True):
        seen: list[int] = []
        order = InstanceOrder(seen.append, max_waiting)
        for at, c in zip(arrival, codes, strict=True):
            order.push(at, c)
        if ended:
            order.flush()
        got = instance_order(np.array(arrival), np.array(codes), ended, max_waiting)
        assert got.tolist() == seen


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "delay"),
    [
        ({"window": 1000, "fading": 0.99}, "0"),  # 0.99 rescales every ~23,000 labels
        ({"window": 500, "fading": 0.999, "auc_window": 2000}, "1000"),
        ({"window": 48, "fading": 0.9}, "time:86400"),  # a day of event time
    ],
)
def test_electricity_same_json_as_the_per_event_core(data_dir, settings, delay) -> None:
    # both columnar inputs: the replay schedule's events, and the labels and event times
    # alone (no event objects, no features); blocks of one instance (2 events) and of sizes
    # that do not divide
    config = ExperimentConfig(
        "e", BOTH, dataset="electricity", delay=delay, snapshot_every=0, **settings
    )
    dataset, config = prepare(config, data_dir)
    assert config.positive is not None  # the AUC is part of the comparison
    events = list(schedule(config, dataset))
    reference = document(drive(Experiment(config), events, None, False, None))
    for block in (4097, 10**7):
        columnar = drive_columnar(ColumnarExperiment(config), events, None, False, block)
        assert document(columnar) == reference, f"events, block of {block}"
    for block in (2, 4097, 10**7):
        assert document(label_schedule_run(config, dataset, block)) == reference, block
    assert evaluate_config(config, data_dir=data_dir)["runtime"]["path"] == "columnar"


@pytest.mark.parametrize("delay", [InstanceDelay(0), InstanceDelay(17), TimeDelay(6.0)])
def test_synthetic_stream_from_its_labels_alone_same_json(delay) -> None:
    rows = synthetic(1500, seed=7)
    dataset = Dataset.from_instances("syn", rows)
    config = ExperimentConfig(
        "s", BOTH, window=25, fading=0.8, positive="flat", delay=str(delay), limit=1400
    )
    events = list(replay_schedule("s", rows[:1400], delay))
    reference = document(drive(Experiment(config), events, None, False, None))
    for block in (1, 2, 3, 999):
        assert document(label_schedule_run(config, dataset, block)) == reference, block


def test_label_schedule_refuses_decreasing_event_times() -> None:
    with pytest.raises(ValueError, match="event time must not decrease"):
        LabelSchedule.build(np.array([0.0, 2.0, 1.0]), InstanceDelay(1))
