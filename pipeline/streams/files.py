"""Datasets from the user's own files: ``csv:PATH[...]`` and ``arff:PATH[...]``.

A file spec is the format, a colon, the path (gzip or plain, see
:mod:`streameval.pipeline.streams.tables`) and optional options in brackets; list values
are separated by ``|``. The path may hold any character but ``[``, ``]`` (the last
bracket pair is the options)::

    csv:data/orders.csv.gz[target=chargeback,time=ts,time_unit=ms,id=order_id]
    arff:elecNormNew.arff
    csv:stream.csv[exclude=note|comment,nominal=zip,positive=yes,n=10000,shuffle=full]

Options:

``target``
    the class (or regression target) column; default the last column that plays no
    other part (not excluded, not the time, id or label time; ARFF: the attribute named
    ``class`` if there is one). A classification target with more than
    ``MAX_CLASSES`` distinct values is refused (name the right column or
    ``task=regression``).
``time`` / ``time_unit``
    the event-time column, numbers (``time_unit=s``, the default, or ``ms``) or ISO-8601
    text (a time without zone is UTC); default: the row position (0, 1, 2, ...). Event
    time must not decrease down the file.
``id``
    a column of unique instance ids; default: the row position.
``label_time``
    the event time at which each row's label becomes known (same units as ``time``,
    never before the row's own time): the dataset's *natural* delay, so
    ``--delay natural`` replays labels exactly then.
``nominal`` / ``numeric`` / ``exclude``
    override the inferred type of columns, or drop them. A column is numeric when every
    value present parses as a number (``nan`` included: a missing value), else nominal
    (ARFF: as declared).
``task``, ``positive``, ``n``
    ``classification`` (default) or ``regression``; the positive class for AUC (default:
    the last of two classes in sorted order, e.g. ``1`` of 0/1, ``yes`` of no/yes; none
    for more classes); keep only the first ``n`` rows.

``shuffle``, ``shuffle_seed``, ``seed`` are those of every dataset spec
(:func:`streameval.pipeline.streams.datasets.load`).

The id, time, label-time and target columns are never features. A missing feature value
(an empty field, ARFF's ``?``, ``nan`` in a numeric column) is left out of the instance's
``x`` (as River does with sparse dicts); a missing target,
time or id is an error. Classes are sorted (numerically when they all are numbers) and
kept as text, as for the built-in datasets. The file is read twice: once up front to
infer types and classes and to find every malformed row (an error naming the file, the
line and the column), then while the stream is replayed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams.base import Dataset, DatasetError, FeatureValue, RecordSource
from streameval.pipeline.streams.delay import LabelTimeDelay
from streameval.pipeline.streams.tables import Row, Table, arff_table, csv_table

__all__ = ["FILE_KINDS", "is_file_spec", "load_file", "split_file_spec"]

FILE_KINDS = {"csv": csv_table, "arff": arff_table}
#: Options of a file spec, and the dataset-wide ones :func:`load` applies afterwards.
OPTIONS = ("target", "time", "time_unit", "id", "label_time", "nominal", "numeric", "exclude")
MORE_OPTIONS = ("task", "positive", "n")
SHUFFLE_OPTIONS = ("shuffle", "shuffle_seed", "seed")
MAX_CLASSES = 1000
_SEP, _MISSING = "\x1f", "\x1e"  # pack a row in memory (shuffles); never in a text file


def is_file_spec(spec: str) -> bool:
    """``csv:...`` or ``arff:...``.

    >>> is_file_spec("csv:a.csv"), is_file_spec("electricity")
    (True, False)
    """
    kind, sep, _ = spec.strip().partition(":")
    return bool(sep) and kind in FILE_KINDS


def split_file_spec(spec: str) -> tuple[str, Path, dict[str, str]]:
    """``(format, path, options)`` of a file spec; options stay text.

    >>> split_file_spec("csv:d/x.csv[target=y,nominal=a|b]")
    ('csv', PosixPath('d/x.csv'), {'target': 'y', 'nominal': 'a|b'})
    """
    kind, _, rest = spec.strip().partition(":")
    options: dict[str, str] = {}
    if rest.endswith("]") and "[" in rest:
        cut = rest.rindex("[")
        rest, inner = rest[:cut], rest[cut + 1 : -1]
        for item in filter(None, (p.strip() for p in inner.split(","))):
            key, eq, value = item.partition("=")
            allowed = (*OPTIONS, *MORE_OPTIONS, *SHUFFLE_OPTIONS)
            if not eq or key.strip() not in allowed:
                raise SpecError(
                    f"{kind}: bad option {item!r}: expected key=value with key one of "
                    f"{', '.join(allowed)}"
                )
            if key.strip() in options:
                raise SpecError(f"{kind}: option {key.strip()!r} is given twice")
            options[key.strip()] = value.strip()
    if not rest or "[" in rest or "]" in rest:
        raise SpecError(
            f"cannot parse {spec!r}: expected {kind}:PATH or {kind}:PATH[key=value,...]"
        )
    return kind, Path(rest), options


@dataclass
class Layout:
    """Which column plays which part, and how each feature is typed."""

    table: Table
    target: int
    time: int | None
    unit: float
    ident: int | None
    label_time: int | None
    features: list[tuple[str, int, str]]  # (name, column, numeric | nominal | infer)
    regression: bool


def _column(table: Table, name: str, option: str) -> int:
    try:
        return table.columns.index(name)
    except ValueError:
        raise SpecError(
            f"{table.path}: {option}={name!r} is not a column (columns: {', '.join(table.columns)})"
        ) from None


def _names(table: Table, options: dict[str, str], key: str) -> set[str]:
    names = {n for n in options.get(key, "").split("|") if n}
    for name in names:
        _column(table, name, key)
    return names


def _layout(table: Table, options: dict[str, str]) -> Layout:
    cols = table.columns
    roles = {"time": None, "id": None, "label_time": None}
    for role in roles:
        if role in options:
            roles[role] = _column(table, options[role], role)
    if roles["label_time"] is not None and roles["time"] is None:
        raise SpecError(
            f"{table.path}: label_time={options['label_time']} needs time=COL (label times "
            "are event times; without time= a row's event time is its position)"
        )
    excluded = _names(table, options, "exclude")
    target = _column(
        table, options.get("target") or _default_target(table, roles, excluded), "target"
    )
    if cols[target] in excluded:
        raise SpecError(f"{table.path}: column {cols[target]!r} is the target and excluded")
    unit = {"s": 1.0, "ms": 0.001}.get(options.get("time_unit", "s"))
    if unit is None:
        raise SpecError(f"{table.path}: time_unit must be s or ms, got {options['time_unit']!r}")
    task = options.get("task", "classification")
    if task not in ("classification", "regression"):
        raise SpecError(f"{table.path}: task must be classification or regression, got {task!r}")
    nominal, numeric = _names(table, options, "nominal"), _names(table, options, "numeric")
    both = nominal & numeric
    if both:
        raise SpecError(f"{table.path}: column {sorted(both)[0]!r} is both nominal and numeric")
    skip = excluded | {cols[target]}
    skip |= {cols[i] for i in roles.values() if i is not None}
    features = []
    for i, name in enumerate(cols):
        if name in skip:
            continue
        if name in nominal or name in numeric:
            features.append((name, i, "numeric" if name in numeric else "nominal"))
        else:
            features.append((name, i, table.declared[i] or "infer"))  # CSV: the scan decides
    if not features:
        raise SpecError(f"{table.path}: no feature columns left")
    return Layout(
        table=table,
        target=target,
        time=roles["time"],
        unit=unit,
        ident=roles["id"],
        label_time=roles["label_time"],
        features=features,
        regression=task == "regression",
    )


def _default_target(table: Table, roles: dict[str, int | None], excluded: set[str]) -> str:
    """ARFF's ``class`` attribute if it has one, else the last column playing no other part."""
    if table.declared[0] is not None and "class" in table.columns:
        return "class"
    taken = {table.columns[i] for i in roles.values() if i is not None} | excluded
    free = [name for name in table.columns if name not in taken]
    if not free:
        raise SpecError(f"{table.path}: no column left for the target")
    return free[-1]


