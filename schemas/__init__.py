"""JSON Schemas of every topic's messages, and fast validation for the hot path.

One JSON Schema (draft 2020-12) per topic kind lives next to this module
(``features.json``, ``labels.json``, ``predictions.json``, ``metrics.json``,
``drift.json``, ``deadletter.json``, ``experiments.json``,
``checkpoints.json``) plus shared pieces (``common.json``,
``end-of-stream.json``). They are the contract; the files are the reference.

Wire conventions
----------------
(The encoding and decoding themselves are :mod:`streameval.agents.codec`'s.)

* Value: one UTF-8 JSON object per message (compact separators), key: the
  stream id as UTF-8 bytes. At most :data:`MAX_MESSAGE_BYTES` per value.
  Features, labels and predictions messages may instead be packed: a JSON
  array of such objects.
* JSON has no NaN or infinity: every kind rejects them (and an integer literal
  beyond the range of a double, which counts as infinite); a producer leaves a
  missing feature value out of ``x`` and writes ``null`` for an undefined metric.
* Strings must be encodable as UTF-8: a lone surrogate escape (``"\\ud800"``) is
  refused, since nothing carrying it (an output, a deadletter record) could be
  written back. Nesting deeper than Python's recursion limit is refused as well.
* The features and labels topics each carry one end-of-stream marker per stream
  after its last event: ``{"stream", "end": true, "ts", "seq", "n_events"}``.
* Input messages (features, labels, markers) are strict: no extra properties.
  Output messages (predictions, metrics, drift, deadletter, experiments,
  checkpoints) accept additional properties.

Speed
-----
jsonschema costs 40-200 microseconds per message, too slow for a pipeline
meant to move 100k+ messages/s. Features and labels (the input hot path) and
predictions (the busiest output) are therefore checked by hand-written
checkers (~2 us a message) that agree with the JSON Schemas on every
JSON-decoded message (``tests/test_schemas.py`` checks that on a corpus of
valid and invalid messages); the other kinds use jsonschema with compiled
validators cached. ``validate(kind, msg, reference=True)`` forces jsonschema.
An experiment definition in the common form is accepted by :mod:`streameval.schemas.experiment_form`
without jsonschema, whose import alone costs ``run`` 30-45 ms; any other is jsonschema's.
A packed features or labels message in the common form is parsed and checked whole, in
C, by :mod:`streameval.schemas.packed` (``msgspec``); any other falls back to the checkers.

>>> validate("labels", {"stream": "s", "id": "7", "ts": 3.0, "y": "UP", "seq": 12}) is None
True
>>> validate("labels", {"stream": "s", "id": "7", "ts": 3.0, "seq": 12})
"missing property 'y'"
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

#: Topic kinds with a schema (the same kinds as :data:`streameval.agents.topics.TOPIC_KINDS`).
KINDS: tuple[str, ...] = (
    "features",
    "labels",
    "predictions",
    "metrics",
    "drift",
    "deadletter",
    "experiments",
    "checkpoints",
)
#: Shared schema documents referenced by the topic schemas.
SHARED: tuple[str, ...] = ("common", "end-of-stream")
#: Largest accepted message value (bytes).
MAX_MESSAGE_BYTES = 1 << 20
#: Longest payload excerpt kept in a deadletter record (characters).
PAYLOAD_LIMIT = 4096
#: Longest stream / instance id (characters).
MAX_ID_LENGTH = 256
_REASON_LIMIT = 200
#: Largest magnitude of a JSON number we accept: what a double can hold. A longer integer
#: literal (``1000...0``, 400 digits) is valid JSON but no finite float.
_MAX_FLOAT = sys.float_info.max

__all__ = [
    "KINDS",
    "MAX_MESSAGE_BYTES",
    "PAYLOAD_LIMIT",
    "deadletter_record",
    "reason_text",
    "schema",
    "validate",
    "validator_of",
]


# -- schema documents and compiled validators ------------------------------------------------


def _uri(name: str) -> str:
    return f"urn:streameval:schema:{name}"


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The parsed schema document ``name`` (a topic kind, ``common`` or ``end-of-stream``)."""
    if name not in KINDS and name not in SHARED:
        raise ValueError(f"unknown schema {name!r}; known: {', '.join(KINDS + SHARED)}")
    text = resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def _resolve(ref: str) -> Any:
    """The schema node a ``urn:streameval:schema:NAME#/json/pointer`` reference points at."""
    uri, _, pointer = ref.partition("#")
    prefix = _uri("")
    if not uri.startswith(prefix):
        raise ValueError(f"unsupported $ref {ref!r}: only {prefix}NAME references are bundled")
    node: Any = schema(uri[len(prefix) :])
    for part in (p for p in pointer.split("/") if p):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _inline(node: Any) -> Any:
    """A copy of ``node`` with every ``$ref`` replaced by what it points at.

    The references only point at plain definitions, so the bundled schema means
    the same; jsonschema validates it about 2.5x faster than through a registry.
    """
    if isinstance(node, list):
        return [_inline(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _inline(v) for k, v in node.items() if k != "$ref"}
    if "$ref" in node:
        target = {
            k: v for k, v in _inline(_resolve(node["$ref"])).items() if k not in ("$id", "$schema")
        }
        out = {**target, **out} if not target.keys() & out.keys() else {"allOf": [target], **out}
    return out


@functools.cache
def bundled_schema(kind: str) -> dict[str, Any]:
    """The schema of ``kind`` with its references inlined (self-contained)."""
    doc: dict[str, Any] = _inline(schema(kind))
    return doc


@functools.cache
def _validator(kind: str) -> Any:
    from jsonschema import Draft202012Validator

    doc = bundled_schema(kind)
    Draft202012Validator.check_schema(doc)
    return Draft202012Validator(doc)


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def reason_text(text: str) -> str:
    """``text`` cut to the length a reason is kept at (deadletter records count by it)."""
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 3] + "..."


