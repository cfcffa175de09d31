"""One row of the results table, and the formatting its cells share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streameval.bench.harness import Measured

GIB = 1024**3
MIB = 1024**2


@dataclass
class Row:
    """One line of the table."""

    id: str
    target: str
    what: str
    workload: str
    rate: str
    rss: str
    reference: str
    ratio: float | None
    goal: str
    result: str
    inputs: str
    data: dict[str, Any] = field(default_factory=dict)


def fmt_rate(n: float | None, seconds: float | None, unit: str) -> str:
    if not n or not seconds:
        return "-"
    return f"{n / seconds:,.0f} {unit}"


def fmt_mib(b: float | None) -> str:
    return "-" if not b else f"{b / MIB:,.0f} MiB"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def reps_text(m: Measured, name: str = "seconds") -> str:
    vals = m.values(name)
    return "[" + ", ".join(f"{v:.2f}" for v in vals) + "]"


def ratio_text(a: Measured, b: Measured, name: str) -> str:
    x, y = a.median(name), b.median(name)
    return f"{x / y:.2f}" if x and y else "-"


def error_row(rid: str, target: str, what: str, workload: str, m: Measured) -> Row:
    err = (m.errors[-1] if m.errors else "no result").strip().splitlines()
    return Row(
        rid,
        target,
        what,
        workload,
        "-",
        "-",
        "-",
        None,
        "-",
        "ERROR",
        f"{m.label}: {err[-1] if err else ''}",
    )
