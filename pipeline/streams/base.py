"""What a stream is: instances, and the :class:`Dataset` that yields them.

An :class:`Instance` is one row of a stream: an ``id`` (its position in the
stream, as a string), an event time ``ts`` in seconds, features ``x`` and a
target ``y`` (a class label as a string, or a float for regression).

A :class:`Dataset` describes a stream (task, classes, features, natural label
delay, known drift points) and reads it on demand with
:meth:`Dataset.iter_instances`; every call starts again from the first
instance, and nothing is held in memory beyond the current row.

Behind a dataset is a :class:`RecordSource`: the rows in their storage form
(a CSV row, a generated ``(x, y)`` pair) with the event time of each, plus how
to turn a row into features and a target. Keeping the storage form apart lets
a shuffle (:mod:`streameval.pipeline.streams.shuffle`) hold a whole stream in a compact
form and decode rows only when they are replayed.

>>> ds = Dataset.from_instances(
...     "toy", [Instance("0", 0.0, {"a": 1.0}, "yes"), Instance("1", 1.0, {"a": 0.0}, "no")]
... )
>>> ds.classes, ds.n_instances
(['no', 'yes'], 2)
>>> [i.y for i in ds.iter_instances()]
['yes', 'no']
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:
    from streameval.pipeline.streams.delay import DelayModel

Task = Literal["classification", "regression"]
FeatureValue = float | str
Target = str | float
R = TypeVar("R")


class DatasetError(RuntimeError):
    """A dataset file is missing, unreadable or not the expected file."""


class Instance(NamedTuple):
    """One row of a stream: position ``id``, event time ``ts`` (seconds), ``x``, ``y``."""

    id: str
    ts: float
    x: dict[str, FeatureValue]
    y: Target


class RecordSource(ABC, Generic[R]):
    """The rows of a stream in storage form, each with its event time.

    Subclasses implement :meth:`records` and :meth:`decode`. :meth:`label`
    may be overridden when the label can be read without decoding the
    features; :meth:`pack` and :meth:`unpack` when a row has a smaller form to
    keep in memory (used by shuffles, which must hold the whole stream).
    """

    @abstractmethod
    def records(self) -> Iterator[tuple[float, R]]:
        """``(ts, row)`` pairs in stream order; ``ts`` never decreases."""

    @abstractmethod
    def decode(self, record: R) -> tuple[dict[str, FeatureValue], Target]:
        """Features and target of one row."""

    def label(self, record: R) -> Target:
        """The target of one row (by default through :meth:`decode`)."""
        return self.decode(record)[1]

    def ident(self, record: R, position: int) -> str:
        """The instance id of a row: by default its position in the stream."""
        return str(position)

    def pack(self, record: R) -> Any:
        """A compact form of ``record`` to keep in memory."""
        return record

    def unpack(self, packed: Any) -> R:
        """The row back from :meth:`pack`'s form."""
        return packed


class InstanceSource(RecordSource[tuple[dict[str, FeatureValue], Target]]):
    """A source over already built instances (their ``ts`` kept, ids renumbered)."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances

    def records(self) -> Iterator[tuple[float, tuple[dict[str, FeatureValue], Target]]]:
        for inst in self.instances:
            yield inst.ts, (inst.x, inst.y)

    def decode(
        self, record: tuple[dict[str, FeatureValue], Target]
    ) -> tuple[dict[str, FeatureValue], Target]:
        return record

    def label(self, record: tuple[dict[str, FeatureValue], Target]) -> Target:
        return record[1]


@dataclass(eq=False)
class Dataset:
    """A stream and what is known about it.

    Attributes
    ----------
    name
        The dataset's name (``electricity``, ``markov``, ...).
    task
        ``"classification"`` or ``"regression"``.
    classes
        The class labels as strings, sorted (alphabetically for names,
        numerically for numbers); empty for regression.
    positive
        The label taken as positive class for binary metrics (AUC), ``None``
        for multi-class and regression streams.
    features
        Feature names, in column order.
    categorical
        The features whose values are strings; all others are floats.
    n_instances
        Number of instances if known.
    natural_delay
        The label delay the dataset's own setting implies (``None`` if it has
        none); see :mod:`streameval.pipeline.streams.delay`.
    source
        Where the rows come from.
    drift_points
        Positions (0-based instance index) where a known concept drift starts;
        empty for real data and stationary generators.
    spec
        The spec string the dataset was loaded from, normalised.
    description
        Origin and meaning, one or two sentences.
    complete
        Every feature value of every instance is present and finite (no ``None``,
        NaN or infinity): nothing would be dropped as missing, so an experiment
        need not look (verified data files and generators; not files of the user's).
    """

    name: str
    task: Task
    classes: list[str]
    positive: str | None
    features: list[str]
    categorical: list[str]
    n_instances: int | None
    natural_delay: DelayModel | None
    source: RecordSource[Any] = field(repr=False)
    drift_points: list[int] = field(default_factory=list)
    spec: str = ""
    description: str = ""
    complete: bool = False

    def __post_init__(self) -> None:
        if not self.spec:
            self.spec = self.name

    def iter_instances(self, limit: int | None = None) -> Iterator[Instance]:
        """Stream the instances from the first one; at most ``limit`` of them."""
        records = self.source.records()
        if limit is not None:
            records = islice(records, limit)
        decode = self.source.decode
        if type(self.source).ident is RecordSource.ident:  # positions: no call per row
            for i, (ts, record) in enumerate(records):
                x, y = decode(record)
                yield Instance(str(i), ts, x, y)
            return
        ident = self.source.ident
        for i, (ts, record) in enumerate(records):
            x, y = decode(record)
            yield Instance(ident(record, i), ts, x, y)

    def iter_labels(self, limit: int | None = None) -> Iterator[Target]:
        """Stream the targets only (cheaper than :meth:`iter_instances`)."""
        records = self.source.records()
        if limit is not None:
            records = islice(records, limit)
        label = self.source.label
        for _, record in records:
            yield label(record)

    def __iter__(self) -> Iterator[Instance]:
        return self.iter_instances()

    @classmethod
    def from_instances(
        cls,
        name: str,
        instances: Iterable[Instance],
        *,
        task: Task = "classification",
        natural_delay: DelayModel | None = None,
        categorical: Sequence[str] = (),
    ) -> Dataset:
        """A small in-memory dataset (tests, examples); classes sorted by ``str``."""
        items = list(instances)
        features = list(items[0].x) if items else []
        classes = sorted({str(i.y) for i in items}) if task == "classification" else []
        return cls(
            name=name,
            task=task,
            classes=classes,
            positive=None,
            features=features,
            categorical=list(categorical),
            n_instances=len(items),
            natural_delay=natural_delay,
            source=InstanceSource(items),
        )


def with_source(dataset: Dataset, source: RecordSource[Any], **changes: Any) -> Dataset:
    """A copy of ``dataset`` reading from ``source``, with ``changes`` applied."""
    fields: dict[str, Any] = {
        "name": dataset.name,
        "task": dataset.task,
        "classes": list(dataset.classes),
        "positive": dataset.positive,
        "features": list(dataset.features),
        "categorical": list(dataset.categorical),
        "n_instances": dataset.n_instances,
        "natural_delay": dataset.natural_delay,
        "drift_points": list(dataset.drift_points),
        "spec": dataset.spec,
        "description": dataset.description,
    }
    fields.update(changes)
    return Dataset(source=source, **fields)
