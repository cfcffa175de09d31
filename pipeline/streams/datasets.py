"""The real benchmark streams, and :func:`load` for every dataset spec.

Three files are read from the directory in the environment variable
``STREAMEVAL_DATA_DIR`` (the ``data_dir`` argument overrides it). Each file is
verified against its SHA-256 (once per process per file version, see
:mod:`streameval.pipeline.streams.checksum`); a missing directory or file, or a digest
mismatch, raises :class:`DatasetError` naming the path looked at, the file and
digest expected and where the data comes from. There is no fallback to other
data. Provenance and statistics of the files: ``datasets/README.md`` of the
shared data directory.

``electricity`` -- ``electricity.csv.gz`` (Elec2, NSW electricity market, MOA
    ``elecNormNew``), 45,312 half-hour periods. ``ts = i * 1800``: every day
    has exactly 48 rows (``period == (i mod 48) / 47`` on every row, checked),
    so the row index is the half-hour count. ``day`` (weekday 1..7, left
    un-normalised by the MOA normalisation, i.e. nominal) is categorical, the
    other seven columns numeric. Classes ``["DOWN", "UP"]``, positive ``UP``.
    Natural delay: one day (``time:86400``).
``covtype`` -- ``covtype.csv.gz`` (UCI Forest Covertype, original row order),
    581,012 rows, 54 numeric columns (the 44 binary indicator columns kept as
    0.0/1.0). No time in the data: ``ts = i``, one unit per instance.
    Classes ``["1", ..., "7"]``, no positive class. Natural delay: 1000
    instances.
``airlines`` -- ``airlines_no_airports.csv.gz``, the MOA airlines stream
    (539,383 flights) without its AirportFrom/AirportTo columns. ``Airline``
    (carrier code) and ``DayOfWeek`` (weekday code 1..7) are categorical;
    ``Flight`` (flight number, kept numeric as in MOA), ``Time`` (scheduled
    departure, minutes after midnight, 10..1439) and ``Length`` (scheduled
    flight time, minutes, 0..655) numeric. Classes ``["0", "1"]``
    (``1`` = delayed), positive ``1``.

    Event time: the rows cover 31 consecutive days, and a new day starts
    whenever ``DayOfWeek`` differs from the previous row's; with ``day`` the
    0-based day count, ``ts = day * 86400 + Time * 60``. Within a day the
    rows are sorted by ``Time`` except for 2,331 rows that come after a
    flight scheduled up to 20 minutes later; the rows keep their order and
    their ``ts`` is clamped to the running maximum, so event time never
    decreases. Natural delay: the scheduled landing, ``ts + Length * 60``.

Dataset specs (:func:`load`) use the grammar of :mod:`streameval.pipeline.spec`:

* a real dataset, with optional ``n`` (keep the first ``n`` rows);
* a synthetic generator of :mod:`streameval.pipeline.streams.synthetic` with its
  parameters;
* either one with ``shuffle=full`` or ``shuffle=within-class``
  (:mod:`streameval.pipeline.streams.shuffle`); the shuffle's seed is ``shuffle_seed``
  if given, else ``seed`` if given, else 0 (on real datasets ``seed`` means
  nothing else, on generators it also seeds the generator). Truncation by
  ``n`` comes first, then the shuffle. Shuffles remove the drift points.

``electricity[shuffle=within-class,seed=1]``, ``covtype[n=50000]``,
``markov[p_stay=0.9,n=5000,shuffle=full,shuffle_seed=7]``.

>>> ds = load("sea[n=3,seed=1,shuffle=full]")
>>> ds.name, ds.spec, [i.id for i in ds.iter_instances()]
('sea', 'sea[n=3,seed=1,shuffle=full]', ['0', '1', '2'])
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from streameval.pipeline.spec import Component, SpecError, parse_component, take_params
from streameval.pipeline.streams.base import (
    Dataset,
    DatasetError,
    FeatureValue,
    Instance,
    RecordSource,
)
from streameval.pipeline.streams.checksum import sha256_of
from streameval.pipeline.streams.delay import DelayModel, FeatureTimeDelay, InstanceDelay, TimeDelay
from streameval.pipeline.streams.shuffle import SHUFFLE_KINDS, ShuffledSource
from streameval.pipeline.streams.synthetic import GENERATORS, make_synthetic

__all__ = ["REAL_DATASETS", "Dataset", "DatasetError", "Instance", "load", "load_real"]

ENV_VAR = "STREAMEVAL_DATA_DIR"
_SEP = "\x1f"  # joins a CSV row in memory (shuffles); never occurs in the files

Clock = Callable[[int, list[str]], float]


@dataclass(frozen=True)
class RealDataset:
    """How to find, verify and read one real stream."""

    name: str
    file: str
    sha256: str
    origin: str
    columns: list[str]
    categorical: list[str]
    classes: list[str]
    positive: str | None
    n_instances: int
    natural_delay: DelayModel
    make_clock: Callable[[list[str]], Clock]


def _half_hours(header: list[str]) -> Clock:
    return lambda i, row: i * 1800.0


def _index(header: list[str]) -> Clock:
    return lambda i, row: float(i)


def _airline_days(header: list[str]) -> Clock:
    """``day * 86400 + Time * 60``, a new day at each change of ``DayOfWeek``, clamped."""
    i_dow, i_time = header.index("DayOfWeek"), header.index("Time")
    state = {"day": -1, "dow": None, "last": float("-inf")}

    def clock(i: int, row: list[str]) -> float:
        dow = row[i_dow]
        if dow != state["dow"]:
            state["day"] += 1
            state["dow"] = dow
        ts = state["day"] * 86400.0 + float(row[i_time]) * 60.0
        if ts < state["last"]:
            ts = state["last"]
        state["last"] = ts
        return ts

    return clock


_COVTYPE_COLUMNS = [
    "Elevation",
    "Aspect",
    "Slope",
    "Horizontal_Distance_To_Hydrology",
    "Vertical_Distance_To_Hydrology",
    "Horizontal_Distance_To_Roadways",
    "Hillshade_9am",
    "Hillshade_Noon",
    "Hillshade_3pm",
    "Horizontal_Distance_To_Fire_Points",
    *[f"Wilderness_Area{j}" for j in range(1, 5)],
    *[f"Soil_Type{j}" for j in range(1, 41)],
]

REAL_DATASETS: dict[str, RealDataset] = {
    d.name: d
    for d in (
        RealDataset(
            name="electricity",
            file="electricity.csv.gz",
            sha256="cb92a02cfec5842449b2993ac76ad085d4495fd6f09ba12c5c201c2b73e53ef9",
            origin=(
                "Elec2 (NSW electricity market), MOA elecNormNew.arff from GitHub "
                "cassales/relatorio-fapesp, converted to CSV unchanged"
            ),
            columns=[
                "date",
                "day",
                "period",
                "nswprice",
                "nswdemand",
                "vicprice",
                "vicdemand",
                "transfer",
            ],
            categorical=["day"],
            classes=["DOWN", "UP"],
            positive="UP",
            n_instances=45_312,
            natural_delay=TimeDelay(86_400.0),
            make_clock=_half_hours,
        ),
        RealDataset(
            name="covtype",
            file="covtype.csv.gz",
            sha256="84fc08a2957cdbf8fa51b59a268a357af504b3f43c3d5abe2732f1b97c63cdb8",
            origin=(
                "UCI Forest Covertype (covtype.data order), covtype.csv of the "
                "scikit-multiflow sdist (PyPI), gzipped"
            ),
            columns=_COVTYPE_COLUMNS,
            categorical=[],
            classes=[str(c) for c in range(1, 8)],
            positive=None,
            n_instances=581_012,
            natural_delay=InstanceDelay(1000),
            make_clock=_index,
        ),
        RealDataset(
            name="airlines",
            file="airlines_no_airports.csv.gz",
            sha256="27bf9fa69a033b8376b61f80a473282803cf99424fe8fcee5cad323df5445ade",
            origin=(
                "MOA airlines stream without AirportFrom/AirportTo, "
                "data/airlines_without_AirportToFrom.arff.zip of GitHub "
                "hmgomes/FeatureScoringEvolvingDataStreams, converted to CSV unchanged"
            ),
            columns=["Airline", "Flight", "DayOfWeek", "Time", "Length"],
            categorical=["Airline", "DayOfWeek"],
            classes=["0", "1"],
            positive="1",
            n_instances=539_383,
            natural_delay=FeatureTimeDelay("Length", 60.0),
            make_clock=_airline_days,
        ),
    )
}


class CsvSource(RecordSource[list[str]]):
    """Rows of a verified gzip CSV file (class in the last column), read with :mod:`csv`."""

    def __init__(self, info: RealDataset, path: Path, limit: int | None = None) -> None:
        self.info = info
        self.path = path
        self.limit = limit
        self._names = info.columns
        cat = set(info.categorical)
        self._casts: list[Callable[[str], FeatureValue]] = [
            str if c in cat else float for c in info.columns
        ]

    def records(self) -> Iterator[tuple[float, list[str]]]:
        _verify(self.info, self.path)
        with gzip.open(self.path, "rb") as raw, io.TextIOWrapper(raw, newline="") as text:
            reader = csv.reader(text)
            header = next(reader, None)
            expected = [*self.info.columns, "class"]
            if header != expected:
                raise DatasetError(f"{self.path}: header {header} is not the expected {expected}")
            clock = self.info.make_clock(header)
            rows = reader if self.limit is None else islice(reader, self.limit)
            for i, row in enumerate(rows):
                yield clock(i, row), row

    def decode(self, record: list[str]) -> tuple[dict[str, FeatureValue], str]:
        if not self.info.categorical:
            # zip stops at the last feature name: the class column is never converted
            return dict(zip(self._names, map(float, record), strict=False)), record[-1]
        x = {name: cast(v) for name, cast, v in zip(self._names, self._casts, record, strict=False)}
        return x, record[-1]

    def label(self, record: list[str]) -> str:
        return record[-1]

    def pack(self, record: list[str]) -> str:
        return _SEP.join(record)

    def unpack(self, packed: str) -> list[str]:
        return packed.split(_SEP)


def _data_dir(data_dir: str | os.PathLike[str] | None) -> tuple[Path | None, str]:
    """The directory to read and how it was chosen (for error messages)."""
    if data_dir is not None:
        return Path(data_dir), f"the data_dir argument {str(data_dir)!r}"
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env), f"{ENV_VAR}={env!r}"
    return None, f"{ENV_VAR} is not set"


def _help(info: RealDataset) -> str:
    return (
        f"Set {ENV_VAR} (or pass data_dir) to the directory holding {info.file} "
        f"(sha256 {info.sha256}); origin: {info.origin} (see the README.md of the "
        "shared datasets directory)."
    )


def _locate(info: RealDataset, data_dir: str | os.PathLike[str] | None) -> Path:
    directory, how = _data_dir(data_dir)
    if directory is None:
        raise DatasetError(f"dataset {info.name!r}: no data directory ({how}). {_help(info)}")
    path = directory / info.file
    if not directory.is_dir():
        raise DatasetError(
            f"dataset {info.name!r}: data directory {directory} ({how}) does not exist; "
            f"looked for {path}. {_help(info)}"
        )
    if not path.is_file():
        raise DatasetError(f"dataset {info.name!r}: file {path} not found ({how}). {_help(info)}")
    _verify(info, path)
    return path


def _verify(info: RealDataset, path: Path) -> None:
    try:
        digest = sha256_of(path)
    except OSError as exc:
        raise DatasetError(
            f"dataset {info.name!r}: cannot read {path}: {exc}. {_help(info)}"
        ) from exc
    if digest != info.sha256:
        raise DatasetError(
            f"dataset {info.name!r}: {path} has sha256 {digest}, expected {info.sha256}: "
            f"not the expected file. {_help(info)}"
        )


def load_real(
    name: str, data_dir: str | os.PathLike[str] | None = None, n: int | None = None
) -> Dataset:
    """One of the real datasets, verified; the first ``n`` rows if ``n`` is given."""
    info = REAL_DATASETS.get(name)
    if info is None:
        raise SpecError(f"unknown dataset {name!r} (real: {', '.join(REAL_DATASETS)})")
    path = _locate(info, data_dir)
    count = info.n_instances if n is None else min(n, info.n_instances)
    return Dataset(
        name=info.name,
        task="classification",
        classes=list(info.classes),
        positive=info.positive,
        features=list(info.columns),
        categorical=list(info.categorical),
        n_instances=count,
        natural_delay=info.natural_delay,
        source=CsvSource(info, path, n),
        spec=info.name,
        description=info.origin,
    )


def load(spec: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Resolve a dataset spec (see the module docstring) into a :class:`Dataset`.

    >>> load("markov[n=4]").n_instances
    4
    >>> load("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streameval.pipeline.spec.SpecError: unknown dataset 'nope' ...
    """
    comp = parse_component(spec)
    params = dict(comp.params)
    shuffling = {k: params.pop(k) for k in ("shuffle", "shuffle_seed") if k in params}
    shuffle_params = take_params(
        Component(comp.name, shuffling), {"shuffle": str, "shuffle_seed": int}
    )
    kind = shuffle_params.get("shuffle", "none")
    if kind not in (*SHUFFLE_KINDS, "none"):
        raise SpecError(f"unknown shuffle {kind!r} (allowed: {', '.join(SHUFFLE_KINDS)}, none)")
    if comp.name in REAL_DATASETS:
        p = take_params(Component(comp.name, params), {"n": int, "seed": int})
        if p.get("n", 0) < 0:
            raise SpecError(f"{comp.name}: n must be >= 0")
        dataset = load_real(comp.name, data_dir, p.get("n"))
        seed = p.get("seed", 0)
    elif comp.name in GENERATORS:
        dataset = make_synthetic(Component(comp.name, params))
        seed = params.get("seed", 0)
    else:
        known = ", ".join([*REAL_DATASETS, *sorted(GENERATORS)])
        raise SpecError(f"unknown dataset {comp.name!r} (known: {known})")
    dataset.spec = str(comp)
    if kind == "none":
        return dataset
    if dataset.task != "classification" and kind == "within-class":
        raise SpecError(f"{comp.name}: shuffle=within-class needs a classification stream")
    dataset.source = ShuffledSource(dataset.source, kind, shuffle_params.get("shuffle_seed", seed))
    dataset.drift_points = []
    return dataset
