"""Batched prediction for river's Hoeffding trees, and the numeric view of a batch.

Continuous re-evaluation asks every learner for the probabilities of many
pending instances at once. River predicts one dict at a time; for the
Hoeffding trees with naive Bayes leaves that costs one Python call per
feature and class for every instance. :class:`TreeBatch` gives the same
answers for a whole batch:

1. every instance is routed to its leaf by the tree's own branch objects
   (``next`` and, when the split feature is missing or its value has no
   branch, ``most_common_path``, as river's ``Branch.walk`` does);
2. the instances are grouped by leaf and each leaf predicts for its group:
   ``mc`` leaves give their normalised class counts (river's own
   ``normalize_values_in_dict``), naive Bayes leaves (``nb``, and ``nba`` when
   river's rule ``nb_correct_weight >= mc_correct_weight`` picks naive Bayes)
   sum, in river's order, the log-prior of each class and the log-likelihood
   of each feature from the leaf's attribute observers: the Gaussian
   ``log_pdf`` of a numeric observer (a term that is ``-inf`` or undefined is
   left out), ``log(count / total)`` of a nominal observer (a value never seen
   with the class contributes nothing, as in river);
3. the log-likelihoods are normalised with river's log-sum-exp, using
   ``math.exp``/``math.log`` element by element.

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

:class:`~river.tree.HoeffdingAdaptiveTreeClassifier` is done the same way: an
instance collects the leaves of the alternate trees met on its path (twice
when ``walk`` visits a node twice, as it does after a missing feature) and
its own leaf, each leaf's answer is divided by ``sum * error * error`` and
the sum renormalised, as river's ``predict_proba_one`` does. Whatever this
module does not know exactly (another leaf or observer type, an alternate
tree that is a subtree, a leaf without statistics, a value of an unexpected
type) is predicted by the model's own ``predict_proba_one``.

River's nominal observer creates an empty count table for a class the first
time a naive Bayes prediction asks about it; the batch does the same, so
that learning afterwards sees the same dict order as after a loop.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from river import tree as river_tree
from river.proba import Gaussian
from river.tree.nodes.branch import DTBranch, NumericBinaryBranch
from river.tree.nodes.hatc_nodes import AdaBranchClassifier, AdaLeafClassifier
from river.tree.nodes.htc_nodes import LeafMajorityClass, LeafNaiveBayes, LeafNaiveBayesAdaptive
from river.tree.splitter import GaussianSplitter
from river.tree.splitter.nominal_splitter_classif import NominalSplitterClassif
from river.utils.norm import normalize_values_in_dict
from streameval.pipeline.learners.base import argmax, argmax_rows
from streameval.pipeline.learners.tree_rank import Quadratic
from streameval.pipeline.learners.tree_round import TreeRound

Proba = dict[Hashable, float]

#: ``0.5 * log(2 pi)``, as river's ``Gaussian.log_pdf`` subtracts it.
HALF_LOG_TAU = 0.5 * math.log(math.tau)

#: Value types read as numbers into a :class:`NumericFrame`.
_NUMBER_TYPES = (float, int, bool, np.floating, np.integer)


def is_number_type(kind: type) -> bool:
    """Whether values of type ``kind`` go into the numeric matrix.

    >>> is_number_type(float), is_number_type(bool), is_number_type(str)
    (True, True, False)
    """
    return kind is not np.bool_ and issubclass(kind, _NUMBER_TYPES)


@dataclass(frozen=True, eq=False)
class _Shape:
    """Where the numbers and the strings are in instances with given keys and value types."""

    numeric_keys: tuple[str, ...]
    getter: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None
    text_keys: tuple[str, ...]
    text_getter: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None
    odd: bool


@dataclass
class _Layout:
    """The instances of one batch that have one shape, in one block."""

    shape: _Shape
    columns: list[int]
    rows: list[int] = field(default_factory=list)
    values: list[tuple[Any, ...]] = field(default_factory=list)


def _getter(positions: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """``vals -> tuple(vals[p] for p in positions)``, fast."""
    if len(positions) == 1:
        (only,) = positions
        return lambda vals: (vals[only],)
    if not positions:
        return lambda vals: ()
    return operator.itemgetter(*positions)  # type: ignore[return-value]


#: Shapes seen lately, by ``(keys, value types)``: a stream has few of them.
_SHAPES: dict[tuple[tuple[str, ...], tuple[type, ...]], _Shape] = {}
_MAX_SHAPES = 1024


def _shape(keys: tuple[str, ...], kinds: tuple[type, ...]) -> _Shape:
    """The shape of instances with these keys and value types (remembered)."""
    shape = _SHAPES.get((keys, kinds))
    if shape is not None:
        return shape
    numeric: list[int] = []
    text: list[int] = []
    odd = False
    for pos, kind in enumerate(kinds):
        if is_number_type(kind):
            numeric.append(pos)
        elif kind is str:
            text.append(pos)
        else:
            odd = True
    shape = _Shape(
        numeric_keys=tuple(keys[p] for p in numeric),
        getter=None if len(numeric) == len(keys) else _getter(numeric),
        text_keys=tuple(keys[p] for p in text),
        text_getter=_getter(text) if text else None,
        odd=odd,
    )
    if len(_SHAPES) >= _MAX_SHAPES:
        _SHAPES.clear()
    _SHAPES[(keys, kinds)] = shape
    return shape


class NumericFrame:
    """The numeric features of a batch of instances as arrays.

    Attributes
    ----------
    index
        Column of each feature that holds a number in some instance, in order
        of first appearance.
    values
        ``(n, F)`` float matrix; 0 where the instance has no number.
    present
        ``(n, F)`` bool matrix: the instance has this feature, as a number.
    text
        Features that hold a ``str`` in some instance.
    strings
        The ``(feature, value)`` pairs of each instance whose value is a
        ``str``, in the instance's order.
    odd
        Whether some value is neither a number of a usual type nor a ``str``
        (``None``, a list, a ``Decimal``...): batch code should not guess.
    binary
        ``None``, or per column whether every value it holds is 0 or 1 (known to the
        maker of the frame, e.g. :class:`streameval.pipeline.reeval.rows.FeatureRows`).
    exact
        Whether every value is known to be exactly the number of its instance (no
        integer beyond ``2**53``, which a float may round): set by the maker of the
        frame; ``False`` means batch code checks.

    >>> frame = NumericFrame([{"a": 1.0, "b": "x"}, {"b": "y", "c": 2}])
    >>> frame.index, frame.values.tolist(), frame.present.tolist(), frame.text, frame.odd
    ({'a': 0, 'c': 1}, [[1.0, 0.0], [0.0, 2.0]], [[True, False], [False, True]], {'b'}, False)
    >>> frame.strings
    [[('b', 'x')], [('b', 'y')]]
    """

    def __init__(self, xs: Sequence[dict[str, Any]]) -> None:
        self.index: dict[str, int] = {}
        self.text: set[str] = set()
        self.odd = False
        self.binary: np.ndarray | None = None
        self.exact = False
        self.strings: list[list[tuple[str, str]]] = [[] for _ in xs]
        layouts: dict[_Shape, _Layout] = {}
        last_keys: tuple[str, ...] | None = None
        last_kinds: tuple[type, ...] | None = None
        layout: _Layout | None = None
        for i, x in enumerate(xs):
            keys = tuple(x)
            vals = tuple(x.values())
            kinds = tuple(map(type, vals))
            if layout is None or keys != last_keys or kinds != last_kinds:
                shape = _shape(keys, kinds)
                layout = layouts.get(shape)
                if layout is None:
                    layout = layouts[shape] = self._layout(shape)
                last_keys, last_kinds = keys, kinds
            shape = layout.shape
            layout.rows.append(i)
            layout.values.append(vals if shape.getter is None else shape.getter(vals))
            if shape.text_getter is not None:
                self.strings[i] = list(zip(shape.text_keys, shape.text_getter(vals), strict=True))
        n, width = len(xs), len(self.index)
        self.values = np.zeros((n, width))
        self.present = np.zeros((n, width), dtype=bool)
        for layout in layouts.values():
            if not layout.columns:
                continue
            block = np.asarray(layout.values, dtype=float)
            if len(layout.rows) == n and layout.columns == list(range(width)):
                self.values = block
                self.present[:] = True
                continue
            rows = np.asarray(layout.rows)[:, None]
            cols = np.asarray(layout.columns)[None, :]
            self.values[rows, cols] = block
            self.present[rows, cols] = True

    @classmethod
    def from_arrays(
        cls,
        *,
        index: dict[str, int],
        values: np.ndarray,
        present: np.ndarray,
        text: set[str],
        strings: list[list[tuple[str, str]]],
        odd: bool = False,
        binary: np.ndarray | None = None,
        exact: bool = False,
    ) -> NumericFrame:
        """A frame made elsewhere (``values[r, index[f]]`` valid where ``present``),
        e.g. by :class:`streameval.pipeline.reeval.rows.FeatureRows`, which keeps the
        pending instances' rows between re-evaluation rounds.

        >>> frame = NumericFrame.from_arrays(index={"a": 0}, values=np.ones((1, 1)),
        ...     present=np.ones((1, 1), dtype=bool), text=set(), strings=[[]])
        >>> frame.values.tolist(), frame.odd
        ([[1.0]], False)
        """
        frame = cls.__new__(cls)
        frame.index = index
        frame.values = values
        frame.present = present
        frame.text = text
        frame.strings = strings
        frame.odd = odd
        frame.binary = binary
        frame.exact = exact
        return frame

    def _layout(self, shape: _Shape) -> _Layout:
        self.odd = self.odd or shape.odd
        self.text.update(shape.text_keys)
        index = self.index
        if not index:
            index.update(zip(shape.numeric_keys, range(len(shape.numeric_keys)), strict=True))
            return _Layout(shape, list(range(len(shape.numeric_keys))))
        return _Layout(shape, [index.setdefault(k, len(index)) for k in shape.numeric_keys])


class RowKey(NamedTuple):
    """Where the instances of a batch live in a pending buffer's feature matrix
    (:class:`streameval.pipeline.reeval.rows.FeatureRows`): the matrix's ``source`` id,
    each instance's ``rows`` and the ``stamps`` of their contents (a row gets
    a new stamp whenever it is written). Batch code may keep per-row results
    under it."""

    source: int
    rows: np.ndarray
    stamps: np.ndarray


_scratch = threading.local()


def scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised float array of ``shape`` from a buffer kept per thread
    and ``name``: large temporaries are not allocated (and page-faulted) anew
    on every call. The array is only valid until the next call with ``name``.
    """
    size = math.prod(shape)
    buffers: dict[str, np.ndarray] = _scratch.__dict__.setdefault("buffers", {})
    buffer = buffers.get(name)
    if buffer is None or buffer.size < size:
        buffer = buffers[name] = np.empty(max(size, 1024))
    return buffer[:size].reshape(shape)


