"""A self-contained HTML report of a results document (``streameval report RESULTS.json``).

:func:`write_report` writes ``report.html`` and the PNG plots it shows into
one directory. The HTML embeds every plot as a ``data:image/png;base64`` URI
and its style sheet inline: it references nothing outside itself and opens
offline, from a mail attachment as well as from the directory.

What it shows:

* the experiment (stream, counts, delay, estimators, re-evaluation settings);
* a ranking of the learners by ``kappa_plus``, then accuracy (regression: by
  MAE), with the No-Change and Majority baselines marked and every learner
  whose ``kappa_per <= 0`` flagged *fails No-Change*
  (``temporal-dependence-evaluation-journal.txt``, sect. 4.4-4.5);
* metrics over time from the optional ``curves`` block
  (:mod:`streameval.pipeline.report.curves`), or how to get them;
* binned performance of continuous re-evaluation and its overhead;
* the stream's temporal-dependence diagnostics (priors, transition matrix,
  ``Delta(l)``, quick test) as tables and plots;
* pairwise comparisons (Q statistic, signed McNemar) and drift alarms.

The tables and the cells they are made of are built by
:mod:`~streameval.pipeline.report.html_tables`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streameval.pipeline.report.binned import binned_note, shown_bins
from streameval.pipeline.report.html_tables import (
    cell,
    comparisons_section,
    drift_section,
    esc,
    lookup,
    ranking,
    ranking_section,
    row_header,
    runtime_section,
    summary_section,
    table,
    text_cell,
)

REPORT_NAME = "report.html"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;
border-bottom:1px solid #ddd;padding-bottom:.2em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0 1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.baseline td,tr.baseline th{background:#f7f7fb}
.fail{color:#a40000;font-weight:600}.ok{color:#1a6e1a}.note{color:#555;font-size:.9em}
.hint{background:#fff8e1;border:1px solid #f0d98c;padding:.6em .8em;border-radius:4px}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}code{background:#f3f3f3;padding:0 .2em}
"""


# -- figures ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One PNG written next to the report and embedded in it."""

    path: Path
    title: str
    caption: str

    def html(self) -> str:
        data = base64.b64encode(self.path.read_bytes()).decode("ascii")
        return (
            f'<figure><img src="data:image/png;base64,{data}" alt="{esc(self.title)}">'
            f"<figcaption>{esc(self.caption)} ({esc(self.path.name)})</figcaption></figure>"
        )


def make_figures(results: dict[str, Any], out_dir: Path) -> dict[str, list[Figure]]:
    """Write every plot the results allow into ``out_dir``; ``{section: [figures]}``."""
    from streameval.pipeline.report import plots

    figures: dict[str, list[Figure]] = {"curves": [], "binned": [], "diagnostics": []}
    for estimator in plots.curve_estimators(results):
        name = "curves.png" if estimator == "whole" else f"curves-{estimator}.png"
        path = plots.plot_curves(results, out_dir / name, estimator)
        figures["curves"].append(
            Figure(path, f"metrics over time ({estimator})", f"Metrics over time, {estimator}")
        )
    learners = results.get("learners", {})
    if any(e.get("binned") for e in learners.values()):
        metric = "accuracy" if results.get("task", "classification") == "classification" else "mae"
        if any(e.get("binned", {}).get(metric) for e in learners.values()):
            path = plots.plot_binned(results, out_dir / "binned.png", metric)
            figures["binned"].append(
                Figure(path, f"binned {metric}", f"Binned {metric} against bin index")
            )
    diag = results.get("diagnostics") or {}
    for key, func, name, title in (
        ("priors", plots.plot_priors, "diagnostics-priors.png", "class priors"),
        ("transition", plots.plot_transition, "diagnostics-transition.png", "transition matrix"),
        ("delta", plots.plot_delta, "diagnostics-delta.png", "Delta(l)"),
    ):
        if diag.get(key):
            path = func(diag, out_dir / name, title=f"{results.get('stream')}: {title}")
            figures["diagnostics"].append(Figure(path, title, title.capitalize()))
    return figures


# -- sections with plots ---------------------------------------------------------------------


