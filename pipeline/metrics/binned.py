"""Binned metrics for continuous re-evaluation: one metric set per bin.

Grzenda, Gomes & Bifet, *Delayed labelling evaluation for data streams*
(``delayed-labelling-continuous-reevaluation.txt``), sect. 3: every labelled
instance contributes one (true label, prediction) pair to each bin
``b = 0, ..., B+1`` (first-time prediction, ``B`` periodic bins, test-then-train
prediction), so all bins share the true labels and differ in the predictions.

:class:`BinnedClassificationMetrics` equals ``n_bins`` independent
:class:`~streameval.pipeline.metrics.classification.ClassificationMetrics` fed bin-wise
(same estimators, same forgetting, same nan rules), but one update costs a few
numpy operations over all bins: the true-label marginal and ``n`` are shared,
each bin keeps its prediction marginal (a ``(n_bins, k)`` array that grows
with the classes) and three agreement counts (prediction, No-Change reference
and Majority reference against the true label). The full ``(n_bins, k, k)``
confusion tensor is not needed for the statistics returned and is not kept.

:class:`BinnedRegressionMetrics` does the same for MAE and RMSE.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from streameval.pipeline.metrics.classification import RESCALE_ABOVE
from streameval.pipeline.metrics.forgetting import Forgetting


def _ratio(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    """Element-wise ``num / den`` with nan where the denominator is 0."""
    den = np.broadcast_to(np.asarray(den, dtype=float), np.shape(num))
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


class BinnedClassificationMetrics:
    """Accuracy and the Kappa family (eq. 10-14 of the temporal-dependence paper) per bin.

    ``update(y_true, preds, per_refs, maj_refs)``: one prediction per bin
    (``None`` allowed, a wrong prediction outside the prediction marginal), and
    per bin the No-Change and the Majority baseline predictions it is compared
    with.

    >>> m = BinnedClassificationMetrics(n_bins=2)
    >>> for y, preds in [("a", ["b", "a"]), ("b", [None, "b"])]:
    ...     m.update(y, preds, per_refs=["a", "a"], maj_refs=["a", "a"])
    >>> m.get()["accuracy"], m.get()["kappa"]
    ([0.0, 1.0], [-0.3333333333333333, 1.0])
    """

    def __init__(self, n_bins: int, forgetting: Forgetting = Forgetting.whole()) -> None:  # noqa: B008
        if n_bins < 1:
            raise ValueError(f"n_bins must be >= 1, got {n_bins}")
        self.n_bins = n_bins
        self.forgetting = forgetting
        self._fading = forgetting.kind == "fading"
        self._alpha = float(forgetting.alpha) if self._fading else 1.0  # type: ignore[arg-type]
        self._size = int(forgetting.window) if forgetting.kind == "window" else 0  # type: ignore[arg-type]
        self._ring: list[tuple[int, np.ndarray, np.ndarray] | None] | None = (
            [None] * self._size if self._size else None
        )
        self._pos = 0
        self._g = 1.0  # weight of the next observation (lazy fading scale)
        self._last = 1.0  # weight of the newest observation
        self._index: dict[Hashable, int] = {None: 0}  # column 0: no prediction
        self._labels: list[Hashable] = [None]
        self._rows = np.arange(n_bins)
        self._n = 0.0
        self._true = np.zeros(8)  # weight per class column
        self._pred = np.zeros((n_bins, 8))  # per-bin prediction marginal
        self._agree = np.zeros((3, n_bins))  # [pred, per_ref, maj_ref] == y_true

    def _column(self, label: Hashable) -> int:
        col = self._index.get(label)
        if col is None:
            col = len(self._labels)
            self._index[label] = col
            self._labels.append(label)
            if col == self._true.shape[0]:
                self._true = np.concatenate([self._true, np.zeros(col)])
                self._pred = np.concatenate([self._pred, np.zeros((self.n_bins, col))], axis=1)
        return col

    def update(
        self,
        y_true: Hashable,
        preds: Sequence[Hashable | None],
        per_refs: Sequence[Hashable | None],
        maj_refs: Sequence[Hashable | None],
    ) -> None:
        if y_true is None:
            raise ValueError("y_true must be a label, got None")
        nb = self.n_bins
        if not len(preds) == len(per_refs) == len(maj_refs) == nb:
            raise ValueError(f"expected {nb} predictions and references per update")
        # every label (predicted, reference or true) gets a column; column 0 is None
        labels = [*preds, *per_refs, *maj_refs]
        index = self._index
        try:
            codes = list(map(index.__getitem__, labels))
        except KeyError:
            codes = [self._column(label) for label in labels]
        yi = index.get(y_true) or self._column(y_true)
        code = np.array(codes, dtype=np.intp).reshape(3, nb)
        cols = code[0]
        agree = code == yi  # [pred, per_ref, maj_ref] == y_true per bin
        ring = self._ring
        if ring is not None:
            pos = self._pos
            old = ring[pos]
            if old is not None:
                # Algorithm 2: subtract the observation leaving the window
                self._n -= 1.0
                self._true[old[0]] -= 1.0
                self._pred[self._rows, old[1]] -= 1.0
                self._agree -= old[2]
            ring[pos] = (yi, cols, agree)
            pos += 1
            self._pos = 0 if pos == self._size else pos
        g = self._g
        self._n += g
        self._true[yi] += g
        self._pred[self._rows, cols] += g
        if g == 1.0:
            self._agree += agree
        else:
            self._agree += g * agree
        if self._fading:
            self._last = g
            if g > RESCALE_ABOVE:
                self._n /= g
                self._true /= g
                self._pred /= g
                self._agree /= g
                self._last = 1.0
            self._g = self._last / self._alpha

    @property
    def n(self) -> float:
        """Effective number of observations (shared by all bins)."""
        return self._n / self._last

    def get(self) -> dict[str, list[float]]:
        """Per-bin ``accuracy``, ``kappa``, ``kappa_per``, ``kappa_m``, ``kappa_plus``, ``n``."""
        nb = self.n_bins
        total = self._n
        n = self.n
        if total <= 0.0:
            keys = ("accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus")
            return {"n": [n] * nb} | {key: [math.nan] * nb for key in keys}
        k = len(self._labels)
        p, p_per, p_maj = self._agree / total
        p_ran = (self._pred[:, :k] @ self._true[:k]) / (total * total)
        kappa = _ratio(p - p_ran, 1.0 - p_ran)
        kappa_per = _ratio(p - p_per, 1.0 - p_per)
        kappa_m = _ratio(p - p_maj, 1.0 - p_maj)
        # eq. 14; fmax drops nan, so nan inputs are put back explicitly
        kappa_plus = np.sqrt(np.fmax(0.0, kappa) * np.fmax(0.0, kappa_per))
        kappa_plus[np.isnan(kappa) | np.isnan(kappa_per)] = np.nan
        return {
            "n": [n] * nb,
            "accuracy": p.tolist(),
            "kappa": kappa.tolist(),
            "kappa_per": kappa_per.tolist(),
            "kappa_m": kappa_m.tolist(),
            "kappa_plus": kappa_plus.tolist(),
        }


class BinnedRegressionMetrics:
    """MAE and RMSE per bin, with the chosen forgetting.

    ``update(y_true, preds)`` with one prediction per bin. A ``None``
    prediction (nothing could be predicted) adds nothing to its bin's errors
    nor to its bin's ``n``, but still occupies a slot of the window, so every
    bin covers the same labelled instances. Equals ``n_bins`` independent
    :class:`~streameval.pipeline.metrics.regression.RegressionMetrics`.

    >>> m = BinnedRegressionMetrics(n_bins=2)
    >>> m.update(1.0, [2.0, None]); m.update(3.0, [0.0, 3.5])
    >>> m.get()
    {'n': [2.0, 1.0], 'mae': [2.0, 0.5], 'rmse': [2.23606797749979, 0.5]}
    """

    def __init__(self, n_bins: int, forgetting: Forgetting = Forgetting.whole()) -> None:  # noqa: B008
        if n_bins < 1:
            raise ValueError(f"n_bins must be >= 1, got {n_bins}")
        self.n_bins = n_bins
        self.forgetting = forgetting
        self._alpha = float(forgetting.alpha) if forgetting.kind == "fading" else 1.0  # type: ignore[arg-type]
        self._size = int(forgetting.window) if forgetting.kind == "window" else 0  # type: ignore[arg-type]
        self._ring: list[np.ndarray | None] | None = [None] * self._size if self._size else None
        self._pos = 0
        self._sums = np.zeros((3, n_bins))  # [has prediction, |e|, e^2]

    def update(self, y_true: float, preds: Sequence[float | None]) -> None:
        if len(preds) != self.n_bins:
            raise ValueError(f"expected {self.n_bins} predictions per update")
        has = np.array([p is not None for p in preds], dtype=float)
        err = np.array([y_true - p if p is not None else 0.0 for p in preds], dtype=float)
        row = np.stack([has, np.abs(err), err * err])
        ring = self._ring
        if ring is not None:
            old = ring[self._pos]
            ring[self._pos] = row
            self._pos = (self._pos + 1) % self._size
            self._sums += row
            if old is not None:
                self._sums -= old
        elif self._alpha != 1.0:
            self._sums *= self._alpha  # Algorithm 3
            self._sums += row
        else:
            self._sums += row

    def get(self) -> dict[str, list[float]]:
        has, sum_abs, sum_sq = self._sums
        mae = _ratio(sum_abs, has)
        mse = _ratio(np.fmax(sum_sq, 0.0), has)
        return {"n": has.tolist(), "mae": mae.tolist(), "rmse": np.sqrt(mse).tolist()}
