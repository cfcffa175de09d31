"""A source mapping: where the parts of an event are in the user's own Kafka messages.

A team's topics already exist, in its own JSON layout: say ``shop.orders`` with the
features, keyed by customer, timed by the Kafka timestamp, and ``shop.chargebacks`` with
the labels, keyed by order id, weeks later. A :class:`SourceMapping` says, for each of the
two topics, where the instance id and the event time are, and where the stream id, the
label and the features are; :meth:`SourceMapping.feature_event` and
:meth:`SourceMapping.label_event` turn one message into the core's event, or raise
:class:`RecordError` naming the field that is missing or of the wrong type.

Places are JSON pointers (RFC 6901: ``/order/id``; ``~1`` is ``/`` and ``~0`` is ``~``
inside a name; an array element by its index), or ``key`` (the message key, UTF-8) for
an id, or ``timestamp`` (the Kafka message timestamp) for a time. A time field is epoch
milliseconds (``time_format = "ms"``, the default), epoch seconds (``"s"``), or ISO-8601
text (``"iso"``; UTC when it names no zone). The stream id is a name (every message
belongs to that one stream) or a JSON pointer present in both topics' messages.

Features are every field of the object at ``features`` (default the whole message) but
the fields the mapping uses as id, time, stream or label; nested objects are flattened
with ``.`` (``{"order": {"amount": 3}}`` gives the feature ``order.amount``). ``include``
keeps only the named features, ``exclude`` drops some. A number is a numeric feature, a
string a nominal one, ``true``/``false`` the nominal ``"true"``/``"false"``, ``null`` a
missing value; a list is a :class:`RecordError`. A label is a string, a number or a
boolean (``"true"``/``"false"``).

In the ``[source]`` section of a config file::

    [source]
    features_topic = "shop.orders"
    labels_topic = "shop.chargebacks"
    stream = "shop"
    feature_id = "/order/id"
    feature_time = "timestamp"
    label_id = "key"
    label_time = "/decided_at"
    time_format = "iso"
    label = "/chargeback"
    exclude = ["order.customer"]

>>> m = SourceMapping.from_dict({"features_topic": "o", "labels_topic": "c", "stream": "shop",
...     "feature_id": "/order/id", "label_id": "key", "label": "/cb", "label_time": "/at",
...     "time_format": "s"})
>>> event = m.feature_event({"order": {"id": 7, "amount": 2.5, "zip": "x"}}, b"c1", 5000)
>>> event.stream, event.id, event.ts, event.x
('shop', '7', 5.0, {'order.amount': 2.5, 'order.zip': 'x'})
>>> m.label_event({"cb": True, "at": 9}, b"7", 0).y
'true'
>>> m.label_event({"at": 9}, b"7", 0)  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
...
streameval.agents.mapping.RecordError: /cb: missing (the label)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from streameval.pipeline.events import FeatureEvent, LabelEvent

__all__ = ["KEY", "TIMESTAMP", "RecordError", "SourceMapping", "resolve"]

KEY = "key"
TIMESTAMP = "timestamp"
TIME_FORMATS = ("ms", "s", "iso")
#: At equal event times features sort before labels, as in the replay schedule.
FEATURE_SEQ, LABEL_SEQ = 0, 1
_MISSING = object()


class RecordError(ValueError):
    """A message of the user's topics that does not fit the mapping; names the field."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.field = where


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (it starts with /)")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def resolve(document: Any, pointer: str) -> Any:
    """The value at ``pointer`` in ``document`` (RFC 6901), else ``_MISSING``.

    >>> resolve({"a": [{"b~c": 1}]}, "/a/0/b~0c")
    1
    """
    value = document
    for token in _tokens(pointer):
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _MISSING
    return value


def _name(pointer: str, base: str) -> str:
    """The feature name of the field at ``pointer`` under the features object ``base``."""
    return ".".join(_tokens(pointer)[len(_tokens(base)) :])