class LazyFrame:
    """The :class:`NumericFrame` of a batch, made on first use."""

    def __init__(self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None = None) -> None:
        self._xs = xs
        self._frame = frame

    @property
    def frame(self) -> NumericFrame:
        """``NumericFrame(xs)``."""
        if self._frame is None:
            self._frame = NumericFrame(self._xs)
        return self._frame


def exp_list(values: np.ndarray) -> np.ndarray:
    """``math.exp`` of every element (bit-identical to river's scalar code).

    >>> exp_list(np.array([[0.0, 1.0]])).tolist() == [[1.0, math.e]]
    True
    """
    flat = list(map(math.exp, values.ravel().tolist()))
    return np.asarray(flat, dtype=float).reshape(values.shape)


def log_list(values: np.ndarray) -> np.ndarray:
    """``math.log`` of every element (raises like it on 0 and negatives)."""
    flat = list(map(math.log, values.ravel().tolist()))
    return np.asarray(flat, dtype=float).reshape(values.shape)


def row_sums(matrix: np.ndarray) -> np.ndarray:
    """Sums of the rows, added left to right as Python's ``sum`` does."""
    total = np.zeros(matrix.shape[0])
    for j in range(matrix.shape[1]):
        total = total + matrix[:, j]
    return total


def log_sum_exp_normalise(votes: np.ndarray) -> np.ndarray:
    """Rows of log-likelihoods to probabilities as river's naive Bayes leaves do:
    ``exp(v - (max + log(sum(exp(v - max)))))``."""
    top = votes.max(axis=1)
    lse = top + log_list(row_sums(exp_list(votes - top[:, None])))
    return exp_list(votes - lse[:, None])


