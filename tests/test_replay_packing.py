"""The replay's packing (:class:`~streameval.agents.replay.PackedMessages`): a pack written in
one encoder call holds the same bytes as the codec's messages of its events, one by one,
joined; ``max_events`` and ``max_bytes`` cut the packs as documented; values JSON cannot
carry take the codec's own way (a NaN left out, an infinity refused)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.agents.codec import input_events, input_message
from streameval.agents.replay import Message, PackedMessages
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent


def _messages(packer: PackedMessages, events: list[Any]) -> list[Message]:
    return [m for e in events for m in packer.add(e)] + packer.flush()


def _by_topic(messages: list[Message]) -> list[bytes]:
    """The values on the features topic in order, then those on the labels topic."""
    return [m.value for kind in ("features", "labels") for m in messages if m.kind == kind]


def _reference(events: list[Any], max_events: int, max_bytes: int) -> list[bytes]:
    """The documented rule, event by event: per topic, blocks of ``max_events`` in order, each
    cut where its next event's message would pass ``max_bytes``."""
    out = []
    for cls in (FeatureEvent, LabelEvent):
        mine = [input_message(e)[1] for e in events if e.__class__ is cls]
        for start in range(0, len(mine), max_events):
            items: list[bytes] = []
            for item in mine[start : start + max_events]:
                if items and len(b"[" + b",".join([*items, item]) + b"]") > max_bytes:
                    out.append(b"[" + b",".join(items) + b"]")
                    items = []
                items.append(item)
            out.append(b"[" + b",".join(items) + b"]")
    return out


def _electricity_like(n: int) -> list[Any]:
    events: list[Any] = []
    for i in range(n):
        x = {"date": i / 7, "day": str(i % 7 + 1), "period": i % 48, "price": 1e-05 * i}
        events.append(FeatureEvent("elec", str(i), 1800.0 * i, x, 2 * i))
        events.append(LabelEvent("elec", str(i), 1800.0 * i, "UP" if i % 3 else "DOWN", 2 * i + 1))
    return events


def test_a_pack_is_the_codecs_messages_joined() -> None:
    events = _electricity_like(450)
    messages = _messages(PackedMessages(200), events)
    # each topic's full packs as they fill (the features first), then the flush of both
    assert [m.kind for m in messages] == ["features", "labels"] * 3
    assert _by_topic(messages) == _reference(events, 200, 256 * 1024)
    assert {m.key for m in messages} == {b"elec"}


def test_the_end_marker_flushes_its_stream_and_travels_alone() -> None:
    events = _electricity_like(3)
    packer = PackedMessages(200)
    held = [m for e in events for m in packer.add(e)]
    other = packer.add(FeatureEvent("other", "1", 0.0, {"a": 1.0}, 0))
    out = packer.add(EndOfStream("elec", 3600.0, 6, 6))
    assert held == [] and other == []
    assert [(m.kind, m.value.count(b'"seq"')) for m in out] == [
        ("features", 3),
        ("labels", 3),
        ("features", 1),
        ("labels", 1),
    ]
    assert b'"end":true' in out[-1].value and b'"end":true' in out[-2].value
    assert [m.key for m in packer.flush()] == [b"other"]  # the other stream still held


def test_max_bytes_cuts_a_pack_in_order() -> None:
    events = _electricity_like(60)
    one = len(input_message(events[0])[1])
    limit = 5 * one
    messages = _messages(PackedMessages(50, max_bytes=limit), events)
    assert all(len(m.value) <= limit for m in messages)
    assert _by_topic(messages) == _reference(events, 50, limit)
    features = [
        e for m in messages if m.kind == "features" for e in input_events("features", m.value)[0]
    ]
    assert features == events[0::2]


def test_an_event_longer_than_max_bytes_travels_alone() -> None:
    long = FeatureEvent("s", "1", 0.0, {"text": "x" * 500}, 0)
    short = [FeatureEvent("s", str(i), float(i), {"a": 1.0}, i) for i in range(2, 5)]
    messages = _messages(PackedMessages(10, max_bytes=200), [short[0], long, *short[1:]])
    counts = [m.value.count(b'"seq"') for m in messages]
    assert counts == [1, 1, 2]
    assert len(messages[1].value) > 200


def test_a_nan_is_left_out_and_an_infinity_refused_when_the_pack_is_written() -> None:
    nan = FeatureEvent("s", "1", 0.0, {"a": math.nan, "b": 2.0}, 0)
    ok = FeatureEvent("s", "2", 1.0, {"a": 1.0, "b": 2.0}, 1)
    (message,) = _messages(PackedMessages(10), [nan, ok])
    assert message.value == b"[" + input_message(nan)[1] + b"," + input_message(ok)[1] + b"]"
    assert b'"x":{"b":2.0}' in message.value

    packer = PackedMessages(2)
    assert packer.add(FeatureEvent("s", "3", 2.0, {"a": math.inf}, 2)) == []
    with pytest.raises(ValueError, match="'3'"):
        packer.add(ok)


_value = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=6)
    | st.just(math.nan)
)


@st.composite
def _streams(draw: Any) -> list[Any]:
    n = draw(st.integers(0, 40))
    events: list[Any] = []
    for i in range(n):
        names = draw(st.lists(st.text(min_size=1, max_size=3), max_size=4, unique=True))
        x = {name: draw(_value) for name in names}
        events.append(FeatureEvent("s", str(i), float(i), x, 2 * i))
        if draw(st.booleans()):
            y = draw(st.text(min_size=1, max_size=4) | st.integers(-(2**70), 2**70))
            events.append(LabelEvent("s", str(i), float(i), y, 2 * i + 1))
    return events


@settings(max_examples=150, deadline=None)
@given(_streams(), st.integers(1, 7), st.integers(20, 400))
def test_packing_follows_the_rule_for_any_events(events: list[Any], k: int, limit: int) -> None:
    messages = _messages(PackedMessages(k, max_bytes=limit), events)
    assert _by_topic(messages) == _reference(events, k, limit)
    assert all(len(json.loads(m.value)) <= k for m in messages)
