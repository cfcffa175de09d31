"""PNG plots of a results document (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_binned(results: dict[str, Any], path: str | Path, metric: str = "accuracy") -> Path:
    """Binned ``metric`` against bin index, one line per learner.

    The view of the delayed-labelling paper's figures: b = 0 is the first
    prediction, b = B+1 the test-then-train prediction, bins in between the
    predictions in force during each share of the waiting time.
    """
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