def curves_section(results: dict[str, Any], figures: list[Figure]) -> str:
    """Metrics over time, or how to get them."""
    parts = ["<h2>Metrics over time</h2>"]
    curves = results.get("curves")
    if not figures:
        parts.append(
            '<p class="hint">These results have no <code>curves</code>: the experiment kept '
            "no periodic snapshots. Re-run it with <code>--snapshot-every N</code> (for "
            "example <code>--snapshot-every 1000</code>: a point every 1000 labels) on "
            "<code>streameval evaluate</code> or <code>streameval run</code>, write the "
            "results with <code>--json FILE</code> and run <code>streameval report FILE</code> "
            "again.</p>"
        )
        return "\n".join(parts)
    assert curves is not None
    rows = [
        f'<tr><th scope="row">first point (labels)</th>{cell(results, ["curves", "n_labelled", 0])}'
        "</tr>",
        f'<tr><th scope="row">last point (labels)</th>'
        f"{cell(results, ['curves', 'n_labelled', len(curves['n_labelled']) - 1])}</tr>",
        f'<tr><th scope="row">stride (snapshots per point)</th>'
        f"{cell(results, ['curves', 'stride'])}</tr>",
    ]
    parts.append(
        '<p class="note">One point per periodic metrics snapshot '
        "(<code>--snapshot-every</code>) and one at the end of the stream; each value is the "
        "metric over all labels so far (whole), or the window / fading estimate.</p>"
    )
    parts.append(table(["curves", ""], rows, "curves"))
    parts += [f.html() for f in figures]
    return "\n".join(parts)


def binned_section(results: dict[str, Any], figures: list[Figure]) -> str:
    """Binned performance (delayed-labelling paper, sect. 4.1), Psi_W and the overhead."""
    learners = results.get("learners", {})
    if not any(e.get("binned") for e in learners.values()):
        return (
            "<h2>Delayed labels: continuous re-evaluation</h2>\n"
            '<p class="hint">Re-evaluation was off. Run with <code>--reeval-k K --bins B</code> '
            "(for example <code>--reeval-k 10 --bins 20</code>) to see how the predictions "
            "made while an instance waits for its label perform, bin by bin.</p>"
        )
    bins = int(lookup(results, ["config", "bins"]) or 0)
    picks = shown_bins(bins)
    classification = results.get("task", "classification") == "classification"
    metrics = ("accuracy", "kappa", "kappa_per", "kappa_plus") if classification else ("mae",)
    parts = [
        "<h2>Delayed labels: continuous re-evaluation</h2>",
        '<p class="note">Bin 0 scores the first prediction, bin B+1 the '
        "test-then-train prediction made when the label arrives; the bins in between score "
        "the prediction in force during each share of the instance's waiting time. Psi_W is "
        "the weighted summary over all bins.</p>",
        f'<p class="note">{esc(binned_note(results))}</p>',
    ]
    for metric in metrics:
        if not any(e.get("binned", {}).get(metric) for e in learners.values()):
            continue
        header = ["learner", *(f"b={b}" for b in picks), "Psi_W"]
        rows = []
        for spec in ranking(results):
            if not learners[spec].get("binned", {}).get(metric):
                continue
            cells = [text_cell(spec)]
            cells += [cell(results, ["learners", spec, "binned", metric, b]) for b in picks]
            cells.append(cell(results, ["learners", spec, "psi_w", metric]))
            rows.append(f"<tr>{''.join(cells)}</tr>")
        parts.append(f"<h3>binned {esc(metric)}</h3>")
        parts.append(table(header, rows, f"binned-{metric}"))
    parts += [f.html() for f in figures]
    overhead = results.get("overhead") or {}
    if overhead:
        rows = [
            f'<tr><th scope="row">{esc(k)}</th>{cell(results, ["overhead", k])}</tr>'
            for k, v in overhead.items()
            if not isinstance(v, (dict, list))
        ]
        parts += ["<h3>Overhead (sect. 6.1)</h3>", table(["indicator", "value"], rows, "overhead")]
    return "\n".join(parts)


