"""The replay schedule: order, completeness, delays, streaming."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.datasets import load
from streameval.pipeline.streams.delay import DelayModel, FeatureTimeDelay, InstanceDelay, TimeDelay
from streameval.pipeline.streams.schedule import replay_schedule


def rows(times: list[float], lengths: list[float] | None = None) -> list[Instance]:
    return [
        Instance(str(i), ts, {"Length": (lengths or [0.0] * len(times))[i]}, f"y{i}")
        for i, ts in enumerate(times)
    ]


def trace(events: list[FeatureEvent | LabelEvent | EndOfStream]) -> str:
    return " ".join(e.kind[0].upper() + getattr(e, "id", "") for e in events)


def check_schedule(
    instances: list[Instance], events: list[FeatureEvent | LabelEvent | EndOfStream]
) -> None:
    """Every id once as features and once as label, label after features, sorted, seq 0.."""
    assert isinstance(events[-1], EndOfStream)
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[-1].n_events == len(events) - 1
    body = events[:-1]
    assert all(not isinstance(e, EndOfStream) for e in body)
    times = [e.ts for e in events]
    assert times == sorted(times)  # event time never decreases along the schedule
    assert [e.order_key for e in events] == sorted(e.order_key for e in events)
    if body:
        assert events[-1].ts == body[-1].ts
    feature_at = {}
    for e in body:
        if isinstance(e, FeatureEvent):
            assert e.id not in feature_at
            feature_at[e.id] = e.seq
    labels = [e for e in body if isinstance(e, LabelEvent)]
    assert sorted(e.id for e in labels) == sorted(i.id for i in instances)
    by_id = {i.id: i for i in instances}
    for e in labels:
        assert e.seq > feature_at[e.id] and e.y == by_id[e.id].y
    assert sorted(feature_at) == sorted(by_id)


def test_delay_zero_interleaves() -> None:
    events = list(replay_schedule("s", rows([0.0, 1.0, 2.0]), InstanceDelay(0)))
    assert trace(events) == "F0 L0 F1 L1 F2 L2 E"


def test_delay_two() -> None:
    instances = rows([float(i) for i in range(5)])
    events = list(replay_schedule("s", instances, InstanceDelay(2)))
    assert trace(events) == "F0 F1 F2 L0 F3 L1 F4 L2 L3 L4 E"
    labels = [e for e in events if isinstance(e, LabelEvent)]
    assert [e.ts for e in labels] == [2.0, 3.0, 4.0, 4.0, 4.0]  # tail at the last ts
    check_schedule(instances, events)


def test_count_delay_is_positional_at_equal_time() -> None:
    """Delay 0 with simultaneous instances is still test-then-train: F L F L ..."""
    events = list(replay_schedule("s", rows([0.0, 0.0, 1.0]), InstanceDelay(0)))
    assert trace(events) == "F0 L0 F1 L1 F2 L2 E"


def test_time_delay_features_first_at_equal_time() -> None:
    """time:0 with simultaneous instances: the group's features, then its labels."""
    events = list(replay_schedule("s", rows([0.0, 0.0, 1.0]), TimeDelay(0.0)))
    assert trace(events) == "F0 F1 L0 L1 F2 L2 E"


def test_time_delay_equals_count_delay_on_even_spacing() -> None:
    instances = rows([i * 1800.0 for i in range(200)])
    by_time = list(replay_schedule("s", instances, TimeDelay(48 * 1800.0)))
    by_count = list(replay_schedule("s", instances, InstanceDelay(48)))
    assert [(e.kind, getattr(e, "id", None)) for e in by_time] == [
        (e.kind, getattr(e, "id", None)) for e in by_count
    ]


def test_per_instance_delay_orders_labels_by_due_time() -> None:
    instances = rows([0.0, 60.0, 120.0], lengths=[10.0, 0.5, 1.0])  # minutes
    events = list(replay_schedule("s", instances, FeatureTimeDelay("Length", 60.0)))
    assert trace(events) == "F0 F1 L1 F2 L2 L0 E"
    assert [e.ts for e in events if isinstance(e, LabelEvent)] == [90.0, 180.0, 600.0]
    assert events[-1].ts == 600.0
    check_schedule(instances, events)


def test_empty_stream() -> None:
    assert list(replay_schedule("s", [], InstanceDelay(3))) == [EndOfStream("s", 0.0, 0, 0)]


def test_decreasing_time_rejected() -> None:
    with pytest.raises(ValueError, match="must not decrease"):
        list(replay_schedule("s", rows([1.0, 0.0]), InstanceDelay(0)))


def test_streams_lazily() -> None:
    """An endless source still yields events: nothing is read ahead beyond the delay."""

    def endless() -> Iterator[Instance]:
        for i in itertools.count():
            yield Instance(str(i), float(i), {}, "a")

    head = list(itertools.islice(replay_schedule("s", endless(), InstanceDelay(5)), 20))
    assert trace(head).startswith("F0 F1 F2 F3 F4 F5 L0 F6 L1")


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Instance], DelayModel]:
    steps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), max_size=40))
    times = list(itertools.accumulate(steps))
    lengths = draw(st.lists(st.floats(0, 5), min_size=len(times), max_size=len(times)))
    delay = draw(
        st.one_of(
            st.builds(InstanceDelay, st.integers(0, 8)),
            st.builds(TimeDelay, st.sampled_from([0.0, 0.5, 1.0, 2.5, 10.0])),
            st.just(FeatureTimeDelay("Length", 1.0)),
        )
    )
    return rows(times, lengths), delay


@settings(max_examples=150, deadline=None)
@given(streams())
def test_schedule_invariants(case: tuple[list[Instance], DelayModel]) -> None:
    instances, delay = case
    check_schedule(instances, list(replay_schedule("s", instances, delay)))


def test_natural_electricity_is_delay_48(data_dir: Path) -> None:
    """Same (kind, id) sequence; same times except the tail (count delay: last ts)."""
    ds = load("electricity", data_dir)
    n = 45_312
    natural = list(replay_schedule("e", ds.iter_instances(), ds.natural_delay))
    count = list(replay_schedule("e", ds.iter_instances(), InstanceDelay(48)))
    assert [(e.kind, getattr(e, "id", None)) for e in natural] == [
        (e.kind, getattr(e, "id", None)) for e in count
    ]
    body = 2 * n - 48  # events before the tail labels
    assert [e.ts for e in natural[:body]] == [e.ts for e in count[:body]]
    assert [e.ts for e in natural[body:-1]] == [(n - 48 + k) * 1800.0 + 86_400 for k in range(48)]
    assert [(e.kind, e.id, e.ts) for e in natural[:49]] == [
        ("features", str(i), i * 1800.0) for i in range(49)
    ]
    assert (natural[49].kind, natural[49].id, natural[49].ts) == ("label", "0", 48 * 1800.0)


def test_airlines_natural_schedule(data_dir: Path) -> None:
    ds = load("airlines", data_dir)
    instances = list(ds.iter_instances(limit=3000))
    events = list(replay_schedule("a", instances, ds.natural_delay))
    check_schedule(instances, events)
    first_label = next(e for e in events if isinstance(e, LabelEvent))
    # AA 2400 leaves at 0:20 for 165 min and lands first (CO 269: 0:15 + 205 min)
    assert first_label.id == "2" and first_label.ts == (20 + 165) * 60.0
