"""The event model shared by the in-process driver and the Kafka pipeline.

A stream is replayed as an ordered sequence of two kinds of input events:

* :class:`FeatureEvent` -- an instance's features become known (``x``), the
  instance now waits for its label;
* :class:`LabelEvent` -- the true label (``y``) of an instance seen earlier
  arrives.

plus an :class:`EndOfStream` marker once the last label has been delivered.

Every input event carries ``seq``, its position in the replay schedule of its
stream; event time never decreases along the schedule, so the total order
``(ts, seq)`` is the order the experiment must see, whatever driver delivers
it (see ``DESIGN.md``, *Event model and topics*). The schedule decides ties in
event time: for event-time delays, features come before labels at equal time,
so a label arriving "at the same moment" as the features of instance ``i + N``
is seen after them (this makes ``time:S`` with ``S = N * step`` equal to the
``N``-instance delay on evenly spaced streams).

Labels of classification streams are strings (as in the CSV files and on the
wire); regression targets are floats.

The input events are frozen ``msgspec`` Structs: a replay and a decoder make one per event,
and a Struct is made about five times faster than a frozen dataclass (2.9 ms against 14 ms
for Electricity's 45,312 feature events); their fields, in order, are their wire form, so
the replay's encoder writes a pack of them in one call with no dict in between
(:func:`streameval.agents.codec.written_many`).

Output events are what an :class:`~streameval.pipeline.experiment.Experiment` emits:
:class:`PredictionEvent`, :class:`DriftEvent` and :class:`MetricSnapshot`; :func:`clean`
turns NaN and infinities into ``None`` (JSON ``null``) in every document it emits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import msgspec

Label = str
Target = str | float
FeatureValue = float | str
Features = dict[str, FeatureValue]


class FeatureEvent(msgspec.Struct, frozen=True, gc=False):
    """The features ``x`` of instance ``id`` of stream ``stream``, known at ``ts``.

    A second feature event with the same ``id`` while the instance is still
    pending updates its features (evolving instances, delayed-labelling paper
    sect. 7.2).
    """

    stream: str
    id: str
    ts: float
    x: Features
    seq: int = 0

    kind: ClassVar[Literal["features"]] = "features"

    @property
    def order_key(self) -> tuple[float, int]:
        return (self.ts, self.seq)

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "id": self.id, "ts": self.ts, "x": self.x, "seq": self.seq}


class LabelEvent(msgspec.Struct, frozen=True, gc=False):
    """The true label ``y`` of instance ``id``, arriving at event time ``ts``."""

    stream: str
    id: str
    ts: float
    y: Target
    seq: int = 0

    kind: ClassVar[Literal["label"]] = "label"

    @property
    def order_key(self) -> tuple[float, int]:
        return (self.ts, self.seq)

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "id": self.id, "ts": self.ts, "y": self.y, "seq": self.seq}


class EndOfStream(msgspec.Struct, frozen=True, gc=False):
    """No more events will come for ``stream``; ``n_events`` were scheduled."""

    stream: str
    ts: float
    seq: int
    n_events: int = 0

    kind: ClassVar[Literal["end"]] = "end"

    @property
    def order_key(self) -> tuple[float, int]:
        return (self.ts, self.seq)

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "ts": self.ts, "seq": self.seq, "n_events": self.n_events}


InputEvent = FeatureEvent | LabelEvent | EndOfStream

PredictionKind = Literal["first", "repredict", "final"]


@dataclass(frozen=True, slots=True)
class PredictionEvent:
    """A prediction published for a pending instance.

    ``kind`` is ``first`` (made when the features arrived, bin 0), ``repredict``
    (made every K labels while the instance waits) or ``final`` (the
    test-then-train prediction made just before the model learns the label,
    bin B+1). ``bin`` is known for ``first`` and ``final`` only; the bin of a
    re-prediction is fixed once the label arrives (it depends on the latency).
    """

    stream: str
    learner: str
    id: str
    ts: float
    kind: PredictionKind
    y_pred: Target | None
    bin: int | None = None

    def to_dict(self) -> dict[str, Any]:
        # by hand: dataclasses.asdict deep-copies every field (13 % of a worker's busy time)
        return {
            "stream": self.stream,
            "learner": self.learner,
            "id": self.id,
            "ts": self.ts,
            "kind": self.kind,
            "y_pred": self.y_pred,
            "bin": self.bin,
        }


@dataclass(frozen=True, slots=True)
class DriftEvent:
    """A drift alarm raised by ``detector`` on the error stream of ``learner``.

    ``index`` is the number of labels the learner had been scored on when the
    alarm rose (1-based), ``ts`` the event time of that label, ``statistic``
    the detector's test statistic at the alarm.
    """

    stream: str
    learner: str
    detector: str
    index: int
    ts: float
    statistic: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "learner": self.learner,
            "detector": self.detector,
            "index": self.index,
            "ts": self.ts,
            "statistic": self.statistic,
        }


def event_from_dict(d: dict[str, Any]) -> InputEvent:
    """Rebuild an input event from its wire form (see ``schemas/``).

    >>> event_from_dict({"stream": "s", "id": "1", "ts": 0.0, "x": {"a": 1.0}, "seq": 3})
    FeatureEvent(stream='s', id='1', ts=0.0, x={'a': 1.0}, seq=3)
    """
    if "x" in d:
        seq = int(d.get("seq", 0))
        return FeatureEvent(d["stream"], str(d["id"]), float(d["ts"]), dict(d["x"]), seq)
    if "y" in d:
        return LabelEvent(d["stream"], str(d["id"]), float(d["ts"]), d["y"], int(d.get("seq", 0)))
    return EndOfStream(d["stream"], float(d["ts"]), int(d.get("seq", 0)), int(d.get("n_events", 0)))


@dataclass(frozen=True, slots=True)
class MetricSnapshot:
    """Every metric of one learner after ``n_labelled`` labels (``kind`` periodic or final)."""

    stream: str
    learner: str
    n_labelled: int
    ts: float
    kind: str
    metrics: dict[str, float | None]
    binned: dict[str, list[float | None]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "learner": self.learner,
            "n_labelled": self.n_labelled,
            "ts": self.ts,
            "kind": self.kind,
            "metrics": self.metrics,
            "binned": self.binned,
        }


Output = PredictionEvent | DriftEvent | MetricSnapshot


def clean(value: Any) -> Any:
    """NaN and infinities become ``None`` (JSON ``null``), recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value