def diagnostics_section(results: dict[str, Any], figures: list[Figure]) -> str:
    """The stream's temporal-dependence diagnostics."""
    diag = results.get("diagnostics")
    if not diag:
        return ""
    base = ["diagnostics"]
    rows = []
    for label, key in (
        ("labels", "n"),
        ("majority class", "majority"),
        ("P(M): Majority Class accuracy", "p_majority"),
        ("P(T): No-Change accuracy", "p_same"),
        ("sum p_i^2: P(T) without dependence", "iid_baseline"),
        ("temporal dependence: P(T) > P(M)", "dependent"),
    ):
        rows.append(f"<tr>{row_header(label)}{cell(results, [*base, key])}</tr>")
    parts = [
        "<h2>Stream diagnostics: temporal dependence</h2>",
        table(["statistic", "value"], rows, "diagnostics"),
    ]
    quick = diag.get("quick_test") or {}
    if quick.get("verdict"):
        parts.append(f"<p><strong>Quick test:</strong> {esc(quick['verdict'])}</p>")
    priors = diag.get("priors") or {}
    if priors:
        rows = [
            f"<tr>{row_header(label)}{cell(results, [*base, 'priors', label])}</tr>"
            for label in priors
        ]
        parts += ["<h3>Class priors</h3>", table(["class", "P(class)"], rows, "priors")]
    transition = diag.get("transition") or {}
    if transition:
        labels = list(transition)
        rows = [
            f"<tr>{row_header(r)}"
            + "".join(cell(results, [*base, "transition", r, c]) for c in labels)
            + "</tr>"
            for r in labels
        ]
        parts += [
            "<h3>Transition matrix P(y_t = column | y_t-1 = row)</h3>",
            table(["y_t-1 \\ y_t", *labels], rows, "transition"),
        ]
    delta = diag.get("delta") or {}
    if delta:
        n_lags = max(len(v) for v in delta.values())
        rows = [
            f"<tr>{row_header(label)}"
            + "".join(cell(results, [*base, "delta", label, i]) for i in range(len(values)))
            + "</tr>"
            for label, values in delta.items()
        ]
        parts += [
            "<h3>Delta(l) (sect. 6.8)</h3>",
            '<p class="note">Delta(l) = P(i | l previous labels are i) - P(i | l+1 previous '
            "labels are i); l = 0 compares the prior with first-order dependence. Negative "
            "values: positive dependence of order l+1.</p>",
            table(["class", *(f"l={i}" for i in range(n_lags))], rows, "delta"),
        ]
    parts += [f.html() for f in figures]
    return "\n".join(parts)


# -- the page --------------------------------------------------------------------------------


def render_report(results: dict[str, Any], figures: dict[str, list[Figure]]) -> str:
    """The whole HTML document."""
    stream = results.get("stream", "?")
    body = [
        f"<h1>streameval report: {esc(stream)}</h1>",
        '<p class="note">Generated by <code>streameval report</code> from a results document '
        "of <code>streameval evaluate</code> / <code>streameval run</code>. Hover a number "
        "for its full precision.</p>",
        summary_section(results),
        ranking_section(results),
        curves_section(results, figures.get("curves", [])),
        binned_section(results, figures.get("binned", [])),
        diagnostics_section(results, figures.get("diagnostics", [])),
        comparisons_section(results),
        drift_section(results),
        runtime_section(results),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>streameval report: {esc(stream)}</title>\n<style>{CSS}</style>\n</head>\n"
        "<body>\n" + "\n".join(part for part in body if part) + "\n</body>\n</html>\n"
    )


def check_results(results: Any) -> dict[str, Any]:
    """``results`` if it looks like a results document, else a ``ValueError`` saying why."""
    if not isinstance(results, dict):
        raise ValueError("not a results document: expected a JSON object")
    if isinstance(results.get("results"), dict) and results.get("kind") == "results":
        results = results["results"]  # a results message of the metrics topic
    missing = [k for k in ("stream", "learners", "config") if k not in results]
    if missing:
        raise ValueError(f"not a results document: no {', '.join(missing)}")
    return results


def write_report(results: dict[str, Any], out_dir: Path) -> Path:
    """Write ``report.html`` and its PNG plots into ``out_dir``; return the HTML's path."""
    results = check_results(results)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = make_figures(results, out_dir)
    path = out_dir / REPORT_NAME
    path.write_text(render_report(results, figures), encoding="utf-8")
    return path
