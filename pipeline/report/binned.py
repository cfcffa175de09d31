"""Which bins the binned tables show, and why the binned curve climbs in steps.

Continuous re-evaluation (``delayed-labelling-continuous-reevaluation.txt``, sect. 4)
scores ``B + 2`` bins per learner; tables show four of them, the paper's choice in
sect. 4.1: the first prediction (``b = 0``), halfway through the wait (``B/2``), near
its end (``0.9B``) and the test-then-train prediction (``B + 1``).

A pending instance is re-predicted each time it has waited a multiple of ``K`` labels
(Alg. 1), ``N_R`` times per label on average (sect. 6.1), so the ``B`` bins of its wait
hold about ``N_R + 1`` distinct predictions, each bin taking the one in force longest
within it (``d_D``, sect. 4.1). Under a delay of about the same length for every
instance the bins where the prediction changes line up, and the curve is flat for
about ``B / (N_R + 1)`` bins between steps.
"""

from __future__ import annotations

from typing import Any


def shown_bins(n_bins: int) -> list[int]:
    """The bins a table shows: ``0, B/2, 0.9B, B+1`` (fewer when they coincide).

    >>> shown_bins(20), shown_bins(1)
    ([0, 10, 18, 21], [0, 2])
    """
    return sorted({0, n_bins // 2, int(0.9 * n_bins), n_bins + 1})


def binned_note(results: dict[str, Any]) -> str:
    """Two sentences under a binned table: the bins shown, and the steps' period.

    >>> print(binned_note({"config": {"bins": 20, "reeval_k": 10},
    ...                    "overhead": {"N_R": 4.0}}))  # doctest: +NORMALIZE_WHITESPACE
    shown: b=0, 10, 18, 21 (first prediction, B/2, 0.9B, test-then-train: the paper's
    sect. 4.1); every bin is in the JSON and the plot. Each waiting instance is re-predicted
    every K=10 labels, 4.0 times on average, so its 20 bins hold about 5 predictions: the
    binned curve is flat for about 4 bins between steps.
    """
    config = results.get("config", {})
    n_bins = int(config.get("bins") or 0)
    picks = ", ".join(str(b) for b in shown_bins(n_bins))
    text = (
        f"shown: b={picks} (first prediction, B/2, 0.9B, test-then-train: the paper's\n"
        "sect. 4.1); every bin is in the JSON and the plot."
    )
    n_r = (results.get("overhead") or {}).get("N_R")
    if isinstance(n_r, (int, float)) and n_bins:
        text += (
            f" Each waiting instance is re-predicted\nevery K={config.get('reeval_k')} labels, "
            f"{n_r:.1f} times on average, so its {n_bins} bins hold about {n_r + 1:.0f} "
            f"predictions: the\nbinned curve is flat for about {n_bins / (n_r + 1):.0f} bins "
            "between steps."
        )
    return text
