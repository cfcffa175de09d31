"""The real benchmark streams: what each is, which files hold it, how to read them.

Each dataset is accepted in one or more file forms (:class:`DataFile`: name and SHA-256),
looked for, verified and, when absent, fetched by :mod:`streameval.pipeline.streams.locate`.
Provenance and statistics of the files: ``datasets/README.md`` of the shared data
directory; every accepted form and its checksum is listed in :data:`REAL_DATASETS`.

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

Accepted files (each verified by SHA-256 before it is read):

* electricity: ``electricity.csv.gz``; a copy ships inside the package, so it works
  on a machine with no data at all;
* covtype: ``covtype.csv.gz`` (the shared file) or ``covtype.csv`` (the same rows, its
  class column named ``Cover_Type``, as taken out of the scikit-multiflow 0.4.1 sdist on
  PyPI, which is where it is downloaded from on first use);
* airlines: ``airlines_no_airports.csv.gz`` (the shared copy, without the airport
  columns) or the full MOA ``airlines.arff`` (sha256 ``c7683a90...``, 19,168,157 bytes,
  with AirportFrom/AirportTo), which is downloaded on first use from its public home,
  the Git LFS object of ``airlines.arff`` in GitHub ``cassales/relatorio-fapesp``
  (commit ``89bec28b``; the checksum and size are those of its LFS pointer). Both forms
  give the same stream: the airport columns are left out, so results do not depend on
  which form a machine has (``arff:PATH`` evaluates the full file with them).

>>> REAL_DATASETS["covtype"].file, [f.name for f in REAL_DATASETS["covtype"].files]
('covtype.csv.gz', ['covtype.csv.gz', 'covtype.csv'])
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO

from streameval.pipeline.streams.base import DatasetError, FeatureValue, RecordSource
from streameval.pipeline.streams.delay import DelayModel, FeatureTimeDelay, InstanceDelay, TimeDelay
from streameval.pipeline.streams.fetch import Download
from streameval.pipeline.streams.tables import arff_table

__all__ = ["REAL_DATASETS", "CsvSource", "DataFile", "RealDataset"]

_SEP = "\x1f"  # joins a CSV row in memory (shuffles); never occurs in the files

Clock = Callable[[int, list[str]], float]


@dataclass(frozen=True)
class DataFile:
    """One accepted form of a dataset: a file name (gzip when it ends in ``.gz``) and the
    SHA-256 of its bytes."""

    name: str
    sha256: str


@dataclass(frozen=True)
class RealDataset:
    """How to find, verify and read one real stream.

    ``file``/``sha256`` is the preferred form; ``alternatives`` are other accepted forms
    of the same rows; ``download`` (if any) produces the form named ``download_as``;
    ``packaged`` means a copy of ``file`` ships inside the package.
    """

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
    alternatives: tuple[DataFile, ...] = ()
    download: Download | None = None
    download_as: str | None = None
    packaged: bool = False

    @property
    def files(self) -> list[DataFile]:
        """Every accepted form, the preferred one first."""
        return [DataFile(self.file, self.sha256), *self.alternatives]

    def form(self, name: str) -> DataFile:
        """The accepted form with this file name."""
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(name)


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

#: covtype.csv as it is inside the scikit-multiflow 0.4.1 sdist (the rows of covtype.csv.gz)
_COVTYPE_CSV_SHA256 = "ea35ca6820fcbe0bdc6707e9ed31e11a9de84f07d88da73b511c737383c271a6"

#: the full MOA airlines.arff, with AirportFrom/AirportTo (its Git LFS pointer's oid)
_AIRLINES_ARFF_SHA256 = "c7683a90b40c2cabb1ddc950413da8efa231c058327b8c95511c40af13516c14"

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
            packaged=True,
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
            alternatives=(DataFile("covtype.csv", _COVTYPE_CSV_SHA256),),
            download=Download(
                url=(
                    "https://files.pythonhosted.org/packages/57/53/"
                    "1c90bc05e4fbf2cb768ed140d7a9bce301d671cce7bdc15b82522ede1b3e/"
                    "scikit-multiflow-0.4.1.tar.gz"
                ),
                sha256="ed4f791107cb7f789f0bb0620c50e743a4d397905146a4d06c62eb98607aa101",
                size=15_532_019,
                member="scikit-multiflow-0.4.1/src/skmultiflow/data/datasets/covtype.csv",
            ),
            download_as="covtype.csv",
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
            alternatives=(DataFile("airlines.arff", _AIRLINES_ARFF_SHA256),),
            download=Download(
                url=(
                    "https://media.githubusercontent.com/media/cassales/relatorio-fapesp/"
                    "89bec28b38d6955775fddf12fdfa99c1a90a43ec/airlines.arff"
                ),
                sha256=_AIRLINES_ARFF_SHA256,
                size=19_168_157,
            ),
            download_as="airlines.arff",
        ),
    )
}


def _open_text(path: Path) -> IO[str]:
    """The file as text: gunzipped when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), newline="")
    return open(path, newline="")


def _integral(value: str | None, path: Path, line: int) -> str:
    """An ARFF value as the CSV form writes it: ``269.0`` as ``269``.

    >>> _integral("269.0", Path("a.arff"), 9), _integral("0.5", Path("a.arff"), 9)
    ('269', '0.5')
    """
    if value is None:
        raise DatasetError(f"{path}:{line}: a missing value (?) where the stream has none")
    if value.endswith(".0") and value[:-2].lstrip("-").isdigit():
        return value[:-2]
    return value


class CsvSource(RecordSource[list[str]]):
    """Rows of a verified data file: CSV, gzip or plain (class in the last column), read
    with :mod:`csv`, or an ARFF form read by ``liac-arff`` into the same layout. The file
    was verified when it was located (:func:`streameval.pipeline.streams.locate.locate`)."""

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
        if self.path.name.endswith(".arff"):
            yield from self._arff_records()
            return
        with _open_text(self.path) as text:
            reader = csv.reader(text)
            header = next(reader, None)
            # the class column's name differs between forms (covtype: class / Cover_Type)
            expected = [*self.info.columns, "<class>"]
            if header is None or header[:-1] != self.info.columns or len(header) != len(expected):
                raise DatasetError(f"{self.path}: header {header} is not the expected {expected}")
            clock = self.info.make_clock(header)
            rows = reader if self.limit is None else islice(reader, self.limit)
            for i, row in enumerate(rows):
                yield clock(i, row), row

    def _arff_records(self) -> Iterator[tuple[float, list[str]]]:
        """An ARFF form, its rows laid out as the CSV form's (the dataset's columns, then
        the class, the last attribute), other attributes left out."""
        table = arff_table(self.path)
        missing = [c for c in self.info.columns if c not in table.columns]
        if missing:
            raise DatasetError(f"{self.path}: no attribute {missing[0]!r} ({table.columns})")
        picks = [table.columns.index(c) for c in self.info.columns] + [len(table.columns) - 1]
        clock = self.info.make_clock([*self.info.columns, "class"])
        rows = table.rows() if self.limit is None else islice(table.rows(), self.limit)
        for i, (line, values) in enumerate(rows):
            row = [_integral(values[j], self.path, line) for j in picks]
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
