"""Naive Bayes for mixed numeric and categorical features: river's model, in arrays.

River's ``GaussianNB`` models every feature with a normal density. Fed with
one-hot encoded categories it goes badly wrong: an indicator that is constant
within a class (say ``_y_lag1_?``, which is 1 only for the very first
instance) has zero variance there, and river then gives the class a flat
density of ``1e-9`` *even when the value matches*, while the other class,
with a tiny but positive variance, gets a huge density. On Electricity with
one lag feature (``ta:nb``) this drives the accuracy below 45 %, under the
Majority baseline.

:class:`MixedNB` models the numeric features as river's ``GaussianNB`` does and
gives the ``str`` features a categorical likelihood instead: river's
``MultinomialNB`` (Laplace smoothing ``alpha``) over their one-hot tokens
(what river's ``OneHotEncoder(drop_zeros=True)`` makes of them). With every instance
carrying the same number of categorical features, the multinomial over the tokens is
the product of one categorical distribution per feature, as in the naive
Bayes of MOA used by ``temporal-dependence-evaluation-journal.txt`` (sect.
6.2). Both parts include the class prior, so one copy is taken out:

``log P(y|x) = log GaussianNB(y, x_num) + log MultinomialNB(y, x_str) - log P(y) + const``.

A numeric feature that is constant within a class (a 0/1 indicator such as Covertype's
Wilderness and Soil columns, or any feature seen once in a class) has no normal density
there. River's ``GaussianNB`` gives it a density of 0 whatever the value (``log(1e-9)``
after its floor), so a class loses ``log(1e9)`` per such column *even when the value
matches*, and on Covertype ``nb`` collapses onto one class. MOA's ``GaussianEstimator``
(``probabilityDensity``: a standard deviation of 0 gives 1 where the value equals the
mean, 0 elsewhere), which the papers' naive Bayes uses, treats the class's values as a
point mass; :class:`PointMassGaussianNB` (river's classes) and :class:`MixedNB` do the
same, keeping river's ``1e-9`` floor, so a value off the point costs ``log(1e-9)``.

The numeric part lives in a :class:`~streameval.pipeline.learners.gaussians.GaussianTable`:
the statistics river's per-feature objects hold, updated with river's formulas, so the
model's state is exactly :class:`PointMassGaussianNB`'s. Predictions:

* a small model (features x classes at most :data:`SMALL`) is computed with river's
  scalar formula, to the last bit what :class:`PointMassGaussianNB` gives (faster than
  numpy's per-call cost at that size);
* a larger one with numpy (Covertype: 54 features x 7 classes), whose ``exp`` and
  ``log`` may differ from ``math``'s in the last bit: the probabilities agree with the
  scalar formula to about ``1e-15``, and the most probable class is the same. Where the
  two best classes are closer than the numpy sums' error bound (times a margin), the
  instance is computed again with the scalar formula;
* a batch (:meth:`MixedNB.predict_labels_batch`, re-evaluation rounds) the same way,
  the near ties of the batch again with the scalar formula.

>>> model = MixedNB()
>>> for x, y in [({"t": 1.0, "lag": "UP"}, "UP"), ({"t": 1.1, "lag": "UP"}, "UP"),
...              ({"t": 0.9, "lag": "DOWN"}, "DOWN"), ({"t": 1.2, "lag": "DOWN"}, "DOWN")]:
...     model.learn_one(x, y)
>>> reference = PointMassGaussianNB()
>>> for t, y in [(1.0, "UP"), (1.1, "UP"), (0.9, "DOWN"), (1.2, "DOWN")]:
...     reference.learn_one({"t": t}, y)
>>> model.predict_proba_one({"t": 1.05}) == reference.predict_proba_one({"t": 1.05})
True
"""

from __future__ import annotations

import collections
import math
import numbers
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from river import base, naive_bayes
from streameval.pipeline.learners.base import argmax
from streameval.pipeline.learners.frame import NumericFrame
from streameval.pipeline.learners.gaussian_rows import row_sums
from streameval.pipeline.learners.gaussians import PDF_EPS, GaussianTable
from streameval.pipeline.learners.logmath import CLEAR_GAP