def _non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first NaN/infinity inside ``value``, else ``None``."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "(message)")
    if type(value) is int:
        return None if -_MAX_FLOAT <= value <= _MAX_FLOAT else (path or "(message)")
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def validate_reference(kind: str, message: Any) -> str | None:
    """Validate with jsonschema (the reference), plus the no-NaN/infinity rule."""
    from jsonschema.exceptions import best_match

    validator = _validator(kind)
    error = None if validator.is_valid(message) else best_match(validator.iter_errors(message))
    if error is not None:
        where = _path(error.absolute_path)
        return reason_text(f"{where}: {error.message}" if where else error.message)
    bad = _non_finite(message)
    if bad:
        return f"{bad}: NaN/infinity is not allowed"
    return None


# -- fast checkers for the input hot path ------------------------------------------------------

_FEATURE_KEYS = frozenset({"stream", "id", "ts", "x", "seq"})
_LABEL_KEYS = frozenset({"stream", "id", "ts", "y", "seq"})
_END_KEYS = frozenset({"stream", "end", "ts", "seq", "n_events"})


def _is_number(v: Any) -> bool:
    """JSON Schema ``number`` (no bool), finite (an int too large for a double is not)."""
    t = type(v)
    if t is float:
        return v - v == 0.0  # False for NaN and +-inf
    if t is int:
        return -_MAX_FLOAT <= v <= _MAX_FLOAT
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return False
    return math.isfinite(v)


def _is_integer(v: Any) -> bool:
    """JSON Schema ``integer``: an int (no bool) or a float with no fractional part."""
    t = type(v)
    if t is int:
        return True
    if isinstance(v, bool):
        return False
    if isinstance(v, float):
        return v.is_integer()
    return isinstance(v, int)


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and 0 < len(v) <= MAX_ID_LENGTH


def _keys_reason(message: dict[str, Any], expected: frozenset[str]) -> str | None:
    keys = message.keys()
    if keys == expected:
        return None
    missing = expected - keys
    if missing:
        return f"missing property {sorted(missing)[0]!r}"
    extra = keys - expected
    return f"unexpected property {sorted(map(str, extra))[0]!r}"


def _check_common(message: dict[str, Any]) -> str | None:
    if not _is_id(message["stream"]):
        return f"stream: must be a string of 1 to {MAX_ID_LENGTH} characters"
    if not _is_number(message["ts"]):
        return "ts: must be a finite number"
    seq = message["seq"]
    if not _is_integer(seq) or seq < 0:
        return "seq: must be an integer >= 0"
    return None


def _check_end(message: dict[str, Any]) -> str | None:
    reason = _keys_reason(message, _END_KEYS)
    if reason:
        return f"end-of-stream marker: {reason}"
    if message["end"] is not True:
        return "end: must be true"
    reason = _check_common(message)
    if reason:
        return reason
    n = message["n_events"]
    if not _is_integer(n) or n < 0:
        return "n_events: must be an integer >= 0"
    return None


