"""PNG plots of a results document (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_binned(results: dict[str, Any], path: str | Path, metric: str | None = None) -> Path:
    """Binned ``metric`` against bin index, one line per learner.

    The view of the delayed-labelling paper's figures: b = 0 is the first
    prediction, b = B+1 the test-then-train prediction, bins in between the
    predictions in force during each share of the waiting time. ``metric``
    defaults to accuracy for classification and MAE for regression (sect. 7.1).
    """
    if metric is None:
        metric = "mae" if results.get("task") == "regression" else "accuracy"
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    plotted = 0
    for spec, entry in results["learners"].items():
        values = entry.get("binned", {}).get(metric)
        if not values:
            continue
        xs = list(range(len(values)))
        ys = [v if v is not None else float("nan") for v in values]
        ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.2, label=spec)
        plotted += 1
    if not plotted:
        plt.close(fig)
        raise ValueError("no binned results to plot: run with --reeval-k K --bins B")
    B = int(results["config"].get("bins", 0))
    ax.set_xlabel(f"bin (0 = first prediction, {B + 1} = test-then-train)")
    ax.set_ylabel(metric)
    ax.set_title(
        f"{results['stream']}: binned {metric}, K={results['config'].get('reeval_k')}, B={B}"
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


#: Panels of the metrics-over-time figure, by task.
CURVE_PANELS: dict[str, tuple[str, ...]] = {
    "classification": ("accuracy", "kappa", "kappa_per", "kappa_plus"),
    "regression": ("mae", "rmse"),
}
#: Curve key prefix of each estimator.
ESTIMATOR_PREFIX: dict[str, str] = {"whole": "", "window": "window.", "fading": "fading."}


def curve_estimators(results: dict[str, Any]) -> list[str]:
    """The estimators (``whole``, ``window``, ``fading``) that have curves in ``results``."""
    curves = results.get("curves") or {}
    panels = CURVE_PANELS.get(results.get("task", "classification"), ())
    found = []
    for name, prefix in ESTIMATOR_PREFIX.items():
        if any(
            any(v is not None for v in series.get(prefix + metric, []))
            for series in curves.get("learners", {}).values()
            for metric in panels
        ):
            found.append(name)
    return found


def plot_curves(results: dict[str, Any], path: str | Path, estimator: str = "whole") -> Path:
    """Metrics over time (x: labels seen), one panel per metric, one line per learner.

    Needs the ``curves`` block (:mod:`streameval.pipeline.report.curves`, ``--snapshot-every N``).
    ``estimator`` picks the whole-history, sliding-window or fading curves.
    """
    curves = results.get("curves")
    if not curves or not curves.get("n_labelled"):
        raise ValueError("no curves to plot: run with --snapshot-every N")
    prefix = ESTIMATOR_PREFIX[estimator]
    panels = CURVE_PANELS.get(results.get("task", "classification"), ())
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3.4 * rows), dpi=100, squeeze=False)
    xs = curves["n_labelled"]
    for ax, metric in zip(axes.flat, panels, strict=False):
        for spec, series in curves.get("learners", {}).items():
            values = series.get(prefix + metric)
            if not values or all(v is None for v in values):
                continue
            ys = [v if v is not None else float("nan") for v in values]
            ax.plot(xs, ys, linewidth=1.2, label=spec)
        if metric in ("kappa", "kappa_per", "kappa_m"):
            ax.axhline(0.0, color="black", linewidth=0.6, alpha=0.5)
        ax.set_title(metric if estimator == "whole" else f"{metric} ({estimator})", fontsize=10)
        ax.set_xlabel("labels seen")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if not handles:
        plt.close(fig)
        raise ValueError(f"no {estimator} curves in the results")
    fig.suptitle(f"{results['stream']}: metrics over time ({estimator})", y=0.99, fontsize=11)
    fig.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.955),
        ncol=min(len(labels), 6),
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.91))
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_priors(diagnostics: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Bar chart of the class priors, with ``P(M)``, ``P(T)`` and ``sum p_i^2`` as lines."""
    priors = diagnostics.get("priors") or {}
    if not priors:
        raise ValueError("no class priors in the diagnostics")
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.8), dpi=100)
    labels = [str(k) for k in priors]
    ax.bar(labels, list(priors.values()), color="#4c72b0")
    for key, name, style in (
        ("p_majority", "P(M) majority", "--"),
        ("p_same", "P(T) no-change", "-"),
        ("iid_baseline", "sum p_i^2 (no dependence)", ":"),
    ):
        value = diagnostics.get(key)
        if value is not None:
            ax.axhline(value, linestyle=style, color="#c44e52", linewidth=1.1, label=name)
    ax.set_ylim(0, 1)
    ax.set_ylabel("probability")
    ax.set_title(title or "class priors")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_transition(diagnostics: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Heatmap of ``P(y_t = column | y_{t-1} = row)``, each cell annotated."""
    transition = diagnostics.get("transition") or {}
    if not transition:
        raise ValueError("no transition matrix in the diagnostics")
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    labels = list(transition)
    matrix = [
        [transition[r].get(c) if transition[r].get(c) is not None else float("nan") for c in labels]
        for r in labels
    ]
    k = len(labels)
    size = min(9.0, 2.5 + 0.6 * k)
    fig, ax = plt.subplots(figsize=(size, size * 0.85), dpi=100)
    image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="Blues")
    ax.set_xticks(range(k), [str(c) for c in labels], rotation=45 if k > 4 else 0)
    ax.set_yticks(range(k), [str(r) for r in labels])
    ax.set_xlabel("y_t")
    ax.set_ylabel("y_{t-1}")
    if k <= 12:
        for i, row in enumerate(matrix):
            for j, value in enumerate(row):
                if value == value:  # not NaN
                    ax.text(
                        j,
                        i,
                        f"{value:.3f}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if value > 0.6 else "black",
                    )
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(title or "transition matrix")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_delta(diagnostics: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Grouped bars of ``Delta(l)``, ``l = 0..L``, one colour per class (sect. 6.8).

    Negative bars mean positive temporal dependence of order ``l + 1``.
    """
    delta = diagnostics.get("delta") or {}
    if not delta:
        raise ValueError("no Delta(l) in the diagnostics")
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n_lags = max(len(v) for v in delta.values())
    width = 0.8 / max(1, len(delta))
    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=100)
    for i, (label, values) in enumerate(delta.items()):
        xs = [lag + (i - (len(delta) - 1) / 2) * width for lag in range(len(values))]
        ys = [v if v is not None else float("nan") for v in values]
        ax.bar(xs, ys, width=width, label=str(label))
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_xticks(range(n_lags))
    ax.set_xlabel("l (0: prior vs first order)")
    ax.set_ylabel("Delta(l)")
    ax.set_title(title or "Delta(l): dependence on the l previous labels")
    ax.grid(True, axis="y", alpha=0.3)
    if len(delta) <= 12:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