#: Models with at most this many (numeric feature, class) pairs are computed with the
#: scalar formula only.
SMALL = 64

#: Integers beyond this are not all exact as ``float``: such an instance is computed with
#: the scalar formula, which compares them with the means as river does.
_EXACT_INT = 2**53


class PointMassGaussianNB(naive_bayes.GaussianNB):
    """River's ``GaussianNB`` with MOA's density for a feature without spread in a class.

    A class in which a feature has been seen (once, or always with the same value) has
    the density 1 at that value and 0 elsewhere (MOA ``GaussianEstimator``); river would
    give 0 everywhere. Both then add river's floor of ``1e-9`` before the log. This is the
    reference :class:`MixedNB` is tested against.

    >>> model = PointMassGaussianNB()
    >>> for x, y in [(0.0, "A"), (0.0, "A"), (0.0, "B"), (1.0, "B")]:
    ...     model.learn_one({"b": x}, y)
    >>> round(model.predict_proba_one({"b": 0.0})["A"], 4)  # 1 / (1 + N(0; mean .5, var .25))
    0.6739
    """

    @staticmethod
    def _log_gaussian_pdf(gaussian: Any, x: float) -> float:
        if gaussian is not None and _is_point(gaussian._var):
            return math.log(PDF_EPS + (1.0 if x == gaussian._var.mean._mean else 0.0))
        return naive_bayes.GaussianNB._log_gaussian_pdf(gaussian, x)


def _is_point(var: Any) -> bool:
    """Whether river's ``stats.Var`` ``var`` has seen values, all equal (or only one)."""
    n = var.mean.n
    return n > 0 and (n <= var.ddof or var._S / (n - var.ddof) <= 0.0)


class _Instance:
    """An instance split as :class:`MixedNB` reads it: the numeric features (keys, values
    as given, and as floats), the one-hot tokens of the ``str`` features, and whether
    only the scalar formula may be used (a value numpy would not read as river does)."""

    __slots__ = ("floats", "keys", "scalar_only", "tokens", "values")

    def __init__(self, x: dict[str, Any]) -> None:
        values = list(x.values())
        kinds = set(map(type, values))
        self.tokens: dict[str, int] = {}
        self.scalar_only = False
        if kinds <= {float, int}:
            self.keys: tuple[Hashable, ...] = tuple(x)
            self.values: list[Any] = values
        elif kinds <= {float, int, str}:  # what the general case below gives, told by type
            keys = []
            self.values = []
            for k, v in x.items():
                if v.__class__ is str:
                    self.tokens[f"{k}_{v}"] = 1
                else:
                    keys.append(k)
                    self.values.append(v)
            self.keys = tuple(keys)
        else:
            # river's SelectType(numbers.Number), and SelectType(str) | OneHotEncoder
            pairs = [(k, v) for k, v in x.items() if isinstance(v, numbers.Number)]
            self.keys = tuple(k for k, _ in pairs)
            self.values = [v for _, v in pairs]
            self.tokens = {f"{k}_{v}": 1 for k, v in x.items() if isinstance(v, str)}
            self.scalar_only = any(not isinstance(v, (float, int)) for v in self.values)
        if int in kinds and not self.scalar_only:  # an int a float would not hold exactly
            self.scalar_only = any(type(v) is int and abs(v) > _EXACT_INT for v in self.values)
        self.floats = np.array(self.values, dtype=float) if not self.scalar_only else None


