"""What the leaves of a river Hoeffding tree answer for the instances routed to them.

:class:`LeafAnswers` is the part of
:class:`~streameval.pipeline.learners.tree_batch.TreeBatch` that predicts for one leaf and
its group of instances (steps 2 and 3 of the algorithm in
:mod:`~streameval.pipeline.learners.tree_batch`): ``mc`` leaves give their normalised class
counts, naive Bayes leaves sum log-priors and log-likelihoods from the leaf's attribute
observers and normalise them with river's log-sum-exp, and the leaves of
:class:`~river.tree.HoeffdingAdaptiveTreeClassifier` divide their answer by ``sum * error
* error``. A leaf or observer this module does not know gives ``None``: the tree's own
``predict_proba_one`` answers for its instances.

The numpy part uses the same operands and the same ``+ - * /`` in the same
order as river, but for ``(x - mu) ** 2``, which river computes with libm's
``pow`` and numpy as ``d * d``: the two differ in the last bit for about one
value in a thousand. Answers are therefore equal to ``predict_proba_one``'s to
the last bit for almost all instances and within about ``1e-14`` (relative)
for the others.

The Gaussian parameters of a leaf (mean, ``-2 * variance``, ``log`` of the
variance, per feature and class) are kept between calls. A leaf learns one
class at a time, which changes that class's weight and that class's
Gaussians only, so a call reads again only the classes whose weight changed
since the last one (all of them for a new leaf or new observers).

River's nominal observer creates an empty count table for a class the first
time a naive Bayes prediction asks about it; the batch does the same, so
that learning afterwards sees the same dict order as after a loop.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from river.proba import Gaussian
from river.tree.nodes.hatc_nodes import AdaLeafClassifier
from river.tree.nodes.htc_nodes import LeafMajorityClass, LeafNaiveBayes, LeafNaiveBayesAdaptive
from river.tree.splitter import GaussianSplitter
from river.tree.splitter.nominal_splitter_classif import NominalSplitterClassif
from river.utils.norm import normalize_values_in_dict
from streameval.pipeline.learners.frame import LazyFrame, scratch
from streameval.pipeline.learners.logmath import log_sum_exp_normalise, row_sums
from streameval.pipeline.learners.tree_rank import Quadratic

#: ``0.5 * log(2 pi)``, as river's ``Gaussian.log_pdf`` subtracts it.
HALF_LOG_TAU = 0.5 * math.log(math.tau)


@dataclass
class _Answer:
    """What one leaf predicts for its rows: ``values[r, j]`` (row ``r``) or
    ``row[j]`` (every row) for class ``keys[j]``; with ``log``, ``values`` are
    the naive Bayes log-likelihoods, not yet normalised."""

    keys: list[Hashable]
    values: np.ndarray | None = None
    row: list[float] | None = None
    log: bool = False

    @classmethod
    def majority(cls, stats: dict[Hashable, float]) -> _Answer:
        """The normalised class weights (river's ``normalize_values_in_dict``)."""
        dist = normalize_values_in_dict(stats, inplace=False)
        return cls(list(dist), row=[float(v) for v in dist.values()])


@dataclass
class _Nominal:
    """A nominal observer of a leaf and the log-likelihood vector of each value."""

    slot: int
    feature: Hashable
    splitter: NominalSplitterClassif
    cache: dict[Hashable, np.ndarray] = field(default_factory=dict)


@dataclass
class _LeafModel:
    """What naive Bayes needs from one leaf, read once per leaf state."""

    leaf: Any
    #: ``(id(splitters), len(splitters), classes)``: what the arrays are laid out for.
    layout: tuple[Any, ...]
    #: The class weights the parameters were read at.
    weights: tuple[float, ...]
    classes: list[Hashable]
    prior: np.ndarray
    positive: list[Hashable]
    n_slots: int
    gauss_slots: np.ndarray
    gauss_range: slice | None
    gauss_features: list[Hashable]
    gauss_splitters: list[GaussianSplitter]
    #: ``(G, K, 1)`` arrays, ``[g, k]`` for Gaussian feature ``g`` and class ``k``.
    mu: np.ndarray
    minus_two_var: np.ndarray
    half_log_var: np.ndarray
    valid: np.ndarray
    #: ``valid`` and the class has a positive weight, as 0.0 / 1.0.
    keep: np.ndarray
    nominal: list[_Nominal]
    #: The leaf's observers when the model was read (a model whose observers are not the
    #: leaf's any more is read again, whatever its weights say).
    observers: list[Any] = field(default_factory=list)
    #: The votes as a quadratic form (:mod:`~streameval.pipeline.learners.tree_rank`),
    #: made on demand at the current weights.
    quad: Quadratic | None = None


def _gaussian_params(dist: Any) -> tuple[float, float, float, bool] | None:
    """``(mu, -2 var, log(var) / 2, usable)`` of a class's Gaussian in an
    observer, as ``Gaussian.log_pdf`` uses them (``usable`` false: river adds
    nothing for the class); ``None`` for an estimator this module does not know."""
    if dist is None:
        return 0.0, -1.0, 0.0, False
    if type(dist) is not Gaussian:
        return None
    var = dist._var
    n = var.mean.n
    if n > var.ddof:
        variance = var._S / (n - var.ddof)
        if variance > 0.0:
            return var.mean._mean, -2.0 * variance, 0.5 * math.log(variance), True
    return 0.0, -1.0, 0.0, False


def _gaussian_column(
    splitters: Sequence[GaussianSplitter], label: Hashable
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_gaussian_params` of class ``label`` in every observer, as four arrays
    (the same numbers: the divisions in numpy, the logarithms with ``math``)."""
    stats = []
    for splitter in splitters:
        dist = splitter._att_dist_per_class.get(label)
        if dist is None:
            stats.append((0.0, 0.0, 0.0, 1.0))  # n <= ddof: no usable Gaussian
        elif type(dist) is Gaussian:
            var = dist._var
            stats.append((var.mean.n, var.mean._mean, var._S, var.ddof))
        else:
            return None
    n, mean, s, ddof = np.array(stats, dtype=float).reshape(-1, 4).T
    seen = n > ddof
    variance = np.divide(s, n - ddof, out=np.zeros(len(n)), where=seen)
    valid = seen & (variance > 0.0)
    half_log = [
        0.5 * math.log(v) if ok else 0.0
        for v, ok in zip(variance.tolist(), valid.tolist(), strict=True)
    ]
    return (
        np.where(valid, mean, 0.0),
        np.where(valid, -2.0 * variance, -1.0),
        np.array(half_log),
        valid,
    )


class LeafAnswers:
    """The answers of single leaves for groups of rows, and the naive Bayes parameters
    of each leaf kept between calls (``_cache``, by ``id`` of the leaf).

    The base of :class:`~streameval.pipeline.learners.tree_batch.TreeBatch`, which
    routes the rows to their leaves, creates the cache and drops it when pickled.
    """

    _cache: dict[int, _LeafModel]

    # ------------------------------------------------------------------ leaves

    def _plain_leaf(
        self,
        model: Any,
        leaf: Any,
        rows: list[int],
        xs: Sequence[dict[str, Any]],
        frames: LazyFrame,
        log: bool = False,
    ) -> _Answer | None:
        """``leaf.prediction(x, tree=model)`` for each row (``None``: leave it to river);
        ``log``: naive Bayes answers as log-likelihoods (see :class:`_Answer`)."""
        kind = type(leaf)
        if kind is LeafMajorityClass:
            naive = False
        elif kind is LeafNaiveBayes:
            naive = leaf.is_active() and leaf.total_weight >= model.nb_threshold
        elif kind is LeafNaiveBayesAdaptive:
            naive = leaf.is_active() and leaf._nb_correct_weight >= leaf._mc_correct_weight
        else:
            return None
        if naive:
            return self._naive_bayes(leaf, rows, xs, frames, log=log)
        return _Answer.majority(leaf.stats)

    def _adaptive_leaf(
        self,
        model: Any,
        leaf: Any,
        rows: list[int],
        xs: Sequence[dict[str, Any]],
        frames: LazyFrame,
    ) -> _Answer | None:
        """``AdaLeafClassifier.prediction`` for each row (``None``: leave it to river)."""
        if type(leaf) is not AdaLeafClassifier or not leaf.stats:
            return None
        option = model.leaf_prediction
        if not leaf.is_active() or option == model._MAJORITY_CLASS:
            naive = False
        elif option == model._NAIVE_BAYES:
            naive = leaf.total_weight >= model.nb_threshold
        else:
            naive = leaf._nb_correct_weight >= leaf._mc_correct_weight
        answer = (
            self._naive_bayes(leaf, rows, xs, frames) if naive else _Answer.majority(leaf.stats)
        )
        if answer is None:
            return None
        # dist / (sum(dist) * error * error), unless that factor is 0 or NaN.
        error = leaf._mean_error.get()
        if answer.row is not None:
            factor = sum(answer.row) * error * error
            if factor == 0 or math.isnan(factor):
                return answer
            scale = 1 / factor
            return _Answer(answer.keys, row=[v * scale for v in answer.row])
        assert answer.values is not None
        factor = row_sums(answer.values) * error * error
        ok = (factor != 0) & ~np.isnan(factor)
        if ok.any():
            scale = np.ones_like(factor)
            scale[ok] = 1 / factor[ok]
            values = np.array(answer.values)
            np.multiply(values, scale[:, None], out=values, where=ok[:, None])
            answer = _Answer(answer.keys, values)
        return answer

    # ------------------------------------------------------------------ naive Bayes

    def _leaf_model(self, leaf: Any) -> _LeafModel | None:
        """The naive Bayes parameters of ``leaf``; ``None`` if some observer is
        of a type this module does not know.

        Kept between calls: a leaf learns one class at a time, which changes
        that class's weight and the Gaussians of that class only, so only the
        classes whose weight changed are read again.
        """
        splitters = leaf.splitters or {}
        classes = tuple(leaf.stats)
        weights = tuple(leaf.stats.values())
        layout = (id(leaf.splitters), len(splitters), classes)
        cached = self._cache.get(id(leaf))
        if (
            cached is None
            or cached.leaf is not leaf
            or cached.layout != layout
            or not all(map(operator.is_, cached.observers, splitters.values()))
        ):
            cached = self._build_leaf_model(leaf, layout)
            if cached is None:
                return None
            self._cache[id(leaf)] = cached
        elif cached.weights != weights:
            changed = [
                j for j, (w, v) in enumerate(zip(weights, cached.weights, strict=True)) if w != v
            ]
            for j in changed:
                column = _gaussian_column(cached.gauss_splitters, classes[j])
                if column is None:
                    return None
                (
                    cached.mu[:, j, 0],
                    cached.minus_two_var[:, j, 0],
                    cached.half_log_var[:, j, 0],
                    cached.valid[:, j, 0],
                ) = column
            for nominal in cached.nominal:
                nominal.cache.clear()
        else:
            return cached
        total = sum(weights)
        cached.weights = weights
        cached.prior = np.array([math.log(w / total) if w > 0 else 0.0 for w in weights])
        cached.positive = [c for c, w in zip(classes, weights, strict=True) if w > 0]
        is_positive = np.array([w > 0 for w in weights], dtype=bool)
        cached.keep = (cached.valid & is_positive[None, :, None]).astype(float)
        return cached

    @staticmethod
    def _build_leaf_model(leaf: Any, layout: tuple[Any, ...]) -> _LeafModel | None:
        classes = list(layout[2])
        splitters = leaf.splitters or {}
        gauss_slots: list[int] = []
        gauss_features: list[Hashable] = []
        gauss_splitters: list[GaussianSplitter] = []
        params: list[list[tuple[float, float, float, bool]]] = []
        nominal: list[_Nominal] = []
        for slot, (feature, splitter) in enumerate(splitters.items()):
            kind = type(splitter)
            if kind is NominalSplitterClassif:
                nominal.append(_Nominal(slot, feature, splitter))
                continue
            if kind is not GaussianSplitter:
                return None
            dists = splitter._att_dist_per_class
            row = [_gaussian_params(dists.get(c)) for c in classes]
            if any(p is None for p in row):
                return None
            gauss_slots.append(slot)
            gauss_features.append(feature)
            gauss_splitters.append(splitter)
            params.append(row)  # type: ignore[arg-type]
        shape = (len(gauss_slots), len(classes), 1)
        table = np.array(params, dtype=float).reshape(*shape[:2], 4)
        contiguous = bool(gauss_slots) and gauss_slots == list(
            range(gauss_slots[0], gauss_slots[-1] + 1)
        )
        return _LeafModel(
            leaf=leaf,
            layout=layout,
            weights=(),
            classes=classes,
            prior=np.zeros(len(classes)),
            positive=[],
            n_slots=len(splitters),
            gauss_slots=np.array(gauss_slots, dtype=int),
            gauss_range=slice(gauss_slots[0], gauss_slots[-1] + 1) if contiguous else None,
            gauss_features=gauss_features,
            gauss_splitters=gauss_splitters,
            mu=table[:, :, 0].reshape(shape).copy(),
            minus_two_var=table[:, :, 1].reshape(shape).copy(),
            half_log_var=table[:, :, 2].reshape(shape).copy(),
            valid=table[:, :, 3].reshape(shape).astype(bool),
            keep=np.zeros(shape),
            nominal=nominal,
            observers=list(splitters.values()),
        )

    @staticmethod
    def _nominal_vector(model: _LeafModel, nominal: _Nominal, value: Hashable) -> np.ndarray:
        """What ``value`` of a nominal feature adds to each class's log-likelihood."""
        vector = nominal.cache.get(value)
        if vector is not None:
            return vector
        tables = nominal.splitter._att_dist_per_class
        terms = []
        for c in model.classes:
            term = 0.0
            table = tables.get(c)
            if c in model.positive and table is not None and value in table:
                try:
                    p = table[value] / sum(table.values())
                except ZeroDivisionError:
                    p = 0.0
                term = math.log(p) if p > 0 else 0.0
            terms.append(term)
        vector = nominal.cache[value] = np.array(terms, dtype=float)
        return vector

    def _naive_bayes(
        self,
        leaf: Any,
        rows: list[int],
        xs: Sequence[dict[str, Any]],
        frames: LazyFrame,
        log: bool = False,
    ) -> _Answer | None:
        """``do_naive_bayes_prediction(x, leaf.stats, leaf.splitters)`` for each row
        (``log``: the log-likelihoods, before river's normalisation)."""
        stats = leaf.stats
        if not stats or sum(stats.values()) == 0:
            return _Answer([], row=[])
        model = self._leaf_model(leaf)
        if model is None:
            return None
        g, k = len(rows), len(model.classes)
        # terms[s, c, r]: what feature slot s adds to class c's log-likelihood for row r.
        terms = scratch("tree-terms", (max(model.n_slots, 1), k, g))
        if not model.n_slots:
            terms[0] = 0.0
        if len(model.gauss_features):
            frame = frames.frame
            if frame.odd:
                return None  # a value of a type river may treat otherwise: let river do it
            columns = []
            for feature in model.gauss_features:
                if feature in frame.text:
                    return None  # river would fail on a str; let it
                columns.append(frame.index.get(feature, -1))
            cols = np.array(columns, dtype=int)
            known = cols >= 0
            index = np.array(rows, dtype=int)[None, :]
            safe = np.where(known, cols, 0)[:, None]
            values = frame.values[index, safe]  # (G, g)
            present = frame.present[index, safe] & known[:, None]
            if model.gauss_range is not None:
                gauss = terms[model.gauss_range]
            else:
                gauss = scratch("tree-gauss", (len(model.gauss_features), k, g))
            # River's Gaussian.log_pdf: (x - mu) ** 2 / (-2 var) - log(2 pi) / 2 - log(var) / 2,
            # times 0 where river adds nothing (class without a usable Gaussian, feature absent).
            with np.errstate(over="ignore", invalid="ignore"):
                np.subtract(values[:, None, :], model.mu, out=gauss)
                np.multiply(gauss, gauss, out=gauss)
                np.divide(gauss, model.minus_two_var, out=gauss)
                np.subtract(gauss, HALF_LOG_TAU, out=gauss)
                np.subtract(gauss, model.half_log_var, out=gauss)
                np.multiply(gauss, model.keep, out=gauss)
                if not present.all():
                    np.multiply(gauss, present[:, None, :], out=gauss)
            if model.gauss_range is None:
                terms[model.gauss_slots] = gauss
        for nominal in model.nominal:
            feature = nominal.feature
            used = False
            zero = np.zeros(k)
            block = []
            for i in rows:
                x = xs[i]
                if feature in x:
                    used = True
                    block.append(self._nominal_vector(model, nominal, x[feature]))
                else:
                    block.append(zero)
            if used:
                tables = nominal.splitter._att_dist_per_class
                for c in model.positive:  # river's cond_proba creates these entries
                    tables[c]
            terms[nominal.slot] = np.array(block).T
        # River adds the terms one by one to the log-prior: the same order here.
        terms[0] += model.prior[:, None]
        votes = np.add.reduce(terms, axis=0).T  # (g, k)
        if not np.isfinite(votes).all():
            return None  # an overflow river skips term by term: let river do it
        if log:
            return _Answer(model.classes, votes, log=True)
        return _Answer(model.classes, log_sum_exp_normalise(votes))

    def _trim(self, groups: dict[int, tuple[Any, list[int]]]) -> None:
        """Forget the parameters of leaves not used lately once the cache grows."""
        if len(self._cache) > 2 * len(groups) + 256:
            self._cache = {key: m for key, m in self._cache.items() if key in groups}
