"""Rows of the user's own files: CSV (with :mod:`csv`) and ARFF (with ``liac-arff``).

A :class:`Table` gives the column names, the types the file declares (ARFF) and its rows
as ``(line number, values)``, every value a string or ``None`` when missing (an empty
CSV field, ARFF's ``?``), so one typing and decoding step
(:mod:`streameval.pipeline.streams.files`) serves both formats. Files are gzip when
they start with gzip's magic bytes, whatever their name. A row that cannot be read is a
:class:`DatasetError` naming the file and the line.

ARFF (the format of MOA and Weka, in which the papers' streams are published) is read
by the maintained parser ``liac-arff``, row by row: ``NUMERIC``/``REAL``/``INTEGER``
attributes are numeric, nominal (``{a,b}``) and ``STRING`` attributes nominal; sparse
rows (``{0 1.5, 3 x}``) are read as ARFF defines them (absent values are 0). ``DATE``
attributes are not supported by that parser: declare such a column ``STRING`` or
``NUMERIC``.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> _ = path.write_text("a,b,class\\n1,,x\\n")
>>> table = csv_table(path)
>>> table.columns, list(table.rows())
(['a', 'b', 'class'], [(2, ['1', None, 'x'])])
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from streameval.pipeline.streams.base import DatasetError

__all__ = ["Table", "arff_table", "csv_table", "open_text"]

Row = list[str | None]
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Table:
    """A file's columns, declared kinds (``"numeric"``, ``"nominal"`` or ``None`` when the
    format declares none), declared nominal values, and a way to read its rows again."""

    path: Path
    columns: list[str]
    declared: list[str | None]
    values: dict[str, list[str]]
    read: Callable[[], Iterator[tuple[int, Row]]]

    def rows(self) -> Iterator[tuple[int, Row]]:
        """``(line number, values)`` of every data row, from the first."""
        return self.read()


def open_text(path: Path) -> IO[str]:
    """``path`` as text, gunzipped when it starts with gzip's magic bytes."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == _GZIP_MAGIC
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from exc
    raw: IO[bytes] = gzip.open(path, "rb") if gz else open(path, "rb")  # noqa: SIM115
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")  # a leading BOM dropped


def csv_table(path: Path) -> Table:
    """A CSV file with one header row (the column names)."""
    with open_text(path) as text:
        try:
            header = next(csv.reader(text), None)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DatasetError(f"{path}:1: {exc}") from exc
    if not header:
        raise DatasetError(f"{path}: empty file, expected a header row of column names")
    columns = [c.strip() for c in header]
    dupes = sorted({c for c in columns if columns.count(c) > 1})
    if dupes:
        raise DatasetError(f"{path}:1: column {dupes[0]!r} appears twice in the header")

    def read() -> Iterator[tuple[int, Row]]:
        with open_text(path) as text:
            reader = csv.reader(text)
            try:
                next(reader, None)
                for row in reader:
                    if not row:
                        continue  # blank line
                    if len(row) != len(columns):
                        raise DatasetError(
                            f"{path}:{reader.line_num}: {len(row)} fields, the header has "
                            f"{len(columns)}"
                        )
                    yield reader.line_num, [v if v != "" else None for v in row]
            except (csv.Error, UnicodeDecodeError) as exc:
                raise DatasetError(f"{path}:{reader.line_num}: {exc}") from exc

    return Table(path, columns, [None] * len(columns), {}, read)


class _Lines:
    """The lines of a text file, counting them (the ARFF parser's own count is lost when
    it reads row by row)."""

    def __init__(self, text: IO[str]) -> None:
        self.text = text
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        for line in self.text:
            self.number += 1
            yield line.rstrip("\r\n")


def _arff_error(path: Path, lines: _Lines, exc: Exception) -> DatasetError:
    message = str(exc).replace(" in line -1", "").replace(", at line -1", "")
    return DatasetError(f"{path}:{lines.number}: {message}")


def arff_table(path: Path) -> Table:
    """An ARFF file (dense or sparse rows), parsed by ``liac-arff``."""
    import arff

    def decode(lines: _Lines) -> dict[str, object]:
        try:
            return arff.ArffDecoder().decode(lines, return_type=arff.DENSE_GEN)
        except arff.ArffException as exc:
            raise _arff_error(path, lines, exc) from exc

    with open_text(path) as text:
        header = decode(_Lines(text))
    attributes = header["attributes"]
    if not attributes:
        raise DatasetError(f"{path}: no @ATTRIBUTE declarations")
    columns = [name for name, _ in attributes]
    declared: list[str | None] = []
    values: dict[str, list[str]] = {}
    for name, kind in attributes:
        if isinstance(kind, list):
            declared.append("nominal")
            values[name] = [str(v) for v in kind]
        else:
            declared.append("nominal" if kind == "STRING" else "numeric")

    def read() -> Iterator[tuple[int, Row]]:
        with open_text(path) as text:
            lines = _Lines(text)
            rows = decode(lines)["data"]
            try:
                for row in rows:  # type: ignore[attr-defined]
                    yield lines.number, [None if v is None else _text(v) for v in row]
            except arff.ArffException as exc:
                raise _arff_error(path, lines, exc) from exc
            except (ValueError, UnicodeDecodeError) as exc:
                raise DatasetError(f"{path}:{lines.number}: {exc}") from exc

    return Table(path, columns, declared, values, read)


def _text(value: object) -> str:
    """A parsed ARFF value as the text it came from (``repr`` of a float round-trips)."""
    if isinstance(value, float):
        return repr(value)
    return str(value)
