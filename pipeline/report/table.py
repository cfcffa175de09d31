"""Plain-text tables of a results document, as ``evaluate`` and ``run`` print them."""

from __future__ import annotations

from typing import Any

from streameval.pipeline.report.binned import binned_note, shown_bins

CLASSIFICATION_COLUMNS = (
    ("accuracy", "acc"),
    ("kappa", "kappa"),
    ("kappa_per", "k_per"),
    ("kappa_m", "k_m"),
    ("kappa_plus", "k_plus"),
    ("gmean", "gmean"),
)
REGRESSION_COLUMNS = (("mae", "MAE"), ("rmse", "RMSE"))


def fmt(value: Any, width: int = 7) -> str:
    if value is None:
        return "-".rjust(width)
    if isinstance(value, float):
        return f"{value:.4f}".rjust(width)
    return str(value).rjust(width)


def _grid(header: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    lines = [
        "  ".join(
            h.rjust(w) if i else h.ljust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


def metrics_table(results: dict[str, Any]) -> str:
    """One row per learner: whole-stream metrics (first predictions), then the forgetting ones."""
    classification = results.get("task", "classification") == "classification"
    columns = CLASSIFICATION_COLUMNS if classification else REGRESSION_COLUMNS
    learners = results["learners"]
    main_metric = columns[0][0]
    extra = [
        n
        for n in ("window", "fading")
        if any(main_metric in e.get(n, {}) for e in learners.values())
    ]
    header = ["learner", *(short for _, short in columns)]
    has_auc = any("auc" in e for e in learners.values())
    if has_auc:
        header.append("auc")
    for name in extra:
        header.append(f"{name[:3]}.acc" if classification else f"{name[:3]}.MAE")
        if classification:
            header.append(f"{name[:3]}.k_per")
    if classification:
        header.append("vs NoChange")
    rows = []
    for spec, e in learners.items():
        row = [spec, *(fmt(e.get(key)) for key, _ in columns)]
        if has_auc:
            row.append(fmt(e.get("auc")))
        for name in extra:
            block = e.get(name, {})
            if classification:
                row += [fmt(block.get("accuracy")), fmt(block.get("kappa_per"))]
            else:
                row.append(fmt(block.get("mae")))
        if classification:
            k_per = e.get("kappa_per")
            verdict = (
                "-"
                if k_per is None
                else ("beats" if k_per > 0 else ("equal" if k_per == 0 else "FAILS"))
            )
            row.append(verdict)
        rows.append(row)
    return _grid(header, rows)


def binned_table(results: dict[str, Any], metric: str = "accuracy") -> str:
    """Binned performance at the bins of :func:`shown_bins`, then why those and why the
    curve steps (:func:`binned_note`)."""
    learners = results["learners"]
    B = int(results["config"].get("bins", 0))
    picks = shown_bins(B)
    header = ["learner", *(f"b={b}" for b in picks), "Psi_W"]
    rows = []
    for spec, e in learners.items():
        values = e.get("binned", {}).get(metric)
        if not values:
            continue
        psi = e.get("psi_w", {}).get(metric)
        rows.append([spec, *(fmt(values[b]) for b in picks), fmt(psi)])
    caption = f"binned {metric} (b=0 first prediction, b={B + 1} test-then-train)\n"
    return caption + _grid(header, rows) + "\n" + binned_note(results)


#: The two readings of the temporal-dependence paper's ``Delta(l)`` (sect. 6.8) a table prints.
DELTA_READINGS = ("formula", "paper")


def diagnostics_table(diag: dict[str, Any], delta_reading: str = "formula") -> str:
    """The temporal-dependence diagnostics of a stream, as text.

    ``delta_reading``: ``formula`` prints ``Delta(l)``, ``l = 0..L``, as sect. 6.8's formula
    reads (negative for positive dependence); ``paper`` prints ``l = 1..L+1`` as the
    paper's text and numbers use it (positive for positive dependence).
    """
    if delta_reading not in DELTA_READINGS:
        raise ValueError(f"delta reading {delta_reading!r}: one of {', '.join(DELTA_READINGS)}")
    lines = [
        f"labels: {diag.get('n', 0):,}",
        "priors: " + ", ".join(f"{k}={v:.4f}" for k, v in diag.get("priors", {}).items()),
        f"P(M) majority ({diag.get('majority')}): {fmt(diag.get('p_majority')).strip()}   "
        f"P(T) same as previous: {fmt(diag.get('p_same')).strip()}   "
        f"iid baseline sum p_i^2: {fmt(diag.get('iid_baseline')).strip()}",
    ]
    dependent = diag.get("dependent")
    if dependent is not None:
        lines.append(
            "temporal dependence: "
            + ("YES, P(T) > P(M): No-Change beats Majority" if dependent else "no, P(T) <= P(M)")
        )
    transition = diag.get("transition") or {}
    if transition:
        # a label that only ever came last follows others but precedes none: a column only
        cols = list(dict.fromkeys([*transition, *(c for row in transition.values() for c in row)]))
        lines.append("transition P(y_t=col | y_t-1=row):")
        lines.append("  " + "".join(str(c).rjust(9) for c in ["", *cols]))
        for r in transition:
            lines.append(
                "  " + str(r).rjust(9) + "".join(fmt(transition[r].get(c), 9) for c in cols)
            )
    delta = diag.get("delta") or {}
    if delta_reading == "paper" and delta:
        delta = diag.get("delta_paper") or {}
        lines.append("Delta(l), l = 1..L+1 (the paper's reading: gain of the l-th previous label):")
        for label, values in delta.items():
            lines.append(f"  {label}: " + " ".join(fmt(v, 8) for v in values))
    elif delta:
        lines.append("Delta(l), l = 0..L (l=0: prior vs first order):")
        for label, values in delta.items():
            lines.append(f"  {label}: " + " ".join(fmt(v, 8) for v in values))
    quick = diag.get("quick_test")
    if quick:
        lines.append(f"quick test on first {quick.get('n')}: {quick.get('verdict')}")
    return "\n".join(lines)


def overhead_line(results: dict[str, Any]) -> str:
    o = results.get("overhead", {})
    c = results.get("counters", {})
    return (
        f"re-predictions {o.get('n_repredictions', 0):,} (N_R {o.get('N_R', 0):.2f} per label), "
        f"max pending {o.get('max_pending', 0):,}, "
        f"max predictions held {o.get('max_predictions_held', 0):,}, "
        f"evicted {o.get('evicted', 0):,}, unknown labels {c.get('unknown_labels', 0):,}"
    )


def results_text(results: dict[str, Any]) -> str:
    """Everything ``streameval evaluate`` prints about a results document: the header line,
    the metrics table, the binned table and overhead (with re-evaluation), drift alarms,
    the stream's temporal dependence and the run time."""
    cfg = results["config"]
    lines = [
        f"\n{results['stream']}: {results['n_instances']:,} instances, "
        f"{results['n_labelled']:,} labelled, delay {cfg.get('delay')}, estimators whole"
        + (f", window({cfg['window']})" if cfg.get("window") else "")
        + (f", fading({cfg['fading']})" if cfg.get("fading") else "")
        + (f", protocol {cfg['protocol']}" if cfg.get("protocol", "papers") != "papers" else ""),
        metrics_table(results),
    ]
    if cfg.get("reeval_k"):
        metric = "accuracy" if results.get("task", "classification") == "classification" else "mae"
        lines += ["\n" + binned_table(results, metric), overhead_line(results)]
    drift = {s: e["drift"] for s, e in results["learners"].items() if "drift" in e}
    if drift:
        lines.append("\ndrift alarms:")
        for spec, block in drift.items():
            for det, d in block.items():
                line = f"  {spec} / {det}: {d['n_alarms']} alarms"
                if "detection" in d:
                    r = d["detection"]
                    line += (
                        f"; detected {r.get('detected')}, misses {r.get('misses')}, "
                        f"false alarms {r.get('false_alarms')}, mean delay {r.get('mean_delay')}"
                    )
                lines.append(line)
    if "diagnostics" in results:
        lines += ["\ntemporal dependence of the stream:", diagnostics_table(results["diagnostics"])]
    runtime = results.get("runtime")
    if runtime:
        lines.append(
            f"\n{runtime.get('events', 0):,} events in {runtime.get('seconds')} s "
            f"({runtime.get('events_per_s')} events/s, driver {runtime.get('driver')}"
            + _helper_note(runtime.get("helper"))
            + ")"
        )
    return "\n".join(lines)


def _helper_note(helper: dict | None) -> str:
    """How a split run used its second process (:mod:`streameval.pipeline.split`)."""
    if not helper:
        return ""
    return (
        f"; {', '.join(helper['learners'])} in a second process, {helper['cpu_seconds']:.1f} s CPU"
    )
