"""Any iterable of ``(x, y)`` or ``(x, y, ts)`` as a stream of instances.

River's datasets, a list of pairs, a generator: each item is the features ``x``
(a mapping of feature name to value), the target ``y`` and, optionally, its
event time ``ts`` (seconds, or a :class:`datetime.datetime`). Without ``ts`` an
instance's event time is its position, so a delay of ``N`` means ``N`` instances.
Items are read one at a time: an endless generator works with ``limit``.

>>> list(instances([({"a": 1}, "x"), ({"a": 2}, "y")]))
[Instance(id='0', ts=0.0, x={'a': 1}, y='x'), Instance(id='1', ts=1.0, x={'a': 2}, y='y')]
>>> next(instances([({"a": 1}, "x", 60.5)]))
Instance(id='0', ts=60.5, x={'a': 1}, y='x')
>>> next(instances([[1, 2]]))
Traceback (most recent call last):
...
TypeError: stream item 0: x must be a mapping of feature name to value, got int
>>> next(instances([({"a": 1}, "x", float("nan"))]))
Traceback (most recent call last):
...
ValueError: stream item 0: ts must be a finite number of seconds or a datetime, got nan
"""

from __future__ import annotations

import datetime as dt
import numbers
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from streameval.pipeline.streams.base import Instance


def instances(
    stream: Iterable[Any], limit: int | None = None, *, task: str | None = None
) -> Iterator[Instance]:
    """The items of ``stream`` as :class:`Instance` rows, at most ``limit`` of them.
    ``task``, when given, checks the labels: two classes that print alike, a regression
    target that is not a number, are refused."""
    classes, regression = task == "classification", task == "regression"
    items = iter(stream) if limit is None else islice(stream, limit)
    labels: dict[str, Any] = {}  # each class's text: the results name classes by it
    for i, item in enumerate(items):
        x, y, ts = _unpack(i, item)
        if classes:
            _check_label(i, y, labels)
        elif regression and not _is_real(y):
            raise ValueError(
                f"stream item {i}: y {y!r:.40} is not a number, and the task is "
                "regression (the models are regressors)"
            )
        yield Instance(str(i), float(i) if ts is None else _seconds(i, ts), x, y)


def _check_label(i: int, y: Any, labels: dict[str, Any]) -> None:
    """Refuse a label whose text is an earlier, different label's (``1`` after ``"1"``)."""
    text = str(y)
    first = labels.setdefault(text, y)
    if first is not y and first != y:
        raise ValueError(
            f"stream item {i}: label {y!r} ({type(y).__name__}) reads as the earlier "
            f"label {first!r} ({type(first).__name__}): give the classes one type"
        )


def _unpack(i: int, item: Any) -> tuple[dict[str, Any], Any, Any]:
    try:
        size = len(item)
    except TypeError:
        size = -1
    if size not in (2, 3):
        raise TypeError(f"stream item {i}: expected (x, y) or (x, y, ts), got {item!r:.80}")
    x = item[0]
    if not isinstance(x, Mapping):
        raise TypeError(
            f"stream item {i}: x must be a mapping of feature name to value, got {type(x).__name__}"
        )
    if item[1] is None:
        raise ValueError(f"stream item {i}: y is None (every instance needs its label)")
    if size == 3 and item[2] is None:
        raise TypeError(f"stream item {i}: {_TS_KINDS}, got None (or give (x, y) only)")
    return x if isinstance(x, dict) else dict(x), item[1], item[2] if size == 3 else None


_TS_KINDS = "ts must be a finite number of seconds or a datetime"


def _seconds(i: int, ts: Any) -> float:
    if isinstance(ts, dt.datetime):
        return ts.timestamp()
    try:
        seconds = float(ts)
    except (TypeError, ValueError):
        raise TypeError(f"stream item {i}: {_TS_KINDS}, got {ts!r:.40}") from None
    if seconds - seconds != 0.0:  # NaN or infinite: no place in time
        raise ValueError(f"stream item {i}: {_TS_KINDS}, got {ts!r:.40}")
    return seconds


def _is_real(y: Any) -> bool:
    """A number a regression metric can read (``bool`` included, as ``float`` reads it)."""
    return isinstance(y, numbers.Real)
