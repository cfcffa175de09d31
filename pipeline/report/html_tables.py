"""The tables of the HTML report (:mod:`~streameval.pipeline.report.html`) and their cells.

:func:`cell` shows one value of a results document in a ``<td>``, :func:`table` puts
rendered rows under a header, and :func:`ranking` orders the learners best first. The
sections of the report that are tables only (the experiment, the ranking, pairwise
comparisons, drift alarms, runtime) are built here; the sections that also show plots
are built in :mod:`~streameval.pipeline.report.html`.

Every number in a table cell carries the exact JSON value it shows
(``data-value``) and where it comes from (``data-path``, a JSON list of keys
into the results document), so the report can be checked against the
document mechanically; ``tests/test_report.py`` does so.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from streameval.pipeline.spec import SpecError, split_wrappers

CLASSIFICATION_RANK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("accuracy", "accuracy"),
    ("kappa", "kappa"),
    ("kappa_per", "kappa_per"),
    ("kappa_m", "kappa_m"),
    ("kappa_plus", "kappa_plus"),
    ("gmean", "G-mean"),
)
REGRESSION_RANK_COLUMNS: tuple[tuple[str, str], ...] = (("mae", "MAE"), ("rmse", "RMSE"))
FORGETTING_COLUMNS: tuple[str, ...] = ("accuracy", "kappa", "kappa_per", "kappa_plus", "auc")


# -- value formatting ------------------------------------------------------------------------


def display(value: Any) -> str:
    """How a JSON value is shown in a cell: floats to 4 decimals, ints with separators.

    >>> display(0.72462), display(45312), display(None), display(True)
    ('0.7246', '45,312', '-', 'yes')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value != 0 and abs(value) >= 1e6:
            return f"{value:.4g}"
        return f"{value:.4f}"
    return str(value)


def esc(text: Any) -> str:
    """HTML-escape ``text`` (quotes too)."""
    return html.escape(str(text), quote=True)


def lookup(results: dict[str, Any], path: list[Any]) -> Any:
    """The value at ``path`` (keys and list indices) in ``results``; ``None`` when absent.

    >>> lookup({"a": {"b": [1, 2]}}, ["a", "b", 1])
    2
    """
    node: Any = results
    for key in path:
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return None
    return node


def cell(results: dict[str, Any], path: list[Any]) -> str:
    """A ``<td>`` showing the value at ``path``, with its exact value and path as attributes."""
    value = lookup(results, path)
    if isinstance(value, (dict, list)):
        raise TypeError(f"{path} is not a scalar")
    css = "text" if isinstance(value, str) else "num"
    return (
        f'<td class="{css}" data-path="{esc(json.dumps(path))}" '
        f'data-value="{esc(json.dumps(value))}" title="{esc(json.dumps(value))}">'
        f"{esc(display(value))}</td>"
    )


def text_cell(text: Any, css: str = "") -> str:
    """A ``<td>`` with text that is not a number of the results (names, verdicts)."""
    cls = f' class="{css}"' if css else ""
    return f"<td{cls}>{esc(text)}</td>"


def row_header(text: Any) -> str:
    """A ``<th>`` naming a row (a class label, a setting): never a number of the results."""
    return f'<th scope="row">{esc(text)}</th>'


