"""Label delay models: when the true label of an instance is delivered.

Every model places the label event of instance ``i`` relative to the
feature events of the stream (:mod:`streameval.pipeline.streams.schedule` builds the
replay). At equal event time, features come before labels (the ordering rule
of :mod:`streameval.pipeline.events`).

``0``
    The label right after its own features: the test-then-train (immediate
    labelling) setting. If the next instance has the *same* event time, its
    features come first by the ordering rule, so on a stream with ties in
    ``ts`` (airlines: flights departing the same minute) the labels of a
    group of simultaneous instances follow the whole group.
``N`` (a non-negative integer)
    The label of instance ``i`` right after the features of instance
    ``i + N``, at the event time of ``i + N``. The labels of the last ``N``
    instances come after the last features, at the last event time, in
    stream order. This is the fixed count delay of the delayed-labelling
    paper (``delayed-labelling-continuous-reevaluation.txt``, sect. 5.1:
    hyperplane 100, LED, Agrawal and forest cover type 1000 instances).
``time:S``
    The label at event time ``ts_i + S`` (seconds). With features first at
    equal times, ``time:S`` equals ``N`` whenever instances are evenly spaced
    by ``S / N`` seconds.
``day-ahead``
    Day-ahead forecasting, the delayed-labelling paper's Electricity setting
    (sect. 5.1, *Electricity*): the features of every half-hour of day ``k``
    are released together at the midnight starting day ``k - 1``, and the
    label of a half-hour arrives at its end, so an instance waits between one
    day and a half-hour and two days (:class:`DayAheadDelay`). Unlike the other
    models it moves the features' event time, not only the label's.
``natural``
    The delay of the dataset's own setting (:attr:`Dataset.natural_delay`):

    * electricity: one day, ``time:86400``, i.e. 48 half-hour periods later,
      the same schedule as ``48`` thanks to the features-first rule. This is
      the day-ahead setting of the delayed-labelling paper (sect. 5.1,
      *Electricity*), simplified to a constant 24 hours; ``day-ahead`` is
      the paper's own, with latencies between one and two days;
    * covtype: ``1000`` instances, as in the same paper (sect. 5.1, *Forest
      cover type*: no natural delay, 1000 instances simulated);
    * airlines: the flight's arrival, ``ts_i + Length_i * 60`` (``Length`` is
      the scheduled flight time in minutes): features are known at the
      scheduled departure, the label when the flight lands (sect. 5.1,
      *Airlines*; there the true arrival is used, which our copy lacks);
    * synthetic generators whose paper setting fixes one (hyperplane 100,
      led and agrawal 1000); the others have none.

>>> parse_delay("48")
InstanceDelay(n=48)
>>> parse_delay("time:86400")
TimeDelay(seconds=86400.0)
>>> parse_delay("soon")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
streameval.pipeline.spec.SpecError: bad delay 'soon': allowed forms are 0, N ...
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streameval.pipeline.spec import SpecError

if TYPE_CHECKING:
    from streameval.pipeline.streams.base import Dataset, Instance

ALLOWED_FORMS = (
    "0, N (label after the features of the instance N positions later), "
    "time:S (label S seconds of event time later), day-ahead (features a day ahead, "
    "label at the half-hour's end) or natural (the dataset's own delay)"
)


class DelayModel(ABC):
    """When the label of an instance is delivered (see the module docstring)."""

    @abstractmethod
    def __str__(self) -> str:
        """The delay as a spec string (or a description for built-in models)."""


@dataclass(frozen=True)
class InstanceDelay(DelayModel):
    """The label of instance ``i`` right after the features of instance ``i + n``."""

    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise SpecError(f"delay must be >= 0 instances, got {self.n}")

    def __str__(self) -> str:
        return str(self.n)


class EventTimeDelay(DelayModel):
    """A delay expressed in event time: the features are released at :meth:`release`,
    the label is due at :meth:`due`."""

    @abstractmethod
    def due(self, instance: Instance) -> float:
        """Event time of the label of ``instance`` (never before ``instance.ts``)."""

    def release(self, instance: Instance) -> float:
        """Event time of the features of ``instance``: its own ``ts``, unless the model
        releases them earlier (never later, and never decreasing along the stream)."""
        return instance.ts


@dataclass(frozen=True)
class TimeDelay(EventTimeDelay):
    """The label at ``ts + seconds``."""

    seconds: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise SpecError(f"time delay must be a finite number >= 0, got {self.seconds}")

    def due(self, instance: Instance) -> float:
        return instance.ts + self.seconds

    def __str__(self) -> str:
        s = self.seconds
        return f"time:{int(s)}" if s == int(s) else f"time:{s}"


@dataclass(frozen=True)
class FeatureTimeDelay(EventTimeDelay):
    """The label at ``ts + x[feature] * unit``, e.g. a flight's landing.

    A negative or missing duration delivers the label at ``ts``.

    >>> from streameval.pipeline.streams.base import Instance
    >>> FeatureTimeDelay("Length", 60.0).due(Instance("0", 900.0, {"Length": 205.0}, "1"))
    13200.0
    """

    feature: str
    unit: float = 1.0

    def due(self, instance: Instance) -> float:
        value = instance.x.get(self.feature, 0.0)
        duration = float(value) * self.unit
        return instance.ts + duration if duration > 0 else instance.ts

    def __str__(self) -> str:
        return f"time:{self.feature}*{self.unit:g}"


@dataclass(frozen=True)
class LabelTimeDelay(EventTimeDelay):
    """The label at the event time a file gives for it (``label_time=COL`` of a file
    spec, :mod:`streameval.pipeline.streams.files`), by instance id.

    >>> from streameval.pipeline.streams.base import Instance
    >>> LabelTimeDelay({"a": 50.0}).due(Instance("a", 10.0, {}, "y"))
    50.0
    """

    times: Mapping[str, float] = field(repr=False, hash=False, compare=False)

    def due(self, instance: Instance) -> float:
        return max(self.times[instance.id], instance.ts)

    def __str__(self) -> str:
        return "label_time"


@dataclass(frozen=True)
class DayAheadDelay(EventTimeDelay):
    """Day-ahead forecasting: the features of every period of day ``k`` are released
    together at the start of day ``k - 1``; the label of a period arrives at its end.

    The Electricity setting of the delayed-labelling paper (sect. 5.1): instances of day
    ``d + 2`` become available after the midnight starting day ``d + 1``, and the label of
    half-hour ``i`` arrives ``i * 30`` minutes into day ``d + 2``. An instance starting
    at ``ts`` (``p`` periods into its day) waits ``day + (p + 1) * period``: between one
    day and a period and two days. Day 0 is released one day before the stream's
    first ``ts`` (negative event time when the stream starts at 0).

    >>> from streameval.pipeline.streams.base import Instance
    >>> d, inst = DayAheadDelay(), Instance("0", 2 * 86400 + 3 * 1800.0, {}, "UP")
    >>> d.release(inst) / 86400, (d.due(inst) - d.release(inst)) / 3600
    (1.0, 26.0)
    """

    day: float = 86_400.0
    period: float = 1_800.0

    def __post_init__(self) -> None:
        if not (0 < self.period <= self.day and math.isfinite(self.day)):
            raise SpecError(f"day-ahead needs 0 < period <= day, got {self.period}, {self.day}")

    def release(self, instance: Instance) -> float:
        return (math.floor(instance.ts / self.day) - 1) * self.day

    def due(self, instance: Instance) -> float:
        return instance.ts + self.period

    def __str__(self) -> str:
        return "day-ahead"


def parse_delay(spec: str | int, dataset: Dataset | None = None) -> DelayModel:
    """Resolve a delay spec: ``0``, ``N``, ``time:S``, ``day-ahead`` or ``natural``.

    ``natural`` needs ``dataset`` and a dataset that has a natural delay.
    Anything else raises :class:`~streameval.pipeline.spec.SpecError` (a ``ValueError``)
    that lists the allowed forms.

    >>> parse_delay(0), parse_delay("time:90.5")
    (InstanceDelay(n=0), TimeDelay(seconds=90.5))
    """
    text = str(spec).strip()
    if text == "day-ahead":
        return DayAheadDelay()
    if text == "natural":
        if dataset is None:
            raise SpecError("delay 'natural' needs a dataset")
        if dataset.natural_delay is None:
            raise SpecError(
                f"dataset {dataset.name!r} has no natural delay (a csv: or arff: file gets "
                f"one from label_time=COL); use one of {ALLOWED_FORMS}"
            )
        return dataset.natural_delay
    if text.isdigit():
        return InstanceDelay(int(text))
    if text.startswith("time:"):
        try:
            seconds = float(text[len("time:") :])
        except ValueError:
            seconds = float("nan")
        if not (math.isfinite(seconds) and seconds >= 0):
            raise SpecError(f"bad delay {text!r}: S in time:S must be a number of seconds >= 0")
        return TimeDelay(seconds)
    raise SpecError(f"bad delay {text!r}: allowed forms are {ALLOWED_FORMS}")


@dataclass(frozen=True)
class CallableDelay(EventTimeDelay):
    """The label at ``ts + delay(x, y, ts)``, ``delay`` any function of the instance.

    The delay is in the stream's own time unit: seconds of event time for a stream
    of ``(x, y, ts)``, instances for a stream of ``(x, y)`` (whose event time is the
    position), where a constant ``N`` then delivers the labels in the order of
    ``InstanceDelay(N)`` (the last ``N`` at their own due times, not at the last one).
    A function of two arguments gets ``(x, y)``, as River's ``simulate_qa`` does. A
    negative or NaN delay is an error naming the instance.

    >>> from streameval.pipeline.streams.base import Instance
    >>> CallableDelay(lambda x, y, ts: x["wait"]).due(Instance("0", 10.0, {"wait": 5}, "a"))
    15.0
    >>> CallableDelay(lambda x, y: 2).due(Instance("3", 3.0, {}, "a"))
    5.0
    """

    function: Callable[..., float]

    def due(self, instance: Instance) -> float:
        if _arity(self.function) == 2:
            wait = self.function(instance.x, instance.y)
        else:
            wait = self.function(instance.x, instance.y, instance.ts)
        try:
            number = float(wait)
        except (TypeError, ValueError):
            number = math.nan
        if not number >= 0:
            raise ValueError(
                f"the delay function gave {wait!r:.40} for instance {instance.id} "
                "(a number >= 0 is needed)"
            )
        return instance.ts + number

    def __str__(self) -> str:
        return f"callable:{getattr(self.function, '__name__', type(self.function).__name__)}"


def _arity(function: Callable[..., Any]) -> int:
    """How many positional arguments ``function`` takes (3 when it cannot be told)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 3
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
