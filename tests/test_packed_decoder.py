"""A message checked whole (``msgspec``) gives the events of the one-by-one path.

:func:`~streameval.agents.codec.input_events` decodes a features or labels message, packed
or of one event, with the narrow ``msgspec`` form of :mod:`streameval.schemas.packed` and
falls back to the general path (:func:`~streameval.agents.codec.input_events_one_by_one`)
for any message that form refuses. Both must give the same events, value and type (an int
stays an int, ``-0.0`` stays ``-0.0``), and the same reasons. The cases that must take the
fast path are checked to take it, so that agreement is not won by always falling back.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streameval.agents.codec import (
    _common_events,
    input_events,
    input_events_one_by_one,
)
from streameval.agents.replay import PackedMessages
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
from streameval.schemas import MAX_ID_LENGTH


def _exact(events: list[Any]) -> list[Any]:
    """Every field of every event with its type: ``1 == 1.0`` and ``0.0 == -0.0`` are not
    the same value here."""

    def typed(v: Any) -> Any:
        if isinstance(v, dict):
            return [(typed(k), typed(w)) for k, w in v.items()]
        if isinstance(v, float):
            return ("float", v.hex())
        return (type(v).__name__, v)

    return [(type(e).__name__, [(f, typed(getattr(e, f))) for f in e.__slots__]) for e in events]


def _same_both_ways(kind: str, raw: bytes) -> bool:
    """Assert the two paths agree on ``raw``; return whether the fast path took it."""
    events, reasons = input_events(kind, raw)
    slow_events, slow_reasons = input_events_one_by_one(kind, raw)
    assert _exact(events) == _exact(slow_events)
    assert reasons == slow_reasons
    return _common_events(kind, raw) is not None


def _label(**change: Any) -> dict[str, Any]:
    return {"stream": "s", "id": "1", "ts": 1.5, "y": "UP", "seq": 0, **change}


def _features(**change: Any) -> dict[str, Any]:
    x = {"a": 0.25, "b": 3, "day": "2"}
    return {"stream": "s", "id": "1", "ts": 1.5, "x": x, "seq": 0, **change}


def _pack(*items: Any) -> bytes:
    return json.dumps(list(items), ensure_ascii=False).encode("utf-8")


TAKEN = {
    "labels": [
        _pack(_label(), _label(id="2", seq=1)),
        _pack(_label(ts=3)),  # an integer time: a float event time, as the general path
        _pack(_label(y=2), _label(y=-0.0), _label(y=2**63 - 1), _label(y=-(2**63))),
        _pack(_label(id="\u00e9" * MAX_ID_LENGTH)),
        _pack(_label(id="\U0001f600" * MAX_ID_LENGTH)),  # characters, not bytes
        _pack(_label(seq=2**64 - 1)),
        _pack(_label(ts=9007199254740993)),  # rounded as float() rounds it
        b'[{"stream":"s","id":"\\ud83d\\ude00","ts":1,"y":"a","seq":0}]',  # a valid pair
        b'[ {"stream" : "s","id":"1","ts":1E2,"y":1e-320,"seq":0} ] \n',
        b'[{"stream":"s","id":"1","ts":0.1000000000000000055511151231257827,"y":"a","seq":0}]',
        b'[{"stream":"s","stream":"t","id":"1","ts":1,"y":"a","seq":0}]',  # the last one wins
        b"[]",
    ],
    "features": [
        _pack(_features(), _features(id="2", seq=1, x={})),
        _pack(_features(x={"a": 1, "b": -0.0, "c": 1e-300, "d": "", "e": "\u00e9"})),
        b'[{"stream":"s","id":"1","ts":1,"x":{"a":1,"a":"z"},"seq":0}]',
    ],
}

DECLINED = {
    "labels": [
        b'[{"stream":"s","id":"\xff","ts":1,"y":"a","seq":0}]',  # invalid UTF-8
        b'[{"stream":"s","id":"a\nb","ts":1,"y":"a","seq":0}]',  # a raw control character
        b'[{"stream":"s","id":"1","ts":1,"y":"a","seq":0}]x',  # trailing bytes
        b'[{"stream":"s","id":"\\ud83d","ts":1,"y":"a","seq":0}]',  # a lone surrogate
        b'[{"stream":"s","id":"1","ts":1e400,"y":"a","seq":0}]',  # infinite
        b'[{"stream":"s","id":"1","ts":' + b"9" * 400 + b',"y":"a","seq":0}]',
        _pack(_label(id="\u00e9" * (MAX_ID_LENGTH + 1))),
        _pack(_label(id="")),
        _pack(_label(seq=True)),
        _pack(_label(seq=3.0)),  # valid, with seq 3: the general path makes it
        _pack(_label(seq=-1)),
        _pack(_label(y=None)),
        _pack(_label(y=True)),
        _pack(_label(y=2**63)),  # valid: the general path keeps it
        _pack(_label(y=-(10**309))),  # beyond a double: invalid
        _pack(_label(seq=10**40), _label(y=10**309)),
        _pack(_label(extra=1)),
        _pack({k: v for k, v in _label().items() if k != "seq"}),
        _pack(_label(), {"stream": "s", "end": True, "ts": 9.0, "seq": 1, "n_events": 1}),
        _pack([_label()]),
    ],
    "features": [
        _pack(_features(x={"": 1.0})),
        _pack(_features(), _features(x={"a": 1.0, "": 2.0})),  # the empty name second
        _pack(_features(x={"a": None})),
        _pack(_features(x={"a": [1.0]})),
        _pack(_features(x={"a": False})),
        _pack(_features(x={"a": 10**309})),
        _pack(_features(x=[1.0])),
        _pack(_label()),
    ],
}


@pytest.mark.parametrize(
    ("kind", "raw"), [(k, r) for k, raws in TAKEN.items() for r in raws]
)  # fmt: skip
def test_the_common_form_takes_the_fast_path_and_gives_the_same_events(
    kind: str, raw: bytes
) -> None:
    assert _same_both_ways(kind, raw)


@pytest.mark.parametrize(
    ("kind", "raw"), [(k, r) for k, raws in DECLINED.items() for r in raws]
)  # fmt: skip
def test_anything_else_is_left_to_the_general_path(kind: str, raw: bytes) -> None:
    assert not _same_both_ways(kind, raw)


def _one(raw: bytes) -> bytes | None:
    """The event of a packed message of one event, as a message of its own."""
    items = json.loads(raw)
    return json.dumps(items[0]).encode() if len(items) == 1 else None


@pytest.mark.parametrize(
    ("kind", "raw"),
    [(k, _one(r)) for k, raws in TAKEN.items() for r in raws if _one(r)]
    + [("labels", b'{"stream":"s","id":"1","ts":1,"y":"a","seq":0} \n')],
)
def test_one_event_in_the_common_form_takes_the_fast_path(kind: str, raw: bytes) -> None:
    assert _same_both_ways(kind, raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"stream":"s","id":"1","ts":1,"y":"a","seq":0}x',
        b' {"stream":"s","id":"1","ts":1,"y":"a","seq":0}',  # valid: the general path takes it
        b'{"stream":"s","id":"\\ud83d","ts":1,"y":"a","seq":0}',
        b'{"stream":"s","end":true,"ts":9.0,"seq":1,"n_events":1}',  # the end marker
        json.dumps(_label(seq=-1)).encode(),
        json.dumps(_label(y=2**63)).encode(),
        json.dumps(_label(extra=1)).encode(),
        b'"not an event"',
        b"{}",
    ],
)
def test_one_event_outside_the_common_form_is_left_to_the_general_path(raw: bytes) -> None:
    assert not _same_both_ways("labels", raw)


def test_too_many_events_are_refused_as_before() -> None:
    from streameval.agents.codec import MAX_PACKED_EVENTS

    raw = b"[" + b",".join([json.dumps(_label()).encode()] * (MAX_PACKED_EVENTS + 1)) + b"]"
    assert not _same_both_ways("labels", raw)
    assert input_events("labels", raw) == (
        [],
        [f"packed message of {MAX_PACKED_EVENTS + 1} events > {MAX_PACKED_EVENTS}"],
    )


def test_a_replays_packed_messages_take_the_fast_path() -> None:
    """The replay's packing of real events (numbers, a string, an int) is the common form,
    its end marker is not."""
    events: list[Any] = []
    for i in range(120):
        x = {"a": i / 7, "day": "2", "n": i}
        events.append(FeatureEvent("elec", str(i), 10.0 * i, x, 2 * i))
        events.append(LabelEvent("elec", str(i), 10.0 * i + 5, "UP", 2 * i + 1))
    packer = PackedMessages(50)
    messages = [m for e in events for m in packer.add(e)] + packer.flush()
    messages += packer.add(EndOfStream("elec", 9999.0, 240, 240))
    decoded: dict[str, list[Any]] = {"features": [], "labels": []}
    fast = []
    for m in messages:
        kind = m.kind
        fast.append(_same_both_ways(kind, m.value))
        decoded[kind] += input_events(kind, m.value)[0]
    assert fast == [True] * (len(messages) - 2) + [False, False]  # the marker, on both topics
    assert decoded["features"][:-1] == events[0::2] and decoded["labels"][:-1] == events[1::2]


_finite = st.floats(allow_nan=False, allow_infinity=False)
_number = _finite | st.integers(-(2**70), 2**70)
_valid = _number | st.text(max_size=5)
_huge = st.sampled_from([2**63, -(2**63) - 1, 10**308, 10**309, -(10**309)])
_scalar = _valid | _huge | st.booleans() | st.none() | st.floats()
_ident = st.text(min_size=1, max_size=4) | st.just("\u00e9" * MAX_ID_LENGTH)


@st.composite
def _events(draw: Any, kind: str) -> dict[str, Any]:
    """A valid event, or one in four an event with wild values and maybe a key missing."""
    wild = draw(st.integers(0, 3)) == 0
    value = _scalar if wild else _valid
    event: dict[str, Any] = {
        "stream": draw(_ident | st.text(max_size=1) if wild else _ident),
        "id": draw(_ident),
        "ts": draw(_number | st.floats() if wild else _number),
        "seq": draw(st.integers(-2, 2**65) | st.just(3.0) if wild else st.integers(0, 2**63)),
    }
    if kind == "features":
        names = st.text(max_size=3) if wild else st.text(min_size=1, max_size=3)
        event["x"] = draw(st.dictionaries(names, value, max_size=4))
    else:
        event["y"] = draw(value)
    if wild and draw(st.booleans()):
        event.pop(draw(st.sampled_from(sorted(event))))
    return event


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_packed_message_gives_what_the_general_path_gives(data: Any) -> None:
    kind = data.draw(st.sampled_from(["features", "labels"]))
    items = data.draw(st.lists(_events(kind), max_size=4))
    whole = data.draw(st.booleans()) and len(items) == 1  # one event: a message of its own
    text = json.dumps(items[0] if whole else items, ensure_ascii=data.draw(st.booleans()))
    _same_both_ways(kind, text.encode("utf-8", "surrogatepass"))


def test_the_fast_path_checks_what_the_schema_checks() -> None:
    """Spot checks of the narrow form against the limits the schemas state."""
    assert _common_events("labels", _pack(_label(ts=math.pi)))[0].ts == math.pi  # type: ignore[index]
    assert _common_events("labels", _pack(_label(ts=1.7976931348623157e308))) is not None
    assert (
        _common_events("labels", b'[{"stream":"s","id":"1","ts":-1e309,"y":"a","seq":0}]') is None
    )
    assert _common_events("predictions", b"[]") is None