#: Rows whose two largest log-likelihoods are further apart than this (relative to
#: ``max(1, |top|)``) have the same most probable class before and after
#: normalisation: the rounding of ``exp``, ``log`` and ``/`` is many orders smaller.
CLEAR_GAP = 1e-6


def argmax_log_rows(
    classes: Sequence[Hashable],
    log_values: np.ndarray,
    normalise: Callable[[np.ndarray], np.ndarray],
) -> list[Hashable | None]:
    """``argmax_rows(classes, normalise(log_values))`` for finite log-likelihoods,
    normalising only the rows whose top two classes are within :data:`CLEAR_GAP`.

    ``normalise`` maps rows of log-likelihoods to probabilities, row by row,
    increasing in each value (log-sum-exp, or ``exp(v - max) / sum``). Where
    the largest value leads the second by more than the gap, the class with
    the largest probability is the class with the largest log-likelihood (the
    leader's probability exceeds the runner-up's by a factor ``>= 1 + 1e-6``,
    far beyond rounding); the other rows, ties included, are normalised and
    ranked with :func:`~streameval.pipeline.learners.base.argmax_rows` (ties to the
    smallest label).

    >>> lse = log_sum_exp_normalise
    >>> argmax_log_rows(["b", "a"], np.array([[0.0, -3.0], [-1.0, -1.0]]), lse)
    ['b', 'a']
    """
    n, k = log_values.shape
    if k == 0:
        return [None] * n
    if k == 1:
        return [classes[0]] * n
    top2 = np.partition(log_values, k - 2, axis=1)[:, k - 2 :]
    second, top = top2[:, 0], top2[:, 1]
    clear = (top - second) > CLEAR_GAP * np.maximum(1.0, np.abs(top))
    labels = list(classes)
    out = list(map(labels.__getitem__, np.argmax(log_values, axis=1).tolist()))
    if not clear.all():
        unclear = np.flatnonzero(~clear)
        ranked = argmax_rows(labels, normalise(log_values[unclear]))
        for r, label in zip(unclear.tolist(), ranked, strict=True):
            out[r] = label
    return out


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


