"""``--delay day-ahead``: the delayed-labelling paper's Electricity setting on the real file.

Sect. 5.1 (*Electricity*): the instances of day ``d + 2`` become available after the
midnight starting day ``d + 1``; the label of half-hour ``i`` arrives ``i * 30`` minutes
into day ``d + 2``. So an instance of half-hour ``p`` (0-based) of its day waits one day
plus ``p + 1`` half-hours: between 24.5 and 48 hours.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka_fixtures import run_and_evaluate
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.events import FeatureEvent, LabelEvent
from streameval.pipeline.streams.datasets import load
from streameval.pipeline.streams.delay import DayAheadDelay, parse_delay
from streameval.pipeline.streams.schedule import replay_schedule

DAY, HALF_HOUR = 86_400.0, 1_800.0


@pytest.fixture(scope="module")
def replay() -> dict[str, Any]:
    dataset = load("electricity")
    features: dict[str, FeatureEvent] = {}
    labels: dict[str, float] = {}
    order: list[tuple[str, str]] = []
    for ev in replay_schedule("elec", dataset.iter_instances(), parse_delay("day-ahead")):
        if isinstance(ev, FeatureEvent):
            features[ev.id] = ev
            order.append(("F", ev.id))
        elif isinstance(ev, LabelEvent):
            labels[ev.id] = ev.ts
            order.append(("L", ev.id))
    return {"features": features, "labels": labels, "order": order}


def test_day_ahead_is_a_named_delay_model() -> None:
    assert parse_delay("day-ahead") == DayAheadDelay() and str(DayAheadDelay()) == "day-ahead"


def test_hand_checked_instances_wait_as_the_paper_describes(replay: dict[str, Any]) -> None:
    f, lab = replay["features"], replay["labels"]
    # instance 0: 00:00-00:30 of day 0, released the midnight before, labelled at 00:30
    assert (f["0"].ts, lab["0"]) == (-DAY, HALF_HOUR)
    # instance 47: the last half-hour of day 0, labelled at midnight: a 48-hour wait
    assert (f["47"].ts, lab["47"]) == (-DAY, DAY)
    # instance 100: day 2 (rows 96..143), its 5th half-hour (period 4/47 in the file)
    assert f["100"].x["period"] == pytest.approx(4 / 47, abs=1e-6)
    assert f["100"].x["date"] == f["96"].x["date"] != f["95"].x["date"]
    assert (f["100"].ts, lab["100"]) == (DAY, 2 * DAY + 5 * HALF_HOUR)


def test_every_wait_is_one_day_plus_the_half_hours_up_to_the_period_end(
    replay: dict[str, Any],
) -> None:
    f, lab = replay["features"], replay["labels"]
    assert len(f) == len(lab) == 45_312
    waits = []
    for uid, ev in f.items():
        i = int(uid)
        period = round(ev.x["period"] * 47)  # the file's own half-hour index, 0..47
        assert period == i % 48
        assert ev.ts == (i // 48 - 1) * DAY  # the whole day released together
        wait = lab[uid] - ev.ts
        assert wait == DAY + (period + 1) * HALF_HOUR
        waits.append(wait)
    assert (min(waits), max(waits)) == (DAY + HALF_HOUR, 2 * DAY)


def test_features_come_a_day_ahead_and_before_labels_due_at_the_same_midnight(
    replay: dict[str, Any],
) -> None:
    order = replay["order"]
    first_label = next(k for k, (kind, _) in enumerate(order) if kind == "L")
    assert order[first_label] == ("L", "0") and first_label == 96  # days 0 and 1 first
    # the label of the last half-hour of day 0 is due at the midnight day 2 is released
    assert order.index(("F", "143")) < order.index(("L", "47")) < order.index(("F", "144"))


def _same(labels: list[str], i: int, j: int) -> bool:
    return j >= 0 and labels[i] == labels[j]


def test_no_change_bins_are_the_hand_computed_lags_of_the_label_sequence() -> None:
    """No-Change at b=0 repeats the newest label known a day ahead; at b=B+1 the previous one.

    Day ``k``'s instances are first predicted at the midnight starting day ``k - 1``, when
    the labels up to half-hour 46 of day ``k - 2`` have arrived (half-hour 47's arrives
    at that very midnight, after the features), so instance ``i`` gets ``y`` of
    ``48 (i // 48 - 2) + 46``; none for days 0 and 1 (a wrong prediction).
    """
    n = 4_800
    config = ExperimentConfig(
        "elec", ["nochange"], dataset="electricity", limit=n, delay="day-ahead",
        reeval_k=10, bins=10,
    )  # fmt: skip
    binned = evaluate_config(config)["learners"]["nochange"]["binned"]["accuracy"]
    labels = list(load("electricity").iter_labels(n))
    first = sum(_same(labels, i, 48 * (i // 48 - 2) + 46) for i in range(96, n)) / n
    last = sum(_same(labels, i, i - 1) for i in range(n)) / n
    assert binned[0] == pytest.approx(first, abs=1e-12)
    assert binned[-1] == pytest.approx(last, abs=1e-12)
    assert first < 0.55 < 0.8 < last  # a day-old label is a poor guess, the previous one good


@pytest.mark.kafka
@pytest.mark.slow
def test_run_through_kafka_gives_evaluate_under_day_ahead(kafka_settings: Any) -> None:
    """The day-ahead replay (features at negative event time on day 0) through the embedded
    broker: the results document of `evaluate`, binned curves included."""
    config = ExperimentConfig(
        "elec-dayahead", ["nochange", "majority", "nb"], dataset="electricity", limit=960,
        delay="day-ahead", reeval_k=10, bins=10, snapshot_every=200,
    )  # fmt: skip
    ran, reference = run_and_evaluate(config, kafka_settings)
    assert ran == reference
    assert reference["curves"]["binned"]["n_labelled"][-1] == 960