class MixedNB(base.Classifier):
    """Gaussian naive Bayes on numbers, categorical naive Bayes on strings.

    >>> model = MixedNB()
    >>> for x, y in [({"t": 1.0, "lag": "UP"}, "UP"), ({"t": 1.1, "lag": "UP"}, "UP"),
    ...              ({"t": 0.9, "lag": "DOWN"}, "DOWN"), ({"t": 1.2, "lag": "DOWN"}, "DOWN")]:
    ...     model.learn_one(x, y)
    >>> proba = model.predict_proba_one({"t": 1.05, "lag": "DOWN"})
    >>> max(proba, key=proba.get)
    'DOWN'
    """

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha
        self.class_counts: collections.Counter[Hashable] = collections.Counter()
        self.gaussians = GaussianTable()
        self.multinomial = naive_bayes.MultinomialNB(alpha=alpha)
        self._rows: dict[Hashable, int] = {}  # the table row of each class
        # the last layout: keys, number of columns then, their columns, none of them -1
        self._layout: tuple[tuple[Hashable, ...], int, np.ndarray | slice, bool] | None = None

    # -- learning ---------------------------------------------------------------------------

    def learn_one(self, x: dict[str, Any], y: Hashable) -> None:
        row = self._rows.get(y)
        if row is None:
            row = self._rows[y] = self.gaussians.add_class()
        self.class_counts[y] += 1
        inst = _Instance(x)
        if inst.keys:
            values = inst.floats
            if values is None:
                values = np.array([float(v) for v in inst.values])
            self.gaussians.learn(row, self._columns(inst.keys, learn=True), values)
        self.multinomial.learn_one(inst.tokens, y)

    def _columns(self, keys: tuple[Hashable, ...], *, learn: bool = False) -> np.ndarray | slice:
        """The table columns of ``keys`` (a slice when they are all the columns in order);
        ``learn``: new features get columns, else they are ``-1``. The last answer is kept."""
        table = self.gaussians
        layout = self._layout
        fresh = layout is not None and layout[0] == keys and layout[1] == table.n_features
        if fresh and (layout[3] or not learn):  # type: ignore[index]
            return layout[2]  # type: ignore[index]
        cols = table.columns_for(keys) if learn else table.columns_of(keys)
        found: np.ndarray | slice = cols
        if len(cols) == table.n_features and (cols == np.arange(len(cols))).all():
            found = slice(0, len(cols))
        self._layout = (keys, table.n_features, found, learn or bool((cols >= 0).all()))
        return found

    # -- one instance -----------------------------------------------------------------------

    def predict_proba_one(self, x: dict[str, Any]) -> dict[Hashable, float]:
        if not self.class_counts:
            return {}
        inst = _Instance(x)
        classes = list(self.class_counts)
        categorical = self._categorical(inst.tokens, classes)
        if inst.scalar_only or len(inst.keys) * len(classes) <= SMALL:
            return self._exact_proba(inst, classes, categorical)
        assert inst.floats is not None
        numeric = self.gaussians.sums(self._columns(inst.keys), inst.floats)
        jll = (self._log_prior(classes) + numeric).tolist()
        if categorical is not None:
            jll = [ll + c for ll, c in zip(jll, categorical, strict=True)]
        if not self._clear(jll, len(inst.keys)):
            return self._exact_proba(inst, classes, categorical)
        return _normalise(dict(zip(classes, jll, strict=True)))

    def _exact_proba(
        self, inst: _Instance, classes: list[Hashable], categorical: list[float] | None
    ) -> dict[Hashable, float]:
        """River's ``joint_log_likelihood`` (+ the categorical part), normalised, with
        ``math`` throughout: :class:`PointMassGaussianNB`'s numbers to the last bit."""
        rows = [self._rows[c] for c in classes]
        sums = self.gaussians.exact_sums(rows, inst.keys, inst.values)
        total = sum(self.class_counts.values())
        jll = {
            c: math.log(self.class_counts[c] / total) + s
            for c, s in zip(classes, sums, strict=True)
        }
        if categorical is not None:
            for c, extra in zip(classes, categorical, strict=True):
                jll[c] += extra
        return _normalise(jll)

    def _categorical(self, tokens: dict[str, int], classes: list[Hashable]) -> list[float] | None:
        """What the tokens add to each class: the multinomial log-likelihood less its
        prior; ``None`` when there are no tokens or none was ever learned (no vocabulary,
        nothing to tell apart)."""
        mnb = self.multinomial
        if not tokens or not mnb.n_terms:
            return None
        ll = mnb.joint_log_likelihood(tokens)
        return [ll[c] - math.log(mnb.p_class(c)) for c in classes]

    def _log_prior(self, classes: list[Hashable]) -> np.ndarray:
        total = sum(self.class_counts.values())
        return np.array([math.log(self.class_counts[c] / total) for c in classes])

    def _clear(self, jll: list[float], n_features: int) -> bool:
        """Whether the best class of ``jll`` (numpy sums) is the best of the exact sums."""
        if len(jll) < 2:
            return all(map(math.isfinite, jll))
        second, top = sorted(jll)[-2:]
        if not (math.isfinite(top) and math.isfinite(second)):
            return False
        return top - second > self._tolerance(abs(top), n_features)

    def _tolerance(self, magnitude: Any, n_features: int) -> Any:
        """The gap above which a numpy ranking is the exact one (see the module docs)."""
        bound = self.gaussians.error_bound(n_features)
        return np.maximum(CLEAR_GAP * np.maximum(1.0, magnitude), bound)

    # -- batches ----------------------------------------------------------------------------

    def predict_proba_batch(
        self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None = None
    ) -> list[dict[Hashable, float]]:
        """``[self.predict_proba_one(x) for x in xs]``, computed with numpy for a larger
        model; ``frame``, if given, must be ``NumericFrame(xs)``.

        Not river's ``predict_proba_many`` (which takes a DataFrame).

        >>> model = MixedNB()
        >>> model.predict_proba_batch([{"t": 1.0}])
        [{}]
        >>> for x, y in [({"t": 1.0, "d": "a"}, "u"), ({"t": 2.0, "d": "b"}, "v"),
        ...              ({"t": 1.5, "d": "a"}, "u")]:
        ...     model.learn_one(x, y)
        >>> xs = [{"t": 1.2, "d": "b"}, {"d": "a"}, {"t": 1.9}, {}]
        >>> model.predict_proba_batch(xs) == [model.predict_proba_one(x) for x in xs]
        True
        """
        if not self.class_counts:
            return [{} for _ in xs]
        table = self._batch_log_likelihoods(xs, frame)
        if table is None:
            return [self.predict_proba_one(x) for x in xs]
        classes, jll, clear = table
        out = []
        for r, row in enumerate(jll.tolist()):
            if clear[r]:
                out.append(_normalise(dict(zip(classes, row, strict=True))))
            else:
                out.append(self._exact_proba(_Instance(xs[r]), classes, self._cat_of(xs[r])))
        return out

    def predict_labels_batch(
        self,
        xs: Sequence[dict[str, Any]],
        frame: NumericFrame | None = None,
        key: Any = None,
    ) -> list[Hashable | None] | None:
        """The most probable class of each instance, ``argmax`` of
        :meth:`predict_proba_one` (ties to the smallest label): ranked on the numpy sums,
        and with the scalar formula where two classes are close. ``key`` (the rows of a
        pending buffer's matrix) is not needed."""
        if not self.class_counts:
            return [None] * len(xs)
        table = self._batch_log_likelihoods(xs, frame, small_too=True)
        if table is None:
            return None
        classes, jll, clear = table
        labels = list(map(classes.__getitem__, np.argmax(jll, axis=1).tolist()))
        if not clear.all():
            for r in np.flatnonzero(~clear).tolist():
                exact = self._exact_proba(_Instance(xs[r]), classes, self._cat_of(xs[r]))
                labels[r] = argmax(exact)
        return labels

    def _cat_of(self, x: dict[str, Any]) -> list[float] | None:
        tokens = {f"{k}_{v}": 1 for k, v in x.items() if isinstance(v, str)}
        return self._categorical(tokens, list(self.class_counts))

    def _batch_log_likelihoods(
        self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None, small_too: bool = False
    ) -> tuple[list[Hashable], np.ndarray, np.ndarray] | None:
        """The classes, the joint log-likelihoods ``(n, K)`` from numpy and which rows
        rank their best class as the exact sums do; ``None`` when numpy is not used (a
        small model unless ``small_too``, an odd value in the batch)."""
        classes = list(self.class_counts)
        if frame is None:
            frame = NumericFrame(xs)
        if frame.odd or (not small_too and len(frame.index) * len(classes) <= SMALL):
            return None
        if not frame.exact and frame.values.size and np.abs(frame.values).max() > _EXACT_INT:
            return None  # maybe an int that is not exact as a float: the scalar formula
        jll = row_sums(self.gaussians, frame)
        jll += self._log_prior(classes)
        jll = self._add_categorical(jll, frame, classes)
        k = len(classes)
        if k < 2:
            return classes, jll, np.isfinite(jll).all(axis=1)
        with np.errstate(invalid="ignore"):  # inf - inf: only from non-finite values
            ranked = np.partition(jll, k - 2, axis=1)
            top = ranked[:, -1]
            gap = top - ranked[:, -2]
            margin = np.abs(top)
            np.maximum(margin, 1.0, out=margin)
            margin *= CLEAR_GAP
            bound = self.gaussians.error_bound(len(frame.index))
            if bound > CLEAR_GAP:
                np.maximum(margin, bound, out=margin)
            clear = gap > margin  # false for nan
        return classes, jll, clear

    def _add_categorical(
        self, jll: np.ndarray, frame: NumericFrame, classes: list[Hashable]
    ) -> np.ndarray:
        """``jll`` plus, for the instances with ``str`` features, the
        multinomial log-likelihood of their tokens without its class prior."""
        mnb = self.multinomial
        if not frame.text or not mnb.n_terms:  # as predict_proba_one
            return jll
        vectors: dict[str, np.ndarray] = {}
        rows: list[int] = []
        tokens: list[list[str]] = []
        for i, pairs in enumerate(frame.strings):
            if not pairs:
                continue
            # What SelectType(str) | OneHotEncoder(drop_zeros) gives.
            names = list(dict.fromkeys(f"{key}_{value}" for key, value in pairs))
            for name in names:
                if name not in vectors:
                    vectors[name] = np.array(
                        [math.log(mnb.p_feature_given_class(name, c)) for c in classes]
                    )
            rows.append(i)
            tokens.append(names)
        if not rows:
            return jll
        k = len(classes)
        depth = max(map(len, tokens))
        terms = np.zeros((depth, len(rows), k))
        for r, names in enumerate(tokens):
            for t, name in enumerate(names):
                terms[t, r] = vectors[name]
        log_prior = np.array([math.log(mnb.p_class(c)) for c in classes])
        categorical = log_prior + np.add.reduce(terms, axis=0)
        jll = jll.copy()
        jll[rows] = jll[rows] + (categorical - log_prior)
        return jll

    # -- pickling ---------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_layout"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "gaussian" in state:  # written when the numeric part was river's GaussianNB
            state = _from_river_parts(state)
        self.__dict__.update(state)

    @property
    def _multiclass(self) -> bool:
        return True