def _plain_features(m: Any) -> bool:
    """Whether ``m`` is a feature event :func:`check_features` accepts, told at a glance for
    the common form (float ``ts``, int ``seq``, float or string values); ``False`` leaves
    the verdict to the detailed checks."""
    if type(m) is not dict or m.keys() != _FEATURE_KEYS:
        return False
    s, i, t, q, x = m["stream"], m["id"], m["ts"], m["seq"], m["x"]
    if type(s) is not str or type(i) is not str or type(t) is not float or type(q) is not int:
        return False
    if type(x) is not dict or not (0 < len(s) <= MAX_ID_LENGTH and 0 < len(i) <= MAX_ID_LENGTH):
        return False
    if t - t != 0.0 or q < 0:
        return False
    for k, v in x.items():
        if type(v) is float:
            if v - v != 0.0:
                return False
        elif type(v) is not str:
            return False
        if type(k) is not str or not k:
            return False
    return True


def _plain_label(m: Any) -> bool:
    """:func:`_plain_features` for a label event (a string ``y``)."""
    if type(m) is not dict or m.keys() != _LABEL_KEYS:
        return False
    s, i, t, q = m["stream"], m["id"], m["ts"], m["seq"]
    if type(s) is not str or type(i) is not str or type(t) is not float or type(q) is not int:
        return False
    return (
        type(m["y"]) is str
        and 0 < len(s) <= MAX_ID_LENGTH
        and 0 < len(i) <= MAX_ID_LENGTH
        and t - t == 0.0
        and q >= 0
    )


def check_features(message: Any) -> str | None:
    """Fast check of a features-topic message (feature event or end marker)."""
    if _plain_features(message):
        return None
    if not isinstance(message, dict):
        return "not a JSON object"
    if "end" in message:
        return _check_end(message)
    reason = _keys_reason(message, _FEATURE_KEYS) or _check_common(message)
    if reason:
        return reason
    if not _is_id(message["id"]):
        return f"id: must be a string of 1 to {MAX_ID_LENGTH} characters"
    x = message["x"]
    if not isinstance(x, dict):
        return "x: must be an object"
    for k, v in x.items():
        t = type(v)
        if t is str or (t is float and v - v == 0.0):
            pass
        elif not (isinstance(v, str) or _is_number(v)):
            return reason_text(
                f"x.{k}: must be a finite number or a string (leave missing values out)"
            )
        if type(k) is not str or not k:
            return "x: feature names must be non-empty strings"
    return None


def check_labels(message: Any) -> str | None:
    """Fast check of a labels-topic message (label event or end marker)."""
    if _plain_label(message):
        return None
    if not isinstance(message, dict):
        return "not a JSON object"
    if "end" in message:
        return _check_end(message)
    reason = _keys_reason(message, _LABEL_KEYS) or _check_common(message)
    if reason:
        return reason
    if not _is_id(message["id"]):
        return f"id: must be a string of 1 to {MAX_ID_LENGTH} characters"
    y = message["y"]
    if not (isinstance(y, str) or _is_number(y)):
        return "y: must be a string (class label) or a finite number (regression target)"
    return None


_PREDICTION_REQUIRED = ("id", "kind", "learner", "stream", "ts", "y_pred")
_PREDICTION_KEYS = frozenset({*_PREDICTION_REQUIRED, "bin", "seq", "duplicate"})
_PREDICTION_KINDS = frozenset({"first", "repredict", "final"})


def check_predictions(message: Any) -> str | None:
    """Fast check of a predictions-topic message (extra properties allowed)."""
    if not isinstance(message, dict):
        return "not a JSON object"
    for key in _PREDICTION_REQUIRED:
        if key not in message:
            return f"missing property {key!r}"
    if not _is_id(message["stream"]):
        return f"stream: must be a string of 1 to {MAX_ID_LENGTH} characters"
    learner = message["learner"]
    if not isinstance(learner, str) or not learner:
        return "learner: must be a non-empty string"
    if not _is_id(message["id"]):
        return f"id: must be a string of 1 to {MAX_ID_LENGTH} characters"
    if not _is_number(message["ts"]):
        return "ts: must be a finite number"
    kind = message["kind"]
    if not isinstance(kind, str) or kind not in _PREDICTION_KINDS:
        return "kind: must be first, repredict or final"
    y_pred = message["y_pred"]
    if not (y_pred is None or isinstance(y_pred, str) or _is_number(y_pred)):
        return "y_pred: must be a string, a finite number or null"
    b = message.get("bin")
    if b is not None and (not _is_integer(b) or b < 0):
        return "bin: must be an integer >= 0 or null"
    if "seq" in message and not (_is_integer(message["seq"]) and message["seq"] >= 0):
        return "seq: must be an integer >= 0"
    if "duplicate" in message and not isinstance(message["duplicate"], bool):
        return "duplicate: must be a boolean"
    if len(message) > len(_PREDICTION_REQUIRED):
        for key in message.keys() - _PREDICTION_KEYS:
            bad = _non_finite(message[key], str(key))
            if bad:
                return f"{bad}: NaN/infinity is not allowed"
    return None