@dataclass(frozen=True)
class SourceMapping:
    """Where every part of an event is in the user's messages (see the module docstring)."""

    features_topic: str
    labels_topic: str
    label: str
    stream: str = ""
    feature_id: str = KEY
    label_id: str = KEY
    feature_time: str = TIMESTAMP
    label_time: str = TIMESTAMP
    time_format: str = "ms"
    features: str = ""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    _used: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("features_topic", "labels_topic", "label"):
            if not getattr(self, name):
                raise ValueError(f"source mapping: {name} is required")
        if self.features_topic == self.labels_topic:
            raise ValueError("source mapping: features and labels need two topics")
        if self.time_format not in TIME_FORMATS:
            raise ValueError(
                f"source mapping: time_format must be one of {', '.join(TIME_FORMATS)}"
            )
        places = {"label": None, "features": None, "feature_id": KEY, "label_id": KEY}
        places |= {"feature_time": TIMESTAMP, "label_time": TIMESTAMP}
        for name, word in places.items():
            value = getattr(self, name)
            if value != word and (value or name != "features") and not value.startswith("/"):
                also = f" or {word!r}" if word else ""
                raise ValueError(f"source mapping: {name} = {value!r} is not a JSON pointer{also}")
        used = [self.feature_id, self.feature_time, self.stream]
        object.__setattr__(self, "_used", frozenset(p for p in used if p.startswith("/")))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SourceMapping:
        """A mapping from the keys of a ``[source]`` section (lists for include/exclude)."""
        known = {f.name for f in fields(cls) if not f.name.startswith("_")}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"source mapping: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        given = {k: v for k, v in values.items() if v is not None}
        for name in ("include", "exclude"):
            if name in given:
                given[name] = tuple(given[name])
        return cls(**given)

    @property
    def stream_name(self) -> str | None:
        """The one stream of every message, or ``None`` when a pointer gives it."""
        if self.stream.startswith("/"):
            return None
        return self.stream or self.features_topic

    # -- messages to events ---------------------------------------------------------------

    def feature_event(
        self, value: Any, key: bytes | None, timestamp_ms: int | None
    ) -> FeatureEvent:
        """The features of one message of the features topic."""
        stream = self._stream(value)
        ident = self._id(value, key, self.feature_id)
        ts = self._time(value, timestamp_ms, self.feature_time)
        return FeatureEvent(stream, ident, ts, self._x(value), FEATURE_SEQ)

    def label_event(self, value: Any, key: bytes | None, timestamp_ms: int | None) -> LabelEvent:
        """The label of one message of the labels topic."""
        stream = self._stream(value)
        ident = self._id(value, key, self.label_id)
        ts = self._time(value, timestamp_ms, self.label_time)
        y = resolve(value, self.label)
        if y is _MISSING or y is None:
            raise RecordError(self.label, "missing (the label)")
        if isinstance(y, bool):
            y = "true" if y else "false"
        elif not isinstance(y, (str, int, float)):
            raise RecordError(self.label, f"a label is a string or a number, not {_kind(y)}")
        return LabelEvent(stream, ident, ts, y, LABEL_SEQ)

    def _stream(self, value: Any) -> str:
        name = self.stream_name
        if name is not None:
            return name
        found = resolve(value, self.stream)
        if isinstance(found, bool) or not isinstance(found, (str, int)) or found == "":
            what = "missing" if found is _MISSING else f"{_kind(found)}, not a name"
            raise RecordError(self.stream, f"{what} (the stream id)")
        return str(found)

    @staticmethod
    def _id(value: Any, key: bytes | None, where: str) -> str:
        if where == KEY:
            if not key:
                raise RecordError("key", "the message has no key (the instance id)")
            try:
                return key.decode("utf-8")
            except UnicodeDecodeError:
                raise RecordError("key", "not UTF-8 (the instance id)") from None
        found = resolve(value, where)
        if isinstance(found, bool) or not isinstance(found, (str, int)) or found == "":
            what = "missing" if found is _MISSING else f"{_kind(found)}, not an id"
            raise RecordError(where, f"{what} (the instance id)")
        return str(found)

    def _time(self, value: Any, timestamp_ms: int | None, where: str) -> float:
        if where == TIMESTAMP:
            if timestamp_ms is None or timestamp_ms < 0:
                raise RecordError("timestamp", "the message has no Kafka timestamp")
            return timestamp_ms / 1000.0
        found = resolve(value, where)
        if found is _MISSING or found is None:
            raise RecordError(where, "missing (the event time)")
        if self.time_format == "iso":
            if not isinstance(found, str):
                raise RecordError(where, f"{_kind(found)}, not an ISO-8601 time")
            try:
                stamp = datetime.fromisoformat(found.replace("Z", "+00:00"))
            except ValueError:
                raise RecordError(where, f"{found!r} is not an ISO-8601 time") from None
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp()
        if isinstance(found, bool) or not isinstance(found, (int, float)):
            raise RecordError(where, f"{_kind(found)}, not a number of {self.time_format}")
        return float(found) / (1000.0 if self.time_format == "ms" else 1.0)

    def _x(self, value: Any) -> dict[str, float | str]:
        base = resolve(value, self.features)
        if not isinstance(base, dict):
            what = "missing" if base is _MISSING else _kind(base)
            raise RecordError(self.features or "/", f"{what}, not an object of features")
        x: dict[str, float | str] = {}
        self._flatten(base, self.features, x)
        if self.include:
            x = {k: v for k, v in x.items() if k in self.include}
        for name in self.exclude:
            x.pop(name, None)
        if not x:
            raise RecordError(self.features or "/", "no feature left in the message")
        return x

    def _flatten(self, obj: dict[str, Any], pointer: str, x: dict[str, float | str]) -> None:
        for name, item in obj.items():
            where = f"{pointer}/{name.replace('~', '~0').replace('/', '~1')}"
            if where in self._used:
                continue
            if isinstance(item, dict):
                self._flatten(item, where, x)
            elif isinstance(item, bool):
                x[_name(where, self.features)] = "true" if item else "false"
            elif isinstance(item, (int, float)):
                x[_name(where, self.features)] = float(item)
            elif isinstance(item, str):
                x[_name(where, self.features)] = item
            elif item is not None:
                raise RecordError(where, f"{_kind(item)} is not a feature value")


def _kind(value: Any) -> str:
    """``a list``, ``an object``, ... for error messages."""
    names = {list: "a list", dict: "an object", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else "a value")