def _river(model: Any, x: dict[str, Any]) -> Proba:
    """River's own answer for ``x``, with ``float`` probabilities."""
    return {label: float(p) for label, p in model.predict_proba_one(x).items()}


class TreeBatch:
    """Batched ``predict_proba_one`` for one river Hoeffding tree classifier.

    Use :meth:`supports` to know whether a model can be handed to it. The
    object keeps a cache of leaf parameters; pickling drops it.

    >>> from river import tree
    >>> model = tree.HoeffdingTreeClassifier()
    >>> batch = TreeBatch()
    >>> batch.predict(model, [{"a": 1.0}])
    [{}]
    >>> model.learn_one({"a": 1.0}, "x"); model.learn_one({"a": 2.0}, "y")
    >>> batch.predict(model, [{"a": 1.0}]) == [model.predict_proba_one({"a": 1.0})]
    True
    """

    #: At most this many instances are put into one array at a time.
    chunk = 4096

    def __init__(self) -> None:
        self._cache: dict[int, _LeafModel] = {}
        self._round = TreeRound()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cache = {}
        self._round = TreeRound()

    river_proba = staticmethod(_river)

    @staticmethod
    def supports(model: Any) -> bool:
        """Exactly river's Hoeffding tree or Hoeffding adaptive tree classifier."""
        return type(model) in (
            river_tree.HoeffdingTreeClassifier,
            river_tree.HoeffdingAdaptiveTreeClassifier,
        )

    def predict(
        self,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: NumericFrame | None = None,
    ) -> list[Proba]:
        """``[model.predict_proba_one(x) for x in xs]`` (with ``float``
        probabilities), in one pass per leaf; ``frame``, if given, must be
        ``NumericFrame(xs)`` (else it is made when a naive Bayes leaf needs it)."""
        if not xs:
            return []
        if len(xs) > self.chunk:
            out: list[Proba] = []
            for start in range(0, len(xs), self.chunk):
                out.extend(self.predict(model, xs[start : start + self.chunk]))
            return out
        if model._root is None:
            return [_river(model, x) for x in xs]
        frames = LazyFrame(xs, frame)
        if type(model) is river_tree.HoeffdingAdaptiveTreeClassifier:
            return self._predict_adaptive(model, xs, frames)
        return self._predict_plain(model, xs, frames)

    # ------------------------------------------------------------------ routing

    @staticmethod
    def _route(root: Any, x: dict[str, Any], common: dict[int, Any]) -> Any:
        """The leaf of ``x`` (``Branch.traverse(x, until_leaf=True)``)."""
        node = root
        while isinstance(node, DTBranch):
            try:
                node = node.next(x)
            except KeyError:
                key = id(node)
                child = common.get(key)
                if child is None:
                    child = common[key] = node.most_common_path()[1]
                node = child
        return node

    @staticmethod
    def _route_adaptive(root: Any, x: dict[str, Any], common: dict[int, Any]) -> list[Any] | None:
        """The leaves whose answers HAT adds up for ``x``; ``None`` when an
        alternate tree is a subtree (left to river)."""
        found: list[Any] = []
        node = root
        while isinstance(node, DTBranch):
            alternate = node._alternate_tree if isinstance(node, AdaBranchClassifier) else None
            if alternate:
                if isinstance(alternate, DTBranch):
                    return None
                found.append(alternate)
            try:
                node = node.next(x)
            except KeyError:
                key = id(node)
                child = common.get(key)
                if child is None:
                    child = common[key] = node.most_common_path()[1]
                # ``walk`` yields the most common child, then walks it (yielding it again).
                if isinstance(child, AdaBranchClassifier) and child._alternate_tree:
                    if isinstance(child._alternate_tree, DTBranch):
                        return None
                    found.append(child._alternate_tree)
                node = child
        found.append(node)
        return found

    # ------------------------------------------------------------------ plain trees

    def predict_labels(
        self,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: NumericFrame | None = None,
        key: RowKey | None = None,
    ) -> list[Hashable | None]:
        """``[argmax(p) for p in self.predict(model, xs, frame)]`` for a plain
        Hoeffding tree, ranking each leaf's probability matrix at once
        (:func:`~streameval.pipeline.learners.base.argmax_rows`) instead of making a dict
        per instance. With ``key`` (the rows of a pending buffer's matrix), a round of
        numeric rows is done by :class:`~streameval.pipeline.learners.tree_round.TreeRound`."""
        if not xs:
            return []
        if (
            type(model) is not river_tree.HoeffdingTreeClassifier
            or model._root is None
            or len(xs) > self.chunk
        ):
            return [argmax(p) for p in self.predict(model, xs, frame)]
        if key is not None:
            ranked = self._round.labels(self, model, xs, frame, key)
            if ranked is not None:
                return ranked
        frames = LazyFrame(xs, frame)
        groups = self._groups(model, xs) if frame is None else self._groups_frame(model, xs, frame)
        template = {c: 0.0 for c in sorted(model.classes)}
        out: list[Hashable | None] = [None] * len(xs)
        for leaf, rows in groups.values():
            ranked = self._rank_naive_bayes(model, leaf, rows, frames)
            if ranked is not None:
                for i, label in zip(rows, ranked, strict=True):
                    out[i] = label if label is not None else argmax(_river(model, xs[i]))
                continue
            answer = self._plain_leaf(model, leaf, rows, xs, frames, log=True)
            if answer is None:
                for i in rows:
                    out[i] = argmax(_river(model, xs[i]))
                continue
            if answer.log:
                # the leaf's classes have positive probabilities: the template's zeros never win
                assert answer.values is not None
                ranked = argmax_log_rows(answer.keys, answer.values, log_sum_exp_normalise)
                for i, label in zip(rows, ranked, strict=True):
                    out[i] = label
                continue
            keys = answer.keys
            if answer.row is not None:
                proba = template.copy()
                proba.update(zip(keys, answer.row, strict=True))
                label = argmax(proba)
                for i in rows:
                    out[i] = label
                continue
            assert answer.values is not None
            # the dicts predict() makes: the template's classes (0.0), then the leaf's answer
            columns = list(template)
            position = {c: j for j, c in enumerate(columns)}
            for c in keys:
                if c not in position:
                    position[c] = len(columns)
                    columns.append(c)
            matrix = np.zeros((len(rows), len(columns)))
            matrix[:, [position[c] for c in keys]] = answer.values
            for i, label in zip(rows, argmax_rows(columns, matrix), strict=True):
                out[i] = label
        self._trim(groups)
        return out

    def _rank_naive_bayes(
        self, model: Any, leaf: Any, rows: list[int], frames: LazyFrame
    ) -> list[Hashable | None] | None:
        """The most probable class of ``rows`` at a naive Bayes leaf whose observers are all
        Gaussian, from the votes as a quadratic form (:class:`Quadratic`); ``None`` for a
        row left to river (two classes too close), or for all of them (``None``) when the
        leaf is not such a leaf."""
        if not self._is_naive(model, leaf) or not leaf.stats or sum(leaf.stats.values()) == 0:
            return None
        lm = self._leaf_model(leaf)
        if lm is None or lm.nominal or not len(lm.gauss_features):
            return None
        frame = frames.frame
        if frame.odd or any(f in frame.text for f in lm.gauss_features):
            return None
        cols = np.array([frame.index.get(f, -1) for f in lm.gauss_features], dtype=np.intp)
        known = cols >= 0
        index = np.array(rows, dtype=np.intp)[:, None]
        safe = np.where(known, cols, 0)[None, :]
        present = frame.present[index, safe] & known[None, :]
        values = frame.values[index, safe]
        if not frame.exact and (np.abs(values[present]) >= 2.0**53).any():
            return None  # a big int: river computes with it exactly, a float may not
        if lm.quad is None or lm.quad.weights != lm.weights:
            lm.quad = Quadratic.of(lm.mu, lm.minus_two_var, lm.half_log_var, lm.keep, lm.weights)
        best, clear = lm.quad.rank(lm.prior, values, present)
        classes = lm.classes
        return [
            classes[b] if c else None for b, c in zip(best.tolist(), clear.tolist(), strict=True)
        ]

    @staticmethod
    def _is_naive(model: Any, leaf: Any) -> bool:
        """Whether ``leaf`` predicts with naive Bayes (river's rule for its leaf type)."""
        kind = type(leaf)
        if kind is LeafNaiveBayes:
            return bool(leaf.is_active() and leaf.total_weight >= model.nb_threshold)
        if kind is LeafNaiveBayesAdaptive:
            return bool(leaf.is_active() and leaf._nb_correct_weight >= leaf._mc_correct_weight)
        return False

    def _groups(self, model: Any, xs: Sequence[dict[str, Any]]) -> dict[int, tuple[Any, list[int]]]:
        """The rows of ``xs`` per leaf of a plain tree (leaves in order of first use)."""
        root = model._root
        common: dict[int, Any] = {}
        groups: dict[int, tuple[Any, list[int]]] = {}
        if isinstance(root, DTBranch):
            route = self._route
            for i, x in enumerate(xs):
                leaf = route(root, x, common)
                entry = groups.get(id(leaf))
                if entry is None:
                    groups[id(leaf)] = (leaf, [i])
                else:
                    entry[1].append(i)
        else:
            groups[id(root)] = (root, list(range(len(xs))))
        return groups

    def _groups_frame(
        self, model: Any, xs: Sequence[dict[str, Any]], frame: NumericFrame
    ) -> dict[int, tuple[Any, list[int]]]:
        """:meth:`_groups`, routing the rows through numeric binary branches
        with one comparison per branch for all its rows (``frame`` must be
        ``NumericFrame(xs)``).

        A row goes left when ``x[feature] <= threshold``, to the most common
        path when the feature is missing, as river's ``Branch.traverse``; any
        other branch type, a feature that holds a ``str`` in some row, and an
        integer too large for a float to compare exactly send the rows at that
        branch through :meth:`_route` one by one.
        """
        root = model._root
        if not isinstance(root, DTBranch):
            return {id(root): (root, list(range(len(xs))))}
        common: dict[int, Any] = {}
        leaves: list[tuple[int, Any, np.ndarray]] = []
        stack: list[tuple[Any, np.ndarray]] = [(root, np.arange(len(xs)))]
        while stack:
            node, rows = stack.pop()
            if not isinstance(node, DTBranch):
                leaves.append((int(rows[0]), node, rows))
                continue
            col = frame.index.get(node.feature, -1)
            if type(node) is not NumericBinaryBranch or (node.feature in frame.text):
                for i in rows.tolist():
                    leaf = self._route(node, xs[i], common)
                    leaves.append((i, leaf, np.array([i])))
                continue
            if col < 0:
                present = np.zeros(len(rows), dtype=bool)
                values = np.zeros(len(rows))
            else:
                present = frame.present[rows, col]
                values = frame.values[rows, col]
                if not frame.exact and (np.abs(values[present]) >= 2.0**53).any():
                    # a big int: river compares it exactly, a float may not
                    for i in rows.tolist():
                        leaf = self._route(node, xs[i], common)
                        leaves.append((i, leaf, np.array([i])))
                    continue
            left = present & (values <= node.threshold)
            right = present & ~left
            missing = ~present
            parts = [rows[left], rows[right]]
            if missing.any():
                key = id(node)
                child = common.get(key)
                if child is None:
                    child = common[key] = node.most_common_path()[1]
                side = 0 if child is node.children[0] else 1
                parts[side] = np.sort(np.concatenate([parts[side], rows[missing]]))
            for child, part in zip(node.children, parts, strict=True):
                if len(part):
                    stack.append((child, part))
        leaves.sort(key=operator.itemgetter(0))
        groups: dict[int, tuple[Any, list[int]]] = {}
        for _, leaf, rows in leaves:
            entry = groups.get(id(leaf))
            if entry is None:
                groups[id(leaf)] = (leaf, rows.tolist())
            else:
                entry[1].extend(rows.tolist())
        for _, rows_list in groups.values():
            rows_list.sort()
        return groups

    def _predict_plain(
        self, model: Any, xs: Sequence[dict[str, Any]], frames: LazyFrame
    ) -> list[Proba]:
        groups = self._groups(model, xs)
        template = {c: 0.0 for c in sorted(model.classes)}
        out: list[Proba | None] = [None] * len(xs)
        for leaf, rows in groups.values():
            answer = self._plain_leaf(model, leaf, rows, xs, frames)
            if answer is None:
                for i in rows:
                    out[i] = _river(model, xs[i])
                continue
            keys = answer.keys
            if answer.row is not None:
                proba = template.copy()
                proba.update(zip(keys, answer.row, strict=True))
                for i in rows:
                    out[i] = proba.copy()
                continue
            assert answer.values is not None
            for i, values in zip(rows, answer.values.tolist(), strict=True):
                proba = template.copy()
                proba.update(zip(keys, values, strict=True))
                out[i] = proba
        self._trim(groups)
        return out  # type: ignore[return-value]

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

    # ------------------------------------------------------------------ adaptive trees

    def _predict_adaptive(
        self, model: Any, xs: Sequence[dict[str, Any]], frames: LazyFrame
    ) -> list[Proba]:
        root = model._root
        common: dict[int, Any] = {}
        paths: list[list[Any] | None] = []
        groups: dict[int, tuple[Any, list[int]]] = {}
        for i, x in enumerate(xs):
            found = self._route_adaptive(root, x, common) if isinstance(root, DTBranch) else [root]
            paths.append(found)
            if found is None:
                continue
            for leaf in found:
                entry = groups.get(id(leaf))
                if entry is None:
                    groups[id(leaf)] = (leaf, [i])
                elif entry[1][-1] != i:
                    entry[1].append(i)
        template = {c: 0.0 for c in model.classes}
        labels = list(template)
        column = {c: j for j, c in enumerate(labels)}
        out: list[Proba | None] = [None] * len(xs)
        # Rows that meet several leaves (alternate trees): (keys, values) of each leaf.
        parts: dict[int, dict[int, tuple[list[Hashable], list[float]]]] = {}
        for key, (leaf, rows) in groups.items():
            answer = self._adaptive_leaf(model, leaf, rows, xs, frames)
            if answer is None:
                continue
            keys, row, values = answer.keys, answer.row, answer.values
            single = [r for r, i in enumerate(rows) if len(paths[i]) == 1]  # type: ignore[arg-type]
            if len(single) < len(rows):
                listed = values.tolist() if values is not None else None
                for r, i in enumerate(rows):
                    if len(paths[i]) > 1:  # type: ignore[arg-type]
                        parts.setdefault(i, {})[key] = (keys, row if listed is None else listed[r])
            if not single or any(c not in column for c in keys):
                continue
            if row is not None:
                proba = template.copy()
                proba.update((c, 0.0 + v) for c, v in zip(keys, row, strict=True))
                proba = normalize_values_in_dict(proba)
                for r in single:
                    out[rows[r]] = proba.copy()
                continue
            assert values is not None
            # proba = {c: 0.0 for c in classes}, plus the leaf's answer, normalised.
            matrix = np.zeros((len(single), len(labels)))
            matrix[:, [column[c] for c in keys]] = 0.0 + values[single]
            total = row_sums(matrix)
            ok = (total != 0) & ~np.isnan(total)
            scale = np.ones_like(total)
            scale[ok] = 1 / total[ok]
            np.multiply(matrix, scale[:, None], out=matrix, where=ok[:, None])
            for r, probas in zip(single, matrix.tolist(), strict=True):
                out[rows[r]] = dict(zip(labels, probas, strict=True))
        for i, found in enumerate(paths):
            if out[i] is not None:
                continue
            got = parts.get(i, {})
            if found is None or any(id(leaf) not in got for leaf in found):
                out[i] = _river(model, xs[i])
                continue
            proba = template.copy()
            for leaf in found:
                keys, values = got[id(leaf)]
                for label, value in zip(keys, values, strict=True):
                    try:
                        proba[label] += value
                    except KeyError:
                        proba[label] = value
            out[i] = normalize_values_in_dict(proba)
        self._trim(groups)
        return out  # type: ignore[return-value]

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