def table(header: list[str], rows: list[str], ident: str) -> str:
    """An HTML table (``id`` = ``ident``) from header texts and rendered ``<tr>`` rows."""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in header)
    return (
        f'<table id="{esc(ident)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# -- the ranking -----------------------------------------------------------------------------


def baseline_role(spec: str) -> str | None:
    """``"No-Change"`` or ``"Majority"`` for the two label-only baselines, else ``None``.

    >>> baseline_role("nochange"), baseline_role("majority[window=500]"), baseline_role("ta:ht")
    ('No-Change', 'Majority', None)
    """
    try:
        parts = split_wrappers(spec)
    except SpecError:
        return None
    if len(parts) != 1:
        return None
    return {"nochange": "No-Change", "majority": "Majority"}.get(parts[0].name)


def _desc(value: Any) -> tuple[bool, float]:
    """Sort key part: present values first, larger first."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return (False, -float(value))
    return (True, 0.0)


def ranking(results: dict[str, Any]) -> list[str]:
    """Learner specs, best first.

    Classification: by ``kappa_plus``, then accuracy, both descending;
    regression: by MAE, then RMSE, ascending. Missing values go last; ties
    keep the order of the results document.
    """
    learners = results.get("learners", {})
    if results.get("task", "classification") == "classification":

        def key(spec: str) -> tuple:
            e = learners[spec]
            return (*_desc(e.get("kappa_plus")), *_desc(e.get("accuracy")))

    else:

        def key(spec: str) -> tuple:
            e = learners[spec]
            mae, rmse = e.get("mae"), e.get("rmse")
            return (
                *_desc(-mae if isinstance(mae, (int, float)) else None),
                *_desc(-rmse if isinstance(rmse, (int, float)) else None),
            )

    return sorted(learners, key=key)


def verdict(spec: str, entry: dict[str, Any]) -> tuple[str, str]:
    """The No-Change verdict of a learner and its CSS class.

    ``kappa_per <= 0`` is *fails No-Change* (eq. 13: not better than the
    Persistent classifier); the No-Change baseline itself is the reference
    (its ``kappa_per`` is 0 by definition).
    """
    k_per = entry.get("kappa_per")
    if baseline_role(spec) == "No-Change":
        return "reference (kappa_per = 0 by definition)", "note"
    if k_per is None:
        return "undefined kappa_per", "note"
    if k_per <= 0:
        return "fails No-Change", "fail"
    return "beats No-Change", "ok"


def ranking_section(results: dict[str, Any]) -> str:
    """The ranking table of the learners (whole-stream metrics of the first predictions)."""
    learners = results.get("learners", {})
    classification = results.get("task", "classification") == "classification"
    columns = CLASSIFICATION_RANK_COLUMNS if classification else REGRESSION_RANK_COLUMNS
    has_auc = classification and any("auc" in e for e in learners.values())
    header = ["rank", "learner", "role", *(label for _, label in columns)]
    if has_auc:
        header.append("AUC")
    if classification:
        header += ["kappa z", "No-Change verdict"]
    rows = []
    for rank, spec in enumerate(ranking(results), start=1):
        entry = learners[spec]
        role = baseline_role(spec)
        cells = [f'<th scope="row">{rank}</th>', text_cell(spec), text_cell(role or "")]
        cells += [cell(results, ["learners", spec, key]) for key, _ in columns]
        if has_auc:
            cells.append(cell(results, ["learners", spec, "auc"]))
        if classification:
            cells.append(cell(results, ["learners", spec, "kappa_z"]))
            text, css = verdict(spec, entry)
            cells.append(text_cell(text, css))
        cls = ' class="baseline"' if role else ""
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    order = (
        "sorted by kappa_plus, then accuracy"
        if classification
        else "sorted by MAE, then RMSE (lower is better)"
    )
    parts = [
        "<h2>Ranking</h2>",
        f'<p class="note">Whole-stream metrics of the first prediction of every instance, '
        f"{order}. Baselines (label-only) are shaded. kappa_per compares a learner with "
        "the No-Change (Persistent) classifier: kappa_per &le; 0 means it does no better "
        "than repeating the last label.</p>",
        table(header, rows, "ranking"),
    ]
    extra = [n for n in ("window", "fading") if any(n in e for e in learners.values())]
    if extra:
        header = ["learner"]
        paths: list[tuple[str, str]] = []
        for name in extra:
            for metric in FORGETTING_COLUMNS if classification else ("mae", "rmse"):
                if any(metric in e.get(name, {}) for e in learners.values()):
                    header.append(f"{name} {metric}")
                    paths.append((name, metric))
        rows = []
        for spec in ranking(results):
            cells = [text_cell(spec)]
            cells += [cell(results, ["learners", spec, name, metric]) for name, metric in paths]
            rows.append(f"<tr>{''.join(cells)}</tr>")
        parts += [
            "<h3>Forgetting estimators (end of stream)</h3>",
            '<p class="note">The same metrics over a sliding window and/or with a fading '
            "factor (prequential-error-fading-factors, Alg. 2 and 3).</p>",
            table(header, rows, "forgetting"),
        ]
    return "\n".join(parts)


# -- sections --------------------------------------------------------------------------------


def summary_section(results: dict[str, Any]) -> str:
    """The experiment: counts and settings, as a two-column table."""
    rows = []
    for label, path in (
        ("stream", ["stream"]),
        ("task", ["task"]),
        ("dataset", ["config", "dataset"]),
        ("instances", ["n_instances"]),
        ("labelled", ["n_labelled"]),
        ("label delay", ["config", "delay"]),
        ("limit", ["config", "limit"]),
        ("sliding window (labels)", ["config", "window"]),
        ("fading factor", ["config", "fading"]),
        ("re-evaluation every K labels", ["config", "reeval_k"]),
        ("bins B", ["config", "bins"]),
        ("Psi_W weights", ["config", "weights"]),
        ("positive class (AUC)", ["config", "positive"]),
        ("AUC window", ["config", "auc_window"]),
        ("snapshot every (labels)", ["config", "snapshot_every"]),
        ("seed", ["config", "seed"]),
    ):
        if lookup(results, path) is None and path[0] == "config":
            continue
        rows.append(f"<tr>{row_header(label)}{cell(results, path)}</tr>")
    classes = results.get("classes") or []
    if classes:
        rows.append(f'<tr><th scope="row">classes</th>{text_cell(", ".join(classes))}</tr>')
    detectors = lookup(results, ["config", "detectors"]) or []
    if detectors:
        rows.append(f'<tr><th scope="row">detectors</th>{text_cell(", ".join(detectors))}</tr>')
    return "<h2>Experiment</h2>\n" + table(["setting", "value"], rows, "experiment")


def comparisons_section(results: dict[str, Any]) -> str:
    """Q statistic and signed McNemar of every pair of learners."""
    comparisons = results.get("comparisons") or {}
    if not comparisons:
        return ""
    estimators: list[tuple[str, str]] = []
    for block in comparisons.values():
        for stat in ("q", "mcnemar"):
            for name in block.get(stat, {}):
                if (stat, name) not in estimators:
                    estimators.append((stat, name))
    header = ["pair", *(f"{'Q' if s == 'q' else 'McNemar'} ({n})" for s, n in estimators)]
    rows = [
        f"<tr>{text_cell(pair)}"
        + "".join(cell(results, ["comparisons", pair, s, n]) for s, n in estimators)
        + "</tr>"
        for pair in comparisons
    ]
    return (
        "<h2>Pairwise comparisons</h2>\n"
        '<p class="note">Q = log(S_A / S_B) of the accumulated losses (negative: A makes fewer '
        "errors); signed McNemar: positive when B is better, |M| &gt; 6.635 is significant at "
        "1% (prequential-error-fading-factors, sect. 4).</p>\n" + table(header, rows, "comparisons")
    )


def drift_section(results: dict[str, Any]) -> str:
    """Drift alarms per learner and detector."""
    rows = []
    fields = ("n_alarms",)
    detection = ("detected", "misses", "false_alarms", "mean_delay")
    has_detection = False
    for spec, entry in results.get("learners", {}).items():
        for det, block in (entry.get("drift") or {}).items():
            cells = [text_cell(spec), text_cell(det)]
            cells += [cell(results, ["learners", spec, "drift", det, f]) for f in fields]
            if "detection" in block:
                has_detection = True
                cells += [
                    cell(results, ["learners", spec, "drift", det, "detection", f])
                    for f in detection
                ]
            rows.append(cells)
    if not rows:
        return ""
    header = ["learner", "detector", "alarms"]
    if has_detection:
        header += ["detected", "misses", "false alarms", "mean delay"]
    width = len(header)
    rendered = ["<tr>" + "".join(c) + "<td></td>" * (width - len(c)) + "</tr>" for c in rows]
    return "<h2>Drift alarms</h2>\n" + table(header, rendered, "drift")


def runtime_section(results: dict[str, Any]) -> str:
    """Driver, wall time and rate (the only part that differs between two runs)."""
    runtime = results.get("runtime") or {}
    if not runtime:
        return ""
    rows = []
    for key, value in runtime.items():
        if isinstance(value, (dict, list)):
            continue
        rows.append(f"<tr>{row_header(key)}{cell(results, ['runtime', key])}</tr>")
    return "<h2>Runtime</h2>\n" + table(["", ""], rows, "runtime")
