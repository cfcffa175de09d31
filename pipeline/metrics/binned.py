"""Binned metrics for continuous re-evaluation: one metric set per bin.

Grzenda, Gomes & Bifet, *Delayed labelling evaluation for data streams*
(``delayed-labelling-continuous-reevaluation.txt``), sect. 3: every labelled
instance contributes one (true label, prediction) pair to each bin
``b = 0, ..., B+1`` (first-time prediction, ``B`` periodic bins, test-then-train
prediction), so all bins share the true labels and differ in the predictions.

:class:`BinnedClassificationMetrics` equals ``n_bins`` independent
:class:`~streameval.pipeline.metrics.classification.ClassificationMetrics` fed bin-wise
(same estimators, same forgetting, same nan rules), but one update costs a few
numpy operations over all bins: :class:`BinnedConfusion` shares the true-label
marginal and ``n``, and keeps for each bin its prediction marginal (a
``(n_bins, k)`` array that grows with the classes) and three agreement counts
(prediction, No-Change reference and Majority reference against the true label).
The full ``(n_bins, k, k)`` confusion tensor is not needed for the statistics
returned and is not kept.

:class:`BinnedRegressionMetrics` does the same for MAE and RMSE (:class:`BinnedErrors`).

Both states take *encoded* observations (``encode``: label codes, agreement flags,
error rows), so that the window of
:class:`~streameval.pipeline.metrics.rolling.Rolling` stores and reverts them without
encoding them again; the forgetting is ``Forgetting.wrap`` as for every metric.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import chain
from typing import Any

import numpy as np
from streameval.pipeline.metrics.forgetting import Forgetting

#: One encoded observation of :class:`BinnedConfusion`: the true label's column, the
#: predictions' columns per bin, and ``[pred, per_ref, maj_ref] == y_true`` per bin.
Coded = tuple[int, np.ndarray, np.ndarray]


def _ratio(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    """Element-wise ``num / den`` with nan where the denominator is 0."""
    den = np.broadcast_to(np.asarray(den, dtype=float), np.shape(num))
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


class BinnedConfusion:
    """Per-bin prediction marginals and agreement counts over shared true labels.

    ``update(encode(y_true, preds, per_refs, maj_refs), w)``; ``revert`` alike; lazy
    fading through ``unit`` and ``rescale`` (see :mod:`~streameval.pipeline.metrics.faded`).

    >>> state = BinnedConfusion(n_bins=2)
    >>> state.update(state.encode("a", ["b", "a"], ["a", "a"], ["a", "a"]))
    >>> state.agree.tolist()  # [pred, per_ref, maj_ref] == y_true, per bin
    [[0.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
    """

    def __init__(self, n_bins: int) -> None:
        if n_bins < 1:
            raise ValueError(f"n_bins must be >= 1, got {n_bins}")
        self.n_bins = n_bins
        self.unit = 1.0  # the weight one observation made now counts as
        self._index: dict[Hashable, int] = {None: 0}  # column 0: no prediction
        self.labels: list[Hashable] = [None]
        self._rows = np.arange(n_bins)
        self.total = 0.0
        self.true = np.zeros(8)  # weight per class column
        self.pred = np.zeros((n_bins, 8))  # per-bin prediction marginal
        self.agree = np.zeros((3, n_bins))  # [pred, per_ref, maj_ref] == y_true

    def _column(self, label: Hashable) -> int:
        col = self._index.get(label)
        if col is None:
            col = len(self.labels)
            self._index[label] = col
            self.labels.append(label)
            if col == self.true.shape[0]:
                self.true = np.concatenate([self.true, np.zeros(col)])
                self.pred = np.concatenate([self.pred, np.zeros((self.n_bins, col))], axis=1)
        return col

    def encode(
        self,
        y_true: Hashable,
        preds: Sequence[Hashable | None],
        per_refs: Sequence[Hashable | None],
        maj_refs: Sequence[Hashable | None],
    ) -> Coded:
        """Give every label (predicted, reference or true) a column; column 0 is None."""
        if y_true is None:
            raise ValueError("y_true must be a label, got None")
        nb = self.n_bins
        if not len(preds) == len(per_refs) == len(maj_refs) == nb:
            raise ValueError(f"expected {nb} predictions and references per update")
        labels = chain(preds, per_refs, maj_refs)
        index = self._index
        try:
            code = np.fromiter(map(index.__getitem__, labels), dtype=np.intp, count=3 * nb)
        except KeyError:  # a label never seen: give it a column
            labels = chain(preds, per_refs, maj_refs)
            code = np.fromiter(map(self._column, labels), dtype=np.intp, count=3 * nb)
        yi = index.get(y_true) or self._column(y_true)
        code = code.reshape(3, nb)
        return yi, code[0], code == yi

    def update(self, coded: Coded, w: float = 1.0) -> None:
        yi, cols, agree = coded
        self.total += w
        self.true[yi] += w
        self.pred[self._rows, cols] += w
        if w == 1.0:
            self.agree += agree
        else:
            self.agree += w * agree

    def revert(self, coded: Coded, w: float = 1.0) -> None:
        yi, cols, agree = coded
        self.total -= w
        self.true[yi] -= w
        self.pred[self._rows, cols] -= w
        if w == 1.0:
            self.agree -= agree
        else:
            self.agree -= w * agree

    def rescale(self, g: float) -> None:
        """Divide every stored weight (and ``unit``) by ``g``."""
        self.total /= g
        self.true /= g
        self.pred /= g
        self.agree /= g
        self.unit /= g

    @property
    def n(self) -> float:
        """Effective number of observations (shared by all bins)."""
        return self.total / self.unit

    def get(self) -> dict[str, list[float]]:
        """Per-bin ``accuracy``, ``kappa``, ``kappa_per``, ``kappa_m``, ``kappa_plus``, ``n``."""
        nb = self.n_bins
        total = self.total
        n = self.n
        if total <= 0.0:
            keys = ("accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus")
            return {"n": [n] * nb} | {key: [math.nan] * nb for key in keys}
        k = len(self.labels)
        p, p_per, p_maj = self.agree / total
        p_ran = (self.pred[:, :k] @ self.true[:k]) / (total * total)
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
        self.n_bins = n_bins
        self.forgetting = forgetting
        self.state = BinnedConfusion(n_bins)
        self._feed = forgetting.wrap(self.state)

    def update(
        self,
        y_true: Hashable,
        preds: Sequence[Hashable | None],
        per_refs: Sequence[Hashable | None],
        maj_refs: Sequence[Hashable | None],
    ) -> None:
        self._feed.update(self.state.encode(y_true, preds, per_refs, maj_refs))

    @property
    def n(self) -> float:
        """Effective number of observations (shared by all bins)."""
        return self.state.n

    def get(self) -> dict[str, list[float]]:
        """Per-bin ``accuracy``, ``kappa``, ``kappa_per``, ``kappa_m``, ``kappa_plus``, ``n``."""
        return self.state.get()


class BinnedErrors:
    """Per-bin sums of ``[has prediction, |e|, e^2]``, faded eagerly (Algorithm 3).

    A window reverts a row after adding the new one (``replace``).

    >>> e = BinnedErrors(n_bins=2)
    >>> e.update(e.encode(1.0, [2.0, None])); e.update(e.encode(3.0, [0.0, 3.5]))
    >>> e.get()
    {'n': [2.0, 1.0], 'mae': [2.0, 0.5], 'rmse': [2.23606797749979, 0.5]}
    """

    eager_fading = True

    def __init__(self, n_bins: int) -> None:
        if n_bins < 1:
            raise ValueError(f"n_bins must be >= 1, got {n_bins}")
        self.n_bins = n_bins
        self.sums = np.zeros((3, n_bins))  # [has prediction, |e|, e^2]

    def encode(self, y_true: float, preds: Sequence[float | None]) -> np.ndarray:
        if len(preds) != self.n_bins:
            raise ValueError(f"expected {self.n_bins} predictions per update")
        has = np.array([p is not None for p in preds], dtype=float)
        err = np.array([y_true - p if p is not None else 0.0 for p in preds], dtype=float)
        return np.stack([has, np.abs(err), err * err])

    def update(self, row: np.ndarray, w: float = 1.0) -> None:
        self.sums += row if w == 1.0 else w * row

    def revert(self, row: np.ndarray, w: float = 1.0) -> None:
        self.sums -= row if w == 1.0 else w * row

    def replace(self, old: tuple[np.ndarray], new: tuple[np.ndarray]) -> None:
        self.sums += new[0]
        self.sums -= old[0]

    def fade(self, alpha: float) -> None:
        self.sums *= alpha

    def get(self) -> dict[str, list[float]]:
        has, sum_abs, sum_sq = self.sums
        mae = _ratio(sum_abs, has)
        mse = _ratio(np.fmax(sum_sq, 0.0), has)
        return {"n": has.tolist(), "mae": mae.tolist(), "rmse": np.sqrt(mse).tolist()}


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
        self.n_bins = n_bins
        self.forgetting = forgetting
        self.state = BinnedErrors(n_bins)
        self._feed: Any = forgetting.wrap(self.state)

    def update(self, y_true: float, preds: Sequence[float | None]) -> None:
        self._feed.update(self.state.encode(y_true, preds))

    def get(self) -> dict[str, list[float]]:
        return self.state.get()