def check_experiments(message: Any) -> str | None:
    """:func:`validate_reference` of an experiment definition, without jsonschema when it is
    in the common form (:mod:`streameval.schemas.experiment_form`): the same reasons.

    >>> check_experiments({"stream": "s", "learners": ["nb"], "window": 0})
    'window: 0 is less than the minimum of 1'
    """
    from streameval.schemas.experiment_form import in_common_form

    return None if in_common_form(message) else validate_reference("experiments", message)


_FAST: dict[str, Callable[[Any], str | None]] = {
    "features": check_features,
    "labels": check_labels,
    "predictions": check_predictions,
    "experiments": check_experiments,
}


# -- public API --------------------------------------------------------------------------------


def validator_of(topic_kind: str) -> Callable[[Any], str | None]:
    """:func:`validate` for ``topic_kind``, as one function (a loop over many messages).

    >>> validator_of("labels")({"stream": "s", "id": "7", "ts": 3.0, "y": "UP", "seq": 1})
    """
    fast = _FAST.get(topic_kind)
    if fast is not None:
        return fast
    if topic_kind not in KINDS:
        raise ValueError(f"unknown topic kind {topic_kind!r}; known: {', '.join(KINDS)}")
    return functools.partial(validate_reference, topic_kind)


def validate(topic_kind: str, message: Any, *, reference: bool = False) -> str | None:
    """``None`` if ``message`` is valid for ``topic_kind``, else a short reason.

    Features, labels and predictions use the fast checkers unless ``reference=True``; every
    kind rejects NaN and infinities. Raises :class:`ValueError` for an unknown
    kind (a programming error, not bad data).

    >>> validate("features", {"stream": "s", "id": "1", "ts": 0, "x": {"a": 1}, "seq": 0}) is None
    True
    >>> validate("features", {"stream": "s", "end": True, "ts": 9, "seq": 4, "n_events": 4})
    >>> validate("drift", {"stream": "s"})
    "'learner' is a required property"
    """
    fast = _FAST.get(topic_kind)
    if fast is not None and not reference:
        return fast(message)
    if topic_kind not in KINDS:
        raise ValueError(f"unknown topic kind {topic_kind!r}; known: {', '.join(KINDS)}")
    return validate_reference(topic_kind, message)


def deadletter_record(
    reason: str,
    *,
    kind: str,
    topic: str,
    partition: int,
    offset: int,
    payload: bytes | str | None,
    error: BaseException | str | None = None,
    key: bytes | str | None = None,
    ts: float | None = None,
) -> dict[str, Any]:
    """A deadletter-topic message for an input that could not be used.

    The payload is decoded as UTF-8 (invalid bytes replaced) and cut to
    :data:`PAYLOAD_LIMIT` characters; ``truncated`` and ``payload_bytes`` say
    whether and from what size.

    >>> r = deadletter_record("too large", kind="features", topic="t", partition=0,
    ...                       offset=5, payload=b"x" * 5000)
    >>> len(r["payload"]), r["truncated"], r["payload_bytes"]
    (4096, True, 5000)
    """
    if payload is None:
        text, size = "", 0
    elif isinstance(payload, str):
        text, size = payload, len(payload.encode("utf-8", errors="replace"))
    else:
        raw = bytes(payload)
        size = len(raw)
        text = raw[: PAYLOAD_LIMIT * 4].decode("utf-8", errors="replace")
    truncated = len(text) > PAYLOAD_LIMIT or size > PAYLOAD_LIMIT * 4
    record: dict[str, Any] = {
        "reason": reason or "unknown",
        "kind": kind,
        "topic": topic,
        "partition": int(partition),
        "offset": int(offset),
        "payload": text[:PAYLOAD_LIMIT],
        "error": None if error is None else reason_text(str(error) or type(error).__name__),
        "truncated": truncated,
        "payload_bytes": size,
    }
    if key is not None:
        record["key"] = (
            key if isinstance(key, str) else bytes(key).decode("utf-8", errors="replace")
        )
    if ts is not None:
        record["ts"] = float(ts)
    return record
