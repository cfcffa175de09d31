"""The wire codec: the bytes of every topic's messages, both ways, with one NaN policy.

Every producer and consumer of the pipeline's topics encodes and decodes here: the
replay (input events), the worker (it decodes input and experiments, encodes
predictions, metrics, drift alarms, results, failure notices, deadletter records and
checkpoint parts), and the readers of the output topics (``run``'s results waiter, the
restore scan of the output topics, the checkpoint reader, ``docker/collect_results.py``).
What a message may hold is :mod:`streameval.schemas`'s concern (the JSON Schemas and their
validators); this module turns the core's objects into such messages and back.

Wire form: one compact UTF-8 JSON value per message (an object, or for packed input and
for predictions an array of objects), at most :data:`~streameval.schemas.MAX_MESSAGE_BYTES`;
the key is the stream id in UTF-8.

NaN policy
----------
JSON has no NaN or infinity.

* Out: :func:`encode` writes every NaN and infinity as ``null`` (an undefined metric, a
  prediction without a value). Input events are stricter, since ``null`` is not a
  feature value: a NaN feature value is a missing value and is left out of ``x``; an
  infinite feature value, ``ts`` or ``y`` raises :class:`ValueError` naming the event
  (:func:`feature_message`, :func:`label_message`, :func:`end_message`).
* In: the tokens ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON, so a message
  carrying one is invalid (:func:`parse` raises, :func:`decode` and :func:`decode_events`
  give the reason, the worker sends the message to the deadletter topic); an integer
  literal beyond the range of a double counts as infinite and fails validation; ``null``
  reads as ``None``. A missing feature value is an absent key of ``x``.

>>> encode({"stream": "s", "metrics": {"kappa": float("nan"), "accuracy": 0.5}})
b'{"stream":"s","metrics":{"kappa":null,"accuracy":0.5}}'
>>> decode("labels", b'{"stream":"s","id":"7","ts":3.0,"y":"UP","seq":12}')
({'stream': 's', 'id': '7', 'ts': 3.0, 'y': 'UP', 'seq': 12}, None)
>>> decode("labels", b'{"stream":"s","id":"7","ts":NaN,"y":"UP","seq":12}')[1][:12]
'invalid JSON'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec
from streameval.pipeline.events import (
    DriftEvent,
    EndOfStream,
    FeatureEvent,
    InputEvent,
    LabelEvent,
    MetricSnapshot,
    Output,
    PredictionEvent,
    clean,
    event_from_dict,
)
from streameval.schemas import MAX_MESSAGE_BYTES, reason_text, validate, validator_of
from streameval.schemas.packed import event_decoder, packed_decoder

__all__ = [
    "MAX_PACKED_EVENTS",
    "StreamFailed",
    "decode",
    "decode_events",
    "encode",
    "end_message",
    "failed_message",
    "failure_text",
    "feature_message",
    "input_events",
    "input_message",
    "label_message",
    "output_message",
    "parse",
    "results_message",
    "stream_outcome",
]

#: Most events one packed message may carry.
MAX_PACKED_EVENTS = 10_000


# -- out ----------------------------------------------------------------------------------------


def _dumps(message: Any) -> bytes:
    return json.dumps(
        message, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_plain
    ).encode("utf-8")


def _plain(value: Any) -> Any:
    """JSON fallback for numpy scalars and arrays (``.item()``/``.tolist()``), NaN as null."""
    for attr in ("item", "tolist"):
        method = getattr(value, attr, None)
        if callable(method):
            return clean(method())
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode(message: dict[str, Any] | list[Any]) -> bytes:
    """The wire form of ``message``: compact UTF-8 JSON, every NaN and infinity ``null``.

    >>> encode([{"y_pred": float("inf")}, {"y_pred": "UP"}])
    b'[{"y_pred":null},{"y_pred":"UP"}]'
    """
    try:
        return _dumps(message)
    except ValueError:  # a NaN or an infinity: the common case pays no scan for them
        return _dumps(clean(message))


#: The encoder of input events: one msgspec call, several times faster than ``json.dumps``
#: (the replay's main cost). Its numbers read back as the same floats; the text of some
#: differs (``1e-05`` is ``0.00001``).
_INPUT_ENCODER = msgspec.json.Encoder(enc_hook=_plain)
#: What it raises for a value it cannot write (an int beyond 64 bits, a lone surrogate).
_CANNOT_WRITE = (TypeError, ValueError, OverflowError, msgspec.EncodeError)


def encode_input(message: dict[str, Any]) -> bytes:
    """:func:`encode` of an input event's wire dict, which holds no NaN or infinity
    (:func:`feature_message` and :func:`label_message` leave none in it).

    >>> encode_input({"stream": "s", "id": "1", "ts": 0.0, "x": {"a": 1e-05}, "seq": 2})
    b'{"stream":"s","id":"1","ts":0.0,"x":{"a":0.00001},"seq":2}'
    """
    try:
        return _INPUT_ENCODER.encode(message)
    except _CANNOT_WRITE:
        return encode(message)  # what msgspec cannot write (an int beyond 64 bits) or the error


# -- in -----------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
#: A ``\\uD800``-``\\uDFFF`` escape: the only way a lone surrogate gets into a parsed
#: string (strict UTF-8 input cannot carry one). A lone one cannot be encoded again.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_NOT_UTF8 = "invalid unicode: a lone surrogate (\\ud800-\\udfff escape) cannot be UTF-8"


def _not_utf8(value: Any) -> bool:
    """True if ``value`` holds a string (or key) that cannot be encoded as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parse(raw: bytes | bytearray | memoryview | str | None) -> tuple[Any, str | None, bool]:
    """``(value, None, may_hold_surrogates)`` or ``(None, reason, False)``."""
    if raw is None or len(raw) == 0:
        return None, "empty message", False
    size = len(raw)
    if size > MAX_MESSAGE_BYTES:
        return None, f"too large ({size} bytes > {MAX_MESSAGE_BYTES})", False
    try:
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
        value = _DECODER.decode(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, reason_text(f"invalid JSON: {exc}"), False
    except RecursionError:
        return None, "invalid JSON: nested too deeply", False
    return value, None, _SURROGATE_ESCAPE.search(text) is not None


def parse(raw: bytes | bytearray | memoryview | str | None) -> Any:
    """The JSON value of a message, not validated (readers of the output and checkpoint
    topics); raises :class:`ValueError` with the reason :func:`decode` would give.

    >>> parse(b'{"seq":3,"y_pred":null}')
    {'seq': 3, 'y_pred': None}
    >>> parse(b'{"y_pred":Infinity}')
    Traceback (most recent call last):
    ...
    ValueError: invalid JSON: Infinity is not valid JSON
    """
    value, reason, _ = _parse(raw)
    if reason is not None:
        raise ValueError(reason)
    return value


def _validate_item(topic_kind: str, item: Any, surrogates: bool) -> str | None:
    try:
        if surrogates and _not_utf8(item):
            return _NOT_UTF8
        return validate(topic_kind, item)
    except RecursionError:
        return "nested too deeply"


def decode(
    topic_kind: str, raw: bytes | bytearray | memoryview | str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """Parse and validate one message value: ``(message, None)`` or ``(None, reason)``.

    Reasons are short and stable enough to count by: ``empty message``,
    ``too large (N bytes)``, ``invalid JSON: ...``, ``not a JSON object``,
    ``invalid unicode: ...`` (a lone surrogate escape), or the schema violation.
    """
    message, reason, surrogates = _parse(raw)
    if reason is not None:
        return None, reason
    if type(message) is not dict:
        return None, "not a JSON object"
    reason = _validate_item(topic_kind, message, surrogates)
    if reason is not None:
        return None, reason
    return message, None


def decode_events(
    topic_kind: str, raw: bytes | bytearray | memoryview | str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse a message that carries one event or a packed array of events.

    For the features and labels topics (packed replay messages) and the
    predictions topic (the worker publishes a JSON array of predictions per
    input message, each with its own ``seq`` and ``duplicate`` flag).

    Returns the valid events and one reason per invalid one (``"[i] reason"``
    for an element of a packed array). A message that is not JSON at all, or
    an array that is too long, gives one reason and no events.

    >>> decode_events("labels", b'[{"stream":"s","id":"1","ts":0,"y":"a","seq":0},{"x":1}]')
    ([{'stream': 's', 'id': '1', 'ts': 0, 'y': 'a', 'seq': 0}], ["[1] missing property 'id'"])
    """
    value, reason, surrogates = _parse(raw)
    if reason is not None:
        return [], [reason]
    return _valid_items(topic_kind, value, surrogates)


def _valid_items(
    topic_kind: str, value: Any, surrogates: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """The valid events of a parsed message (see :func:`decode_events`), with the reasons."""
    if type(value) is dict:
        reason = _validate_item(topic_kind, value, surrogates)
        return ([value], []) if reason is None else ([], [reason])
    if type(value) is not list:
        return [], ["not a JSON object or array of objects"]
    if len(value) > MAX_PACKED_EVENTS:
        return [], [f"packed message of {len(value)} events > {MAX_PACKED_EVENTS}"]
    events: list[dict[str, Any]] = []
    reasons: list[str] = []
    for i, item in enumerate(value):
        if type(item) is not dict:
            reasons.append(f"[{i}] not a JSON object")
            continue
        reason = _validate_item(topic_kind, item, surrogates)
        if reason is None:
            events.append(item)
        else:
            reasons.append(f"[{i}] {reason}")
    return events, reasons


def input_events(
    topic_kind: str, raw: bytes | bytearray | memoryview | str | None
) -> tuple[list[InputEvent], list[str]]:
    """The valid input events of a features or labels message, and the reasons of the rest.

    >>> events, reasons = input_events("features", b'[{"stream":"s","id":"1","ts":0,"x":{}}]')
    >>> events, reasons
    ([], ["[0] missing property 'seq'"])
    >>> [event] = input_events("labels", b'{"stream":"s","id":"1","ts":0,"y":"a","seq":1}')[0]
    >>> type(event).__name__, event.ts, event.y
    ('LabelEvent', 0.0, 'a')
    """
    if raw.__class__ is bytes and len(raw) <= MAX_MESSAGE_BYTES:  # type: ignore[arg-type]
        events = _common_events(topic_kind, raw)  # type: ignore[arg-type]
        if events is not None:
            return events, []
    return input_events_one_by_one(topic_kind, raw)


def _common_events(topic_kind: str, raw: bytes) -> list[InputEvent] | None:
    """The events of a message (one event, or packed) all of whose events have the common
    form (:mod:`streameval.schemas.packed`), checked in one call; ``None`` for any other."""
    first = raw[:1]
    if first == b"[":
        decode = packed_decoder(topic_kind)
    elif first == b"{":
        decode = event_decoder(topic_kind)
    else:
        return None
    if decode is None:
        return None
    try:
        decoded = decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):  # invalid UTF-8 inside a string
        return None
    items = decoded if first == b"[" else [decoded]
    if len(items) > MAX_PACKED_EVENTS:
        return None
    if topic_kind == "features":
        make = FeatureEvent
        return [make(e.stream, e.id, e.ts, e.x, e.seq) for e in items]
    label = LabelEvent
    return [label(e.stream, e.id, e.ts, e.y, e.seq) for e in items]


def input_events_one_by_one(
    topic_kind: str, raw: bytes | bytearray | memoryview | str | None
) -> tuple[list[InputEvent], list[str]]:
    """:func:`input_events` for any message: parsed, then each event checked by itself
    (the path that finds every invalid event's reason)."""
    value, reason, surrogates = _parse(raw)
    if reason is not None:
        return [], [reason]
    if type(value) is dict or surrogates:  # one event; or strings to check for UTF-8
        messages, reasons = _valid_items(topic_kind, value, surrogates)
        return [event_from_dict(m) for m in messages], reasons
    if type(value) is not list:
        return [], ["not a JSON object or array of objects"]
    if len(value) > MAX_PACKED_EVENTS:
        return [], [f"packed message of {len(value)} events > {MAX_PACKED_EVENTS}"]
    # a packed message: each event checked and built in one pass, from the parsed dicts
    # themselves (nothing else holds them)
    check = validator_of(topic_kind)
    events: list[InputEvent] = []
    reasons = []
    for i, item in enumerate(value):
        reason = check(item)
        if reason is None:
            events.append(_input_event(item))
        else:
            reasons.append(f"[{i}] {reason}")
    return events, reasons


def _input_event(d: dict[str, Any]) -> InputEvent:
    """The event of a valid input message (:func:`event_from_dict`, less the copies)."""
    if "x" in d:
        return FeatureEvent(d["stream"], d["id"], float(d["ts"]), d["x"], int(d["seq"]))
    if "y" in d:
        return LabelEvent(d["stream"], d["id"], float(d["ts"]), d["y"], int(d["seq"]))
    return event_from_dict(d)


# -- input events -------------------------------------------------------------------------------


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def feature_message(event: FeatureEvent) -> dict[str, Any]:
    """Wire dict of a feature event; NaN feature values are left out (missing).

    >>> ev = FeatureEvent("s", "1", 0.0, {"a": float("nan"), "b": 2.0}, 7)
    >>> feature_message(ev)
    {'stream': 's', 'id': '1', 'ts': 0.0, 'x': {'b': 2.0}, 'seq': 7}
    """
    x = event.x
    if not all(_finite(v) for v in x.values()):
        present = {}
        for name, value in x.items():
            if isinstance(value, float) and math.isnan(value):
                continue
            if not _finite(value):
                raise ValueError(
                    f"stream {event.stream!r} instance {event.id!r} (seq {event.seq}): "
                    f"feature {name!r} is {value}; JSON cannot carry infinities"
                )
            present[name] = value
        x = present
    if not _finite(event.ts):
        raise ValueError(f"stream {event.stream!r} seq {event.seq}: ts is {event.ts}")
    return {"stream": event.stream, "id": event.id, "ts": event.ts, "x": x, "seq": event.seq}


def label_message(event: LabelEvent) -> dict[str, Any]:
    """Wire dict of a label event; a NaN or infinite ``ts`` or ``y`` is a ``ValueError``."""
    if not (_finite(event.ts) and _finite(event.y)):
        raise ValueError(
            f"stream {event.stream!r} instance {event.id!r} (seq {event.seq}): "
            f"ts={event.ts}, y={event.y}: JSON cannot carry NaN or infinities"
        )
    return event.to_dict()


def end_message(event: EndOfStream) -> dict[str, Any]:
    """Wire dict of the end-of-stream marker (sent to both input topics)."""
    if not _finite(event.ts):
        raise ValueError(f"stream {event.stream!r} end marker: ts is {event.ts}")
    return {
        "stream": event.stream,
        "end": True,
        "ts": event.ts,
        "seq": event.seq,
        "n_events": event.n_events,
    }


def _as_is(wire: Any) -> bytes | None:
    """``wire`` (an input event or its wire dict, or a list of them) written by the input
    encoder, when the codec's rules would change nothing in it, else ``None``.

    msgspec writes a NaN, an infinity and ``None`` as ``null``: a text without ``null``
    had none of them, and nothing to leave out or refuse (one with ``null`` inside a string
    goes the long way too).
    """
    try:
        raw = _INPUT_ENCODER.encode(wire)
    except _CANNOT_WRITE:
        return None
    return None if b"null" in raw else raw


def _written(event: FeatureEvent | LabelEvent) -> bytes | None:
    """``event``'s message as :func:`feature_message` or :func:`label_message` then
    :func:`encode_input` write it, when they would change nothing in it (:func:`_as_is`),
    else ``None``. The encoder writes an event's fields, in order: its wire dict."""
    return _as_is(event)


def written_many(events: Sequence[FeatureEvent | LabelEvent]) -> bytes | None:
    """The JSON array of ``events``' messages in one encoder call, when
    :func:`input_message` would write each as it is (:func:`_as_is`), else ``None``.

    >>> written_many([LabelEvent("s", "1", 0.0, "UP", 1), LabelEvent("s", "2", 1.0, "UP", 3)])
    b'[{"stream":"s","id":"1","ts":0.0,"y":"UP","seq":1},{"stream":"s","id":"2","ts":1.0,"y":"UP","seq":3}]'
    """
    return _as_is(events)


def input_message(event: InputEvent) -> tuple[tuple[str, ...], bytes]:
    """The topic kinds an input event goes to, and its encoded message.

    >>> input_message(EndOfStream("s", 9.0, 4, 4))
    (('features', 'labels'), b'{"stream":"s","end":true,"ts":9.0,"seq":4,"n_events":4}')
    """
    if isinstance(event, FeatureEvent):
        return ("features",), _written(event) or encode_input(feature_message(event))
    if isinstance(event, LabelEvent):
        return ("labels",), _written(event) or encode_input(label_message(event))
    if isinstance(event, EndOfStream):
        return ("features", "labels"), encode(end_message(event))
    raise TypeError(f"not an input event: {event!r}")


# -- outputs ------------------------------------------------------------------------------------


def output_message(out: Output, seq: int) -> tuple[str, dict[str, Any]]:
    """The output topic kind of a core output and its message, numbered ``seq``.

    >>> output_message(PredictionEvent("s", "nb", "7", 3.0, "first", "UP", 2), 5)[0]
    'predictions'
    """
    if type(out) is PredictionEvent:
        kind = "predictions"
    elif isinstance(out, MetricSnapshot):
        kind = "metrics"
    elif isinstance(out, DriftEvent):
        kind = "drift"
    else:
        raise TypeError(f"not an output: {out!r}")
    value = out.to_dict()
    value["seq"] = seq
    return kind, value


def results_message(
    stream: str, results: dict[str, Any], ts: float | None, seq: int
) -> dict[str, Any]:
    """The metrics-topic message that carries a finished stream's results document."""
    return {
        "stream": stream,
        "kind": "results",
        "n_labelled": results["n_labelled"],
        "ts": ts,
        "results": results,
        "seq": seq,
    }


def failed_message(
    stream: str, *, n_labelled: int, ts: float | None, error: str, deadletter: str, seq: int
) -> dict[str, Any]:
    """The metrics-topic message that says a stream stopped (in place of its results)."""
    return {
        "stream": stream,
        "kind": "failed",
        "n_labelled": n_labelled,
        "ts": ts,
        "error": error,
        "deadletter": deadletter,
        "seq": seq,
    }


def failure_text(stream: str, error: Any, deadletter: Any, reason: str = "experiment_error") -> str:
    """What ``run`` and the readers of the metrics topic say of a stream that failed."""
    what = "the event that failed" if reason == "experiment_error" else "the record"
    return (
        f"stream {stream!r} stopped: {error} ({what} is in the deadletter topic {deadletter}, "
        f"reason {reason})"
    )


class StreamFailed(RuntimeError):
    """The worker stopped a stream (a ``failed`` message on the metrics topic)."""


def stream_outcome(message: Any, stream: str) -> dict[str, Any] | None:
    """The results document if ``message`` (a parsed metrics message) is ``stream``'s
    results; raises :class:`StreamFailed` if it is ``stream``'s failure notice; else None.

    >>> stream_outcome({"stream": "s", "kind": "results", "results": {"n_labelled": 3}}, "s")
    {'n_labelled': 3}
    >>> stream_outcome({"stream": "s", "kind": "periodic"}, "s") is None
    True
    """
    if not isinstance(message, dict) or message.get("stream") != stream:
        return None
    kind = message.get("kind")
    if kind == "results":
        results: dict[str, Any] = message["results"]
        return results
    if kind == "failed":
        raise StreamFailed(
            failure_text(
                stream,
                message.get("error"),
                message.get("deadletter"),
                str(message.get("reason") or "experiment_error"),
            )
        )
    return None
