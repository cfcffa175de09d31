"""``streameval report`` and the ``--report DIR`` option of ``evaluate`` and ``run``.

The report itself is :mod:`streameval.pipeline.report.html`'s; this module is its
command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from streameval.pipeline.reeval.summary import weighted_summary, weights_preset
from streameval.pipeline.report.curves import BINNED_METRICS, bins_at
from streameval.pipeline.report.html import write_report
from streameval.pipeline.report.table import binned_table


def default_out_dir(results_path: Path) -> Path:
    """``results/x.json`` -> ``results/x-report``.

    >>> default_out_dir(Path("results/electricity.json")).as_posix()
    'results/electricity-report'
    """
    return results_path.with_name(results_path.stem + "-report")


def bins_at_text(results: dict[str, Any], n_labelled: int, metrics: list[str]) -> str:
    """The binned tables of ``metrics`` as they stood after ``n_labelled`` labels (the last
    point of the ``curves`` block's binned curves at or before it), with ``Psi_W`` under
    the results' weights."""
    at, learners = bins_at(results.get("curves") or {}, n_labelled)
    config = results.get("config") or {}
    n_bins = int(config.get("bins", 0)) + 2
    weights = weights_preset(str(config.get("weights") or "uniform"), n_bins)
    entries = {
        spec: {
            "binned": values,
            "psi_w": {k: weighted_summary(_numbers(v), weights) for k, v in values.items()},
        }
        for spec, values in learners.items()
    }
    doc = {**results, "learners": entries}
    tables = [binned_table(doc, metric) for metric in metrics]
    return f"after {at:,} labels (asked {n_labelled:,})\n" + "\n\n".join(tables)


def _numbers(values: list[float | None]) -> list[float]:
    return [float("nan") if v is None else float(v) for v in values]


def cmd_report(args: argparse.Namespace) -> int:
    """``streameval report RESULTS.json [--out DIR | --bins-at N [--metric M ...]]``."""
    source = Path(args.results)
    try:
        results = json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not JSON: {exc}") from exc
    if args.bins_at is not None:
        print(bins_at_text(results, args.bins_at, args.metric or ["accuracy"]))
        return 0
    out_dir = Path(args.out) if args.out else default_out_dir(source)
    path = write_report(results, out_dir)
    print(f"report written to {path}")
    return 0


def add_report_command(sub: Any) -> argparse.ArgumentParser:
    """Add ``streameval report`` to the subcommands ``sub`` (an argparse subparsers action)."""
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report (and PNG plots) of a results JSON",
        description="Write DIR/report.html, which embeds its plots and needs no network, and "
        "the plots as PNG files beside it. Metrics over time need results of a run with "
        "--snapshot-every N.",
    )
    p.add_argument("results", metavar="RESULTS.json", help="a results document (--json FILE)")
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output directory (default: RESULTS-report next to the JSON file)",
    )
    p.add_argument(
        "--bins-at",
        type=int,
        default=None,
        metavar="N",
        help="print the binned table as it stood after N labels (the last kept point at or "
        "before N; needs --reeval-k and --snapshot-every) instead of writing the report",
    )
    p.add_argument(
        "--metric",
        action="append",
        choices=BINNED_METRICS,
        default=None,
        help="with --bins-at: the binned metric to print (repeatable; default accuracy)",
    )
    p.set_defaults(handler=cmd_report)
    return p


def add_report_option(group: Any) -> None:
    """``--report DIR`` for ``evaluate`` and ``run`` (an argparse parser or argument group)."""
    group.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="also write the HTML report and its PNG plots into DIR",
    )


def report_from_args(results: dict[str, Any], args: argparse.Namespace) -> Path | None:
    """Write the report when ``--report DIR`` was given; return its path."""
    out = getattr(args, "report", None)
    if not out:
        return None
    path = write_report(results, Path(out))
    print(f"report written to {path}", file=sys.stderr)
    return path