def _number(text: str, path: Path, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DatasetError(f"{path}:{line}: column {column!r}: {text!r} is not a number") from None
    if math.isnan(value):
        raise DatasetError(f"{path}:{line}: column {column!r}: NaN (leave the field empty)")
    return value


def _moment(text: str, unit: float, path: Path, line: int, column: str) -> float:
    """Seconds of event time: a number in ``unit`` or an ISO-8601 time (UTC if no zone)."""
    try:
        return float(text) * unit
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise DatasetError(
            f"{path}:{line}: column {column!r}: {text!r} is neither a number nor an ISO-8601 time"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


class FileSource(RecordSource[Row]):
    """The rows of a user file, typed by its :class:`Layout`."""

    def __init__(self, layout: Layout, limit: int | None) -> None:
        self.layout = layout
        self.limit = limit

    def rows(self) -> Iterator[tuple[int, Row]]:
        for i, (line, row) in enumerate(self.layout.table.rows()):
            if self.limit is not None and i >= self.limit:
                return
            yield line, row

    def records(self) -> Iterator[tuple[float, Row]]:
        lay = self.layout
        for i, (line, row) in enumerate(self.rows()):
            yield (float(i) if lay.time is None else self.moment(row, lay.time, line)), row

    def moment(self, row: Row, column: int, line: int) -> float:
        value = row[column]
        name = self.layout.table.columns[column]
        if value is None:
            raise DatasetError(f"{self.layout.table.path}:{line}: column {name!r} is empty")
        return _moment(value, self.layout.unit, self.layout.table.path, line, name)

    def decode(self, record: Row) -> tuple[dict[str, FeatureValue], Any]:
        x: dict[str, FeatureValue] = {}
        for name, i, kind in self.layout.features:
            value = record[i]
            if value is None:
                continue
            if kind != "numeric":
                x[name] = value
                continue
            number = float(value)
            if number == number:  # NaN in a numeric column: a missing value
                x[name] = number
        return x, self.label(record)

    def label(self, record: Row) -> Any:
        y = record[self.layout.target]
        return float(y) if self.layout.regression else y  # type: ignore[arg-type]

    def ident(self, record: Row, position: int) -> str:
        column = self.layout.ident
        return str(position) if column is None else str(record[column])

    def pack(self, record: Row) -> str:
        return _SEP.join(_MISSING if v is None else v for v in record)

    def unpack(self, packed: str) -> Row:
        return [None if v == _MISSING else v for v in packed.split(_SEP)]


@dataclass
class Scan:
    """What the first pass over the file found."""

    rows: int
    classes: list[str]
    label_times: dict[str, float]


def _scan(source: FileSource) -> Scan:
    """Read every row once: infer CSV types, collect classes, check every value."""
    lay, path = source.layout, source.layout.table.path
    cols = lay.table.columns
    undecided = {i for _, i, kind in lay.features if kind == "infer"}
    forced = {i for _, i, kind in lay.features if kind == "numeric"}
    seen: set[str] = set()
    ids: set[str] = set()
    label_times: dict[str, float] = {}
    last = -math.inf
    n = 0
    for n, (line, row) in enumerate(source.rows(), start=1):
        y = row[lay.target]
        if y is None:
            raise DatasetError(f"{path}:{line}: column {cols[lay.target]!r} (target) is empty")
        if lay.regression:
            _number(y, path, line, cols[lay.target])
        seen.add(y)
        if not lay.regression and len(seen) > MAX_CLASSES:
            raise DatasetError(
                f"{path}:{line}: the target column {cols[lay.target]!r} has more than "
                f"{MAX_CLASSES} distinct values: name the class column with target=COL, or "
                "set task=regression"
            )
        ts = float(n - 1) if lay.time is None else source.moment(row, lay.time, line)
        if ts < last:
            raise DatasetError(
                f"{path}:{line}: column {cols[lay.time or 0]!r}: event time {ts} is before "
                f"the previous row's {last}; sort the file by time"
            )
        last = ts
        ident = source.ident(row, n - 1)
        if lay.ident is not None:
            if row[lay.ident] is None or ident in ids:
                what = "is empty" if row[lay.ident] is None else f"repeats id {ident!r}"
                raise DatasetError(f"{path}:{line}: column {cols[lay.ident]!r} {what}")
            ids.add(ident)
        if lay.label_time is not None:
            due = source.moment(row, lay.label_time, line)
            if due < ts:
                raise DatasetError(
                    f"{path}:{line}: column {cols[lay.label_time]!r}: the label time {due} is "
                    f"before the row's own time {ts}"
                )
            label_times[ident] = due
        for i in list(undecided):
            value = row[i]
            if value is not None and not _parses(value):
                undecided.discard(i)
        for i in forced:
            value = row[i]
            if value is not None and not _parses(value):
                raise DatasetError(f"{path}:{line}: column {cols[i]!r}: {value!r} is not a number")
    if n == 0:
        raise DatasetError(f"{path}: no data rows")
    numeric = undecided | forced
    lay.features = [(n_, i, "numeric" if i in numeric else "nominal") for n_, i, _ in lay.features]
    declared = lay.table.values.get(cols[lay.target], [])
    return Scan(n, [] if lay.regression else _sorted_classes(seen | set(declared)), label_times)


def _parses(text: str) -> bool:
    """Whether ``text`` is a value of a numeric column: a number, or NaN (a missing one)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_number(text: str) -> bool:
    try:
        return not math.isnan(float(text))
    except ValueError:
        return False


def _sorted_classes(classes: set[str]) -> list[str]:
    """Numerically when every class is a number, else as text.

    >>> _sorted_classes({"10", "9", "1"}), _sorted_classes({"UP", "DOWN"})
    (['1', '9', '10'], ['DOWN', 'UP'])
    """
    if all(_is_number(c) for c in classes):
        return sorted(classes, key=float)
    return sorted(classes)


def load_file(spec: str) -> tuple[Dataset, dict[str, str]]:
    """The :class:`Dataset` of a file spec, and its shuffle options (for :func:`load`)."""
    kind, path, options = split_file_spec(spec)
    if not path.is_file():
        raise DatasetError(f"{kind} file {path} not found")
    table = FILE_KINDS[kind](path)
    layout = _layout(table, options)
    limit = None
    if "n" in options:
        if not options["n"].isdigit():
            raise SpecError(f"{path}: n must be an integer >= 0, got {options['n']!r}")
        limit = int(options["n"])
    source = FileSource(layout, limit)
    scan = _scan(source)
    positive = options.get("positive")
    if positive is None and len(scan.classes) == 2:
        positive = scan.classes[1]
    if positive is not None and positive not in scan.classes:
        raise SpecError(f"{path}: positive={positive!r} is not a class ({', '.join(scan.classes)})")
    dataset = Dataset(
        name=path.name,
        task="regression" if layout.regression else "classification",
        classes=scan.classes,
        positive=None if layout.regression else positive,
        features=[name for name, _, _ in layout.features],
        categorical=[name for name, _, kind in layout.features if kind == "nominal"],
        n_instances=scan.rows,
        natural_delay=LabelTimeDelay(scan.label_times) if layout.label_time is not None else None,
        source=source,
        spec=spec.strip(),
        description=f"{kind} file {path}",
    )
    return dataset, {k: v for k, v in options.items() if k in SHUFFLE_OPTIONS}
