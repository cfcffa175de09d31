"""Input messages checked whole, in C: the common form of the features and labels topics
as ``msgspec`` types.

A replay packs hundreds of events into one message (a JSON array); a producer of one's
own usually sends one event (a JSON object) per message. Checking events in Python
(:func:`~streameval.schemas.check_features`) costs more than parsing them;
:func:`packed_decoder` parses a whole array, and :func:`event_decoder` one object, *and*
checks every event in one call of ``msgspec``'s decoder, against a narrower form of the
features and labels schemas:

* exactly the properties ``stream``, ``id``, ``ts``, ``x`` (or ``y``), ``seq``;
* ``stream`` and ``id`` strings of 1 to :data:`~streameval.schemas.MAX_ID_LENGTH`
  characters, ``ts`` a finite number (an integer becomes a float, as the codec makes it),
  ``seq`` an integer >= 0;
* feature names non-empty strings; feature values and ``y`` strings, finite floats, or
  integers of 64 bits (which stay integers). The names are checked after the decoder, by
  one lookup of ``""`` per event: a length bound on a dict's keys makes msgspec decode the
  features of a replayed Electricity 1.7 times slower (52 ms against 31 ms for the whole
  stream).

Everything this form accepts, the schemas accept, with the same values. It accepts less:
an end-of-stream marker, a feature value or ``y`` that is an integer beyond 64 bits,
``seq`` written as ``3.0``, any invalid event. A message it refuses is decoded again by
the codec's general path, which finds each event's own reason
(``tests/test_packed_decoder.py`` compares the two paths on valid and invalid messages).

>>> decode = packed_decoder("labels")
>>> assert decode is not None
>>> [(e.id, e.ts, e.y) for e in decode(b'[{"stream":"s","id":"7","ts":3,"y":"UP","seq":1}]')]
[('7', 3.0, 'UP')]
>>> decode(b'[{"stream":"s","id":"7","ts":3,"y":"UP","seq":-1}]')
Traceback (most recent call last):
...
msgspec.ValidationError: Expected `int` >= 0 - at `$[0].seq`
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec
from streameval.schemas import MAX_ID_LENGTH

__all__ = ["PackedFeatures", "PackedLabel", "event_decoder", "packed_decoder"]

_MAX = sys.float_info.max
# Annotated[...] and Union[...] are evaluated at run time by msgspec: no PEP 604 here
Finite = Annotated[float, msgspec.Meta(ge=-_MAX, le=_MAX)]  # inf (1e400) is out of range
Identifier = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
Sequence = Annotated[int, msgspec.Meta(ge=0)]
# a longer integer is left to the general path, which refuses one beyond a double's range
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Value = Union[Int64, Finite, str]  # noqa: UP007


class PackedFeatures(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A feature event of a packed message, checked."""

    stream: Identifier
    id: Identifier
    ts: Finite
    x: dict[str, Value]  # no empty name: see _named
    seq: Sequence


class PackedLabel(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A label event of a packed message, checked."""

    stream: Identifier
    id: Identifier
    ts: Finite
    y: Value
    seq: Sequence


def _named(event: PackedFeatures) -> PackedFeatures:
    """``event``, once it has no feature of empty name (``ValidationError`` otherwise)."""
    if "" in event.x:
        raise msgspec.ValidationError(f"Expected a non-empty feature name - at {event.id!r}")
    return event


_PACKED_FEATURES = msgspec.json.Decoder(list[PackedFeatures])
_ONE_FEATURES = msgspec.json.Decoder(PackedFeatures)
_DECODERS: dict[str, Callable[[bytes], Any]] = {
    "features": lambda raw: [_named(event) for event in _PACKED_FEATURES.decode(raw)],
    "labels": msgspec.json.Decoder(list[PackedLabel]).decode,
}
_ONE: dict[str, Callable[[bytes], Any]] = {
    "features": lambda raw: _named(_ONE_FEATURES.decode(raw)),
    "labels": msgspec.json.Decoder(PackedLabel).decode,
}


def packed_decoder(topic_kind: str) -> Callable[[bytes], list[Any]] | None:
    """The decoder of packed ``topic_kind`` messages into checked events (``None`` for a
    kind other than ``features`` and ``labels``); it raises ``msgspec.DecodeError``
    (``ValidationError`` is one) for any message outside the narrow form above.

    >>> packed_decoder("features")(b'[{"stream":"s","id":"7","ts":3,"x":{"":1},"seq":1}]')
    Traceback (most recent call last):
    ...
    msgspec.ValidationError: Expected a non-empty feature name - at '7'
    """
    return _DECODERS.get(topic_kind)


def event_decoder(topic_kind: str) -> Callable[[bytes], Any] | None:
    """:func:`packed_decoder` for a message of one event (a JSON object).

    >>> decode = event_decoder("labels")
    >>> assert decode is not None
    >>> decode(b'{"stream":"s","id":"7","ts":3,"y":"UP","seq":1}').ts
    3.0
    """
    return _ONE.get(topic_kind)
