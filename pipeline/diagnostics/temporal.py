"""Temporal dependence of a label sequence, measured online.

Zliobaite et al., ``temporal-dependence-evaluation-journal.txt``:

* ``p_majority`` -- accuracy of the Majority Class classifier, ``P(M)``
  (Definition 2, eq. 6);
* ``p_same`` -- accuracy of the Persistent classifier,
  ``P(T) = sum_i P(y_t = i, y_{t-1} = i)`` over the ``n - 1`` consecutive
  pairs (Definition 3, eq. 7);
* ``iid_baseline`` -- ``sum_i p_i^2``, what ``P(T)`` would be without
  temporal dependence (eq. 8);
* ``dependent`` -- ``P(T) > P(M)``: the Persistent classifier beats the
  Majority Class (Proposition 7);
* ``transition`` -- ``P(y_t = j | y_{t-1} = i)`` as ``{i: {j: p}}``;
* ``delta`` -- for each class ``i``, ``[Delta(0), ..., Delta(max_lag)]`` with
  ``Delta(l) = P(y_t = i | the l previous labels are i)
  - P(y_t = i | the l + 1 previous labels are i)``, the formula as sect. 6.8
  prints it. ``l = 0`` conditions on nothing (the prior), so
  ``Delta(0) = P(i) - P(i | i)`` measures first-order dependence (Definition
  1), ``Delta(1)`` second-order, and so on: ``Delta(l) != 0`` means
  dependence of order ``l + 1``, and a *positive* dependence gives
  *negative* values. The conditional probability given ``m`` previous labels
  is estimated over the positions ``t >= m`` (those that have ``m``
  predecessors); ``None`` where the condition never occurred.
  ``p_given_run`` holds those conditional probabilities for
  ``m = 0..max_lag + 1``;
* ``delta_paper`` -- for each class, ``[Delta(1), ..., Delta(max_lag + 1)]`` as
  the paper's text and numbers use it: ``Delta(l) = P(y_t = i | l previous
  are i) - P(y_t = i | l - 1 previous are i)``, the gain of the ``l``-th
  previous label, so ``Delta(l) != 0`` means order-``l`` dependence and a
  positive dependence gives positive values (the paper's ``Delta(48) = 0.02``
  on Elec2 is this reading: 0.022 for ``DOWN``). Each entry is minus the
  ``delta`` entry one index lower;
* ``quick_test`` -- the sect. 7 recommendation: on the first ``quick_n``
  labels (100 by default), compare the Majority Class accuracy (largest class
  share in that sample) with the Persistent accuracy (share of equal
  consecutive pairs in it); if Persistent wins, wrap learners in the
  Temporally Augmented or Temporal Correction classifiers.

Everything is counted incrementally from the length of the current run of
equal labels: ``O(max_lag)`` per label, no stored sequence.

>>> td = TemporalDependence(max_lag=1)
>>> for y in "AABAAAB":
...     td.update(y)
>>> stats = td.get()
>>> stats["p_same"], stats["p_majority"], stats["dependent"]
(0.5, 0.7142857142857143, False)
>>> stats["transition"]["A"]
{'A': 0.6, 'B': 0.4}
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from itertools import pairwise
from typing import Any

from streameval.pipeline.streams.base import Dataset, Instance

Label = Hashable


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _majority(counts: dict[Label, int]) -> Label | None:
    """The most frequent label; ties go to the smallest by ``str``."""
    best: Label | None = None
    for label, c in counts.items():
        if best is None or c > counts[best] or (c == counts[best] and str(label) < str(best)):
            best = label
    return best


class TemporalDependence:
    """Online statistics of the temporal dependence of a label stream.

    Parameters
    ----------
    max_lag
        Largest ``l`` for which ``Delta(l)`` is computed.
    quick_n
        Number of first labels used by the quick test of sect. 7.
    """

    def __init__(self, max_lag: int = 5, quick_n: int = 100) -> None:
        if max_lag < 0:
            raise ValueError(f"max_lag must be >= 0, got {max_lag}")
        if quick_n < 2:
            raise ValueError(f"quick_n must be >= 2, got {quick_n}")
        self.max_lag = max_lag
        self.quick_n = quick_n
        self.n = 0
        self.counts: dict[Label, int] = {}
        self.pairs: dict[Label, dict[Label, int]] = {}
        # run[i][m - 1]: positions whose m previous labels are all i (m = 1..max_lag + 1);
        # stay[i][m - 1]: those among them with y_t = i.
        self.run: dict[Label, list[int]] = {}
        self.stay: dict[Label, list[int]] = {}
        self.last: Label | None = None
        self.run_length = 0
        self.quick_counts: dict[Label, int] = {}
        self.quick_same = 0

    def update(self, y: Label) -> None:
        """Add the next label of the stream."""
        last = self.last
        if self.n:
            row = self.pairs.setdefault(last, {})
            row[y] = row.get(y, 0) + 1
            depth = min(self.run_length, self.max_lag + 1)
            run, stay = self.run[last], self.stay[last]
            for m in range(depth):
                run[m] += 1
            if y == last:
                for m in range(depth):
                    stay[m] += 1
        if y not in self.counts:
            self.counts[y] = 0
            self.run[y] = [0] * (self.max_lag + 1)
            self.stay[y] = [0] * (self.max_lag + 1)
        self.counts[y] += 1
        if self.n < self.quick_n:
            self.quick_counts[y] = self.quick_counts.get(y, 0) + 1
            if self.n and y == last:
                self.quick_same += 1
        self.run_length = self.run_length + 1 if self.n and y == last else 1
        self.last = y
        self.n += 1

    def _conditional(self, label: Label) -> list[float | None]:
        """``P(y_t = label | m previous labels are label)`` for ``m = 0..max_lag + 1``."""
        prior = self.counts[label] / self.n
        run, stay = self.run[label], self.stay[label]
        return [prior, *(_ratio(s, r) for s, r in zip(stay, run, strict=True))]

    def quick_test(self) -> dict[str, Any]:
        """Majority Class vs Persistent on the first ``quick_n`` labels (sect. 7)."""
        m = min(self.n, self.quick_n)
        majority = _majority(self.quick_counts)
        p_maj = self.quick_counts[majority] / m if majority is not None else None
        p_per = self.quick_same / (m - 1) if m >= 2 else None
        if p_maj is None or p_per is None:
            wins, verdict = False, f"not enough labels ({m}) for the quick test"
        elif p_per > p_maj:
            wins = True
            verdict = (
                f"temporal dependence: on the first {m} labels Persistent ({p_per:.3f}) beats "
                f"Majority Class ({p_maj:.3f}); wrap learners with Temporally Augmented or "
                "Temporal Correction (sect. 7)"
            )
        else:
            wins = False
            verdict = (
                f"no sign of temporal dependence: on the first {m} labels Persistent "
                f"({p_per:.3f}) does not beat Majority Class ({p_maj:.3f})"
            )
        return {
            "n": m,
            "majority": majority,
            "p_majority": p_maj,
            "p_persistent": p_per,
            "persistent_wins": wins,
            "verdict": verdict,
        }

    def get(self) -> dict[str, Any]:
        """All statistics (see the module docstring) as a plain dict."""
        n = self.n
        labels = sorted(self.counts, key=str)
        priors = {y: self.counts[y] / n for y in labels} if n else {}
        majority = _majority(self.counts)
        p_majority = priors[majority] if majority is not None else None
        n_pairs = n - 1
        same = sum(self.pairs.get(y, {}).get(y, 0) for y in labels)
        p_same = same / n_pairs if n_pairs > 0 else None
        transition: dict[Label, dict[Label, float]] = {}
        for i in labels:
            row = self.pairs.get(i, {})
            total = sum(row.values())
            if total:
                transition[i] = {j: row.get(j, 0) / total for j in labels}
        p_given_run = {y: self._conditional(y) for y in labels}
        delta: dict[Label, list[float | None]] = {}
        for y, cond in p_given_run.items():
            delta[y] = [
                a - b if a is not None and b is not None else None for a, b in pairwise(cond)
            ]
        delta_paper = {y: [None if d is None else -d for d in v] for y, v in delta.items()}
        return {
            "n": n,
            "priors": priors,
            "majority": majority,
            "p_majority": p_majority,
            "p_same": p_same,
            "iid_baseline": sum(p * p for p in priors.values()) if n else None,
            "dependent": p_same is not None and p_majority is not None and p_same > p_majority,
            "transition": transition,
            "delta": delta,
            "delta_paper": delta_paper,
            "p_given_run": p_given_run,
            "quick_test": self.quick_test(),
        }


def diagnose(
    source: Dataset | Iterable[Instance], max_lag: int = 5, quick_n: int = 100
) -> dict[str, Any]:
    """:meth:`TemporalDependence.get` over a dataset's labels or over instances.

    A :class:`~streameval.pipeline.streams.base.Dataset` is read labels only (fast).

    >>> from streameval.pipeline.streams.datasets import load
    >>> diagnose(load("markov[k=2,p_stay=0.95,n=2000,seed=0]"))["dependent"]
    True
    """
    td = TemporalDependence(max_lag=max_lag, quick_n=quick_n)
    labels = source.iter_labels() if isinstance(source, Dataset) else (i.y for i in source)
    for y in labels:
        td.update(y)
    return td.get()
