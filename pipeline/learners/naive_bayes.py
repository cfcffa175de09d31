"""Naive Bayes for mixed numeric and categorical features, from river's parts.

River's ``GaussianNB`` models every feature with a normal density. Fed with
one-hot encoded categories it goes badly wrong: an indicator that is constant
within a class (say ``_y_lag1_?``, which is 1 only for the very first
instance) has zero variance there, and river then gives the class a flat
density of ``1e-9`` *even when the value matches*, while the other class,
with a tiny but positive variance, gets a huge density. On Electricity with
one lag feature (``ta:nb``) this drives the accuracy below 45 %, under the
Majority baseline.

:class:`MixedNB` keeps river's ``GaussianNB`` for the numeric features and
gives the ``str`` features a categorical likelihood instead: river's
``MultinomialNB`` (Laplace smoothing ``alpha``) over their one-hot tokens
(river's ``OneHotEncoder`` without the zeros). With every instance carrying
the same number of categorical features, the multinomial over the tokens is
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
point mass; :class:`PointMassGaussianNB` does the same, keeping river's ``1e-9`` floor, so
a value off the point costs ``log(1e-9)`` as before. With every class's variance positive
the answer is river's ``GaussianNB``'s (to rounding).

:meth:`MixedNB.predict_proba_batch` computes the same probabilities for many
instances with numpy: the Gaussian parameters are read once per call, the
densities of all instances, classes and features are computed at once, and
features absent from an instance are left out of its sum, as
``GaussianNB.joint_log_likelihood`` does. The densities go through numpy's
``exp`` and ``log``, which may differ from ``math``'s in the last bit, so the
probabilities agree with :meth:`MixedNB.predict_proba_one` to about ``1e-15``
relative; everything else (the categorical part, the normalisation) is done
with the same operations in the same order.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from river import base, compose, naive_bayes, preprocessing
from streameval.pipeline.learners.batch import (
    NumericFrame,
    RowKey,
    argmax_log_rows,
    exp_list,
    row_sums,
    scratch,
)

#: River's ``GaussianNB`` adds this to every density before taking its log.
PDF_EPS = 10e-10
LOG_PDF_EPS = math.log(PDF_EPS)
LOG_ONE_EPS = math.log(1.0 + PDF_EPS)
SQRT_TAU = math.sqrt(2.0 * math.pi)


class _RowSums:
    """Per row of a pending buffer's feature matrix and per class, the numeric
    log-likelihood sum last computed, and at which class count.

    ``GaussianNB`` changes the Gaussians of class ``c`` only when it learns an
    instance of ``c`` (which adds one to ``class_counts[c]``), so a sum made at
    the current count of its class, for the same row contents (``stamps``, see
    :class:`~streameval.pipeline.reeval.rows.FeatureRows`), is exactly what computing it
    again would give. With ``K`` labels between two predictions of a pending
    instance, only the classes among those labels are computed again.
    """

    def __init__(self, source: int, features: tuple[str, ...]) -> None:
        self.source = source
        self.features = features
        self.column: dict[Hashable, int] = {}
        self.sums = np.zeros((0, 0))
        self.counts = np.zeros((0, 0), dtype=np.int64)
        self.stamps = np.zeros(0, dtype=np.int64)

    def columns(self, classes: Sequence[Hashable], n_rows: int) -> np.ndarray:
        """The columns of ``classes`` (new ones added), with room for ``n_rows`` rows."""
        for c in classes:
            if c not in self.column:
                self.column[c] = len(self.column)
        rows, width = self.sums.shape
        need_rows, need_width = max(rows, n_rows), max(width, len(self.column))
        if (need_rows, need_width) != (rows, width):
            need_rows = max(need_rows, 2 * rows)
            sums = np.zeros((need_rows, need_width))
            counts = np.full((need_rows, need_width), -1, dtype=np.int64)
            stamps = np.full(need_rows, -1, dtype=np.int64)
            sums[:rows, :width] = self.sums
            counts[:rows, :width] = self.counts
            stamps[:rows] = self.stamps
            self.sums, self.counts, self.stamps = sums, counts, stamps
        return np.array([self.column[c] for c in classes], dtype=np.intp)


def _normalise(jll: np.ndarray) -> np.ndarray:
    """Rows of joint log-likelihoods to probabilities, as :meth:`MixedNB.predict_proba_one`
    does: ``exp(ll - max) / sum``."""
    top = jll.max(axis=1)
    weights = exp_list(jll - top[:, None])
    return weights / row_sums(weights)[:, None]


class PointMassGaussianNB(naive_bayes.GaussianNB):
    """River's ``GaussianNB`` with MOA's density for a feature without spread in a class.

    A class in which a feature has been seen (once, or always with the same value) has
    the density 1 at that value and 0 elsewhere (MOA ``GaussianEstimator``); river would
    give 0 everywhere. Both then add river's floor of ``1e-9`` before the log.

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
        self.numeric = compose.SelectType(numbers.Number)
        self.categorical = compose.SelectType(str) | preprocessing.OneHotEncoder(drop_zeros=True)
        self.gaussian = PointMassGaussianNB()
        self.multinomial = naive_bayes.MultinomialNB(alpha=alpha)

    def learn_one(self, x: dict[str, Any], y: Hashable) -> None:
        self.gaussian.learn_one(self.numeric.transform_one(x), y)
        self.multinomial.learn_one(self.categorical.transform_one(x), y)

    def predict_proba_one(self, x: dict[str, Any]) -> dict[Hashable, float]:
        jll = self.gaussian.joint_log_likelihood(self.numeric.transform_one(x))
        if not jll:
            return {}
        tokens = self.categorical.transform_one(x)
        if tokens and self.multinomial.n_terms:  # no token learned yet: nothing to tell apart
            categorical = self.multinomial.joint_log_likelihood(tokens)
            for label in jll:
                jll[label] += categorical[label] - math.log(self.multinomial.p_class(label))
        # Normalised here rather than with scipy's logsumexp: same result, half the time.
        top = max(jll.values())
        weights = {label: math.exp(ll - top) for label, ll in jll.items()}
        total = sum(weights.values())
        return {label: w / total for label, w in weights.items()}

    #: At most this many instances are put into one array at a time.
    chunk = 2048

    def predict_proba_batch(
        self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None = None
    ) -> list[dict[Hashable, float]]:
        """``[self.predict_proba_one(x) for x in xs]``, computed with numpy;
        ``frame``, if given, must be ``NumericFrame(xs)``.

        Not river's ``predict_proba_many`` (which takes a DataFrame).

        >>> model = MixedNB()
        >>> model.predict_proba_batch([{"t": 1.0}])
        [{}]
        >>> for x, y in [({"t": 1.0, "d": "a"}, "u"), ({"t": 2.0, "d": "b"}, "v"),
        ...              ({"t": 1.5, "d": "a"}, "u")]:
        ...     model.learn_one(x, y)
        >>> xs = [{"t": 1.2, "d": "b"}, {"d": "a"}, {"t": 1.9}, {}]
        >>> batch = model.predict_proba_batch(xs)
        >>> loop = [model.predict_proba_one(x) for x in xs]
        >>> all(b.keys() == o.keys() and all(abs(b[c] - o[c]) < 1e-12 for c in b)
        ...     for b, o in zip(batch, loop))
        True
        """
        if not self.gaussian.class_counts:
            return [{} for _ in xs]
        if not xs:
            return []
        table = self.predict_proba_table(xs, frame)
        if table is None:
            return [self.predict_proba_one(x) for x in xs]  # let river produce its nan/inf
        classes, probas = table
        return [dict(zip(classes, row, strict=True)) for row in probas.tolist()]

    def predict_proba_table(
        self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None = None
    ) -> tuple[list[Hashable], np.ndarray] | None:
        """The classes and the ``(n, K)`` probability matrix of
        :meth:`predict_proba_batch` (row ``r`` is its dict for ``xs[r]``);
        ``None`` when the batch code leaves the answer to
        :meth:`predict_proba_one` (an odd value, a nan or an infinity)."""
        table = self._log_likelihood_table(xs, frame)
        if table is None:
            return None
        classes, jll = table
        return classes, _normalise(jll)

    def predict_labels_batch(
        self,
        xs: Sequence[dict[str, Any]],
        frame: NumericFrame | None = None,
        key: RowKey | None = None,
    ) -> list[Hashable | None] | None:
        """The most probable class of each instance (``argmax`` of
        :meth:`predict_proba_table`'s rows), normalising only the rows where
        the two best classes are close
        (:func:`~streameval.pipeline.learners.batch.argmax_log_rows`);
        ``None`` when :meth:`predict_proba_table` is ``None``. ``key``: the rows
        of ``xs`` in the pending buffer's feature matrix, whose per-class sums
        are then reused (:meth:`_numeric_log_likelihoods`)."""
        table = self._log_likelihood_table(xs, frame, key)
        if table is None:
            return None
        return argmax_log_rows(*table, _normalise)

    def _log_likelihood_table(
        self, xs: Sequence[dict[str, Any]], frame: NumericFrame | None, key: RowKey | None = None
    ) -> tuple[list[Hashable], np.ndarray] | None:
        """The classes and the joint log-likelihoods ``(n, K)``, finite, or ``None``."""
        counts = self.gaussian.class_counts
        if not counts:
            return [], np.zeros((len(xs), 0))
        if not xs:
            return list(counts), np.zeros((0, len(counts)))
        if frame is None:
            frame = NumericFrame(xs)
        if frame.odd or set(self.multinomial.class_counts) != set(counts):
            return None
        classes = list(counts)
        total = sum(counts.values())
        prior = np.array([math.log(counts[c] / total) for c in classes])
        numeric = self._numeric_log_likelihoods(frame, classes, key)
        jll = prior + numeric
        jll = self._add_categorical(jll, frame, classes)
        if not np.isfinite(jll).all():
            return None
        return classes, jll

    def _numeric_log_likelihoods(
        self, frame: NumericFrame, classes: list[Hashable], key: RowKey | None = None
    ) -> np.ndarray:
        """``sum`` over the numeric features of each instance of river's
        ``log(1e-9 + pdf)``, shape ``(n, K)``.

        With ``key`` (the batch's rows in the pending buffer's feature matrix),
        the sums are kept per row and class and only those of the classes
        learned since a row was last predicted are computed again (see
        :class:`_RowSums`).
        """
        n, k = frame.values.shape[0], len(classes)
        features = tuple(frame.index)
        if not features:
            return np.zeros((n, k))
        mean, sigma = self._gaussian_parameters(features, tuple(classes))
        if key is None:
            return self._numeric_block(frame.values, frame.present, mean, sigma)
        cache = self.__dict__.get("_row_sums")
        if (
            not isinstance(cache, _RowSums)
            or cache.source != key.source
            or (cache.features != features)
        ):
            cache = self.__dict__["_row_sums"] = _RowSums(key.source, features)
        counts = np.array([self.gaussian.class_counts[c] for c in classes], dtype=np.int64)
        cols = cache.columns(classes, int(key.rows.max()) + 1)
        rows = key.rows
        new = cache.stamps[rows] != key.stamps  # rows never computed with these contents
        stale = cache.counts[rows[:, None], cols[None, :]] != counts[None, :]  # (n, K)
        stale[new] = True
        # Two blocks: the new rows, every class (an instance's first round); the others,
        # the classes learned since their last round (the same for all of them: the rows
        # of a round were last predicted together, K labels ago).
        for need_r in (np.flatnonzero(new), np.flatnonzero(~new & stale.any(axis=1))):
            if not len(need_r):
                continue
            need_c = np.flatnonzero(stale[need_r].any(axis=0))
            block = self._numeric_block(
                frame.values[need_r], frame.present[need_r], mean[:, need_c], sigma[:, need_c]
            )
            where_r, where_c = rows[need_r][:, None], cols[need_c][None, :]
            cache.sums[where_r, where_c] = block
            cache.counts[where_r, where_c] = counts[need_c][None, :]
        cache.stamps[rows[new]] = key.stamps[new]
        return cache.sums[rows[:, None], cols[None, :]]

    def _numeric_block(
        self, values_: np.ndarray, present_: np.ndarray, mean: np.ndarray, sigma: np.ndarray
    ) -> np.ndarray:
        """The sums of :meth:`_numeric_log_likelihoods` for rows ``values_`` (with
        ``present_``) and the classes of ``mean`` and ``sigma`` (``(F, K, 1)``)."""
        n, k, f = values_.shape[0], mean.shape[1], mean.shape[0]
        out = np.empty((n, k))
        for start in range(0, n, self.chunk):
            stop = min(n, start + self.chunk)
            values = values_[start:stop].T[:, None, :]  # (F, 1, rows)
            ll = scratch("mixed-nb", (f, k, stop - start))
            # River: log(1e-9 + exp(-0.5 * z * z) / sqrt(2 pi) / sigma), z = (x - mu) / sigma.
            with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
                np.subtract(values, mean, out=ll)
                np.divide(ll, sigma, out=ll)
                np.multiply(ll, ll, out=ll)
                np.multiply(ll, -0.5, out=ll)  # exact: -0.5 * (z * z) == (-0.5 * z) * z
                np.exp(ll, out=ll)
                np.divide(ll, SQRT_TAU, out=ll)
                np.divide(ll, sigma, out=ll)
                np.add(ll, PDF_EPS, out=ll)
                np.log(ll, out=ll)
            point = sigma == 0.0  # (F, K, 1): a point mass (z is 0 / 0 or x / 0 there)
            if point.any():
                hit = np.where(values == mean, LOG_ONE_EPS, LOG_PDF_EPS)
                np.copyto(ll, hit, where=point)
            present = present_[start:stop].T
            if not present.all():
                np.multiply(ll, present[:, None, :], out=ll)  # absent features add nothing
            if k * (stop - start) == 1:
                # numpy would sum a lone column pairwise; every other shape (and river)
                # adds the features one after the other: so does this
                out[start:stop] = sum(ll.ravel().tolist())
            else:
                out[start:stop] = np.add.reduce(ll, axis=0).T
        return out

    def _gaussian_parameters(
        self, features: tuple[str, ...], classes: tuple[Hashable, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of each feature's Gaussian in each class,
        ``(F, K, 1)`` arrays; a class without a Gaussian for a feature gets sigma
        ``inf``: ``z = 0 / inf`` and a density of 0, so ``log(1e-9)`` as in river; a
        class whose values of the feature are all equal gets sigma 0, their value as
        the mean, and :meth:`_numeric_block` gives it the point mass of
        :class:`PointMassGaussianNB`.

        Kept between calls: learning an instance changes the count of its class
        and the Gaussians of that class only, so only the classes whose count
        changed are read again.
        """
        counts = tuple(self.gaussian.class_counts[c] for c in classes)
        layout = (id(self.gaussian), features, classes)
        cached = self.__dict__.get("_batch_parameters")
        if cached is None or cached[0] != layout:
            mean = np.zeros((len(features), len(classes), 1))
            sigma = np.full((len(features), len(classes), 1), np.inf)
            changed = range(len(classes))
        else:
            _, known, mean, sigma = cached
            if known == counts:
                return mean, sigma
            changed = [j for j, (a, b) in enumerate(zip(counts, known, strict=True)) if a != b]
        for j in changed:
            table = self.gaussian.gaussians.get(classes[j], {})
            for f, feature in enumerate(features):
                mu, sd = 0.0, math.inf
                gaussian = table.get(feature)
                if gaussian is not None:
                    var = gaussian._var
                    count = var.mean.n
                    if _is_point(var):
                        mu, sd = var.mean._mean, 0.0
                    elif count > var.ddof:
                        mu, sd = var.mean._mean, math.sqrt(var._S / (count - var.ddof))
                mean[f, j, 0] = mu
                sigma[f, j, 0] = sd
        self.__dict__["_batch_parameters"] = (layout, counts, mean, sigma)
        return mean, sigma

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
            # What ``self.categorical`` (SelectType(str) | OneHotEncoder(drop_zeros)) gives.
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

    @property
    def _multiclass(self) -> bool:
        return True
