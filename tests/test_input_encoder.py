"""The replay's encoder of input events (``msgspec``) writes what ``json.dumps`` writes.

:func:`~streameval.agents.codec.encode_input` encodes every feature and label message a
replay produces. Its text may differ from :func:`~streameval.agents.codec.encode`'s
(``1e-05`` is written ``0.00001``), never what a consumer reads from it: the same events,
value and type, an int an int and ``-0.0`` itself. The cases it must write itself are
checked to take no fallback, so that agreement is not won by always falling back.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.agents import codec
from streameval.agents.codec import encode, encode_input, input_events, input_message
from streameval.pipeline.events import FeatureEvent, LabelEvent
from streameval.pipeline.streams import load


def _typed(v: Any) -> Any:
    """``v`` with the type of every value: ``1 == 1.0`` and ``0.0 == -0.0`` differ here."""
    if isinstance(v, dict):
        return [(k, _typed(w)) for k, w in v.items()]
    if isinstance(v, list):
        return [_typed(w) for w in v]
    if isinstance(v, float):
        return ("float", v.hex())
    return (type(v).__name__, v)


def _read(raw: bytes) -> Any:
    return _typed(json.loads(raw))


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any call of the ``json.dumps`` path from :func:`encode_input`."""

    def refuse(message: Any) -> bytes:
        raise AssertionError(f"encode_input fell back for {message!r}")

    monkeypatch.setattr(codec, "encode", refuse)


_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),  # no lone surrogate
)


@settings(max_examples=300, deadline=None)
@given(
    x=st.dictionaries(st.text(max_size=6), _values, max_size=6),
    ts=st.floats(allow_nan=False, allow_infinity=False),
    y=st.one_of(st.text(max_size=6), st.integers(-1000, 1000), st.floats(-1e300, 1e300)),
)
def test_any_input_message_reads_back_as_json_dumps_writes_it(
    x: dict[str, Any], ts: float, y: Any
) -> None:
    features = codec.feature_message(FeatureEvent("s", "id-é", ts, x, 3))
    label = codec.label_message(LabelEvent("s", "id-é", ts, y, 4))
    for message in (features, label):
        assert _read(encode_input(message)) == _read(encode(message))


def test_numpy_scalars_are_written_as_their_python_values(no_fallback: None) -> None:
    x = {"a": np.float64(0.1), "b": np.float32(0.5), "c": np.int64(-7), "d": 1e-05}
    message = codec.feature_message(FeatureEvent("s", "1", 2.0, x, 0))
    raw = encode_input(message)
    assert json.loads(raw)["x"] == {"a": 0.1, "b": 0.5, "c": -7, "d": 1e-05}
    assert _read(raw) == _read(codec._dumps(message))


def test_an_int_beyond_64_bits_falls_back_to_json_dumps() -> None:
    message = codec.feature_message(FeatureEvent("s", "1", 0.0, {"big": 2**70}, 0))
    assert encode_input(message) == encode(message)
    assert json.loads(encode_input(message))["x"]["big"] == 2**70


def test_a_lone_surrogate_is_refused_as_before() -> None:
    message = codec.feature_message(FeatureEvent("s", "1", 0.0, {"a": "\ud800"}, 0))
    with pytest.raises(UnicodeEncodeError):
        encode(message)
    with pytest.raises(UnicodeEncodeError):
        encode_input(message)


def _fields(events: list[Any]) -> list[Any]:
    return [_typed({f: getattr(e, f) for f in e.__slots__}) for e in events]


def test_electricity_replayed_gives_the_events_json_dumps_gives(no_fallback: None) -> None:
    """Every instance of Electricity (it ships with the package), as the replay encodes it,
    decodes to the very events the ``json.dumps`` text decodes to, and to the events sent."""
    n = 0
    for inst in load("electricity").iter_instances():
        features = FeatureEvent("electricity", inst.id, inst.ts, inst.x, 2 * n)
        label = LabelEvent("electricity", inst.id, inst.ts, inst.y, 2 * n + 1)
        for event, message in (
            (features, codec.feature_message(features)),
            (label, codec.label_message(label)),
        ):
            (kind,), raw = input_message(event)
            events, reasons = input_events(kind, raw)
            assert not reasons
            assert _fields(events) == _fields(input_events(kind, codec._dumps(message))[0])
            assert _fields(events) == _fields([event])
        n += 1
    assert n == 45_312