def _normalise(jll: dict[Hashable, float]) -> dict[Hashable, float]:
    """Joint log-likelihoods to probabilities: ``exp(ll - max) / sum`` (rather than
    scipy's logsumexp: same result, half the time)."""
    top = max(jll.values())
    weights = {label: math.exp(ll - top) for label, ll in jll.items()}
    total = sum(weights.values())
    return {label: w / total for label, w in weights.items()}


def _from_river_parts(state: dict[str, Any]) -> dict[str, Any]:
    """The state of a :class:`MixedNB` pickled when it held a :class:`PointMassGaussianNB`
    (``gaussian``): the same statistics, moved into a table."""
    gaussian = state["gaussian"]
    table = GaussianTable()
    rows: dict[Hashable, int] = {}
    for c in gaussian.class_counts:
        row = rows[c] = table.add_class()
        for feature, dist in gaussian.gaussians.get(c, {}).items():
            col = int(table.columns_for([feature])[0])
            var = dist._var
            table.count[row, col] = var.mean.n
            table.mean[row, col] = var.mean._mean
            table.m2[row, col] = var._S
    return {
        "alpha": state["alpha"],
        "class_counts": collections.Counter(gaussian.class_counts),
        "gaussians": table,
        "multinomial": state["multinomial"],
        "_rows": rows,
        "_layout": None,
    }
