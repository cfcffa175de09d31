"""Any river model behind the streameval learner protocol.

:class:`RiverClassifier` and :class:`RiverRegressor` add the ``at`` keyword
(ignored: a river model has no notion of arrival order), a batch method that
computes many predictions at once where this package knows how (see
:meth:`RiverClassifier.predict_proba_many`) and otherwise loops over
``predict_proba_one`` (river's batch methods need pandas), plain
``float`` probabilities, and one rule for bad feature values:

* a numeric feature that is NaN or infinite, and a feature whose value is
  ``None``, is *missing*: it is removed from the instance before the model
  sees it, for learning and for prediction alike. River models take sparse
  dicts, so a missing feature is what they handle best (a Hoeffding tree
  follows its most common branch, naive Bayes leaves the feature out of the
  likelihood, a scaler or a distance skips it);
* a regressor does not learn from a target that is not finite.

Both adapters are river ``Wrapper`` estimators: ``clone()`` clones the
wrapped model, and they run in river's own ``progressive_val_score``.
:func:`as_learner` is the way in for any model: it wraps river models and
returns the learners of this package unchanged.

Models that need numbers (kNN, linear models) get categorical (``str``)
features one-hot encoded by river's own preprocessing, see
:func:`with_one_hot`; Hoeffding trees and forests split on ``str`` features
natively. Naive Bayes should not get one-hot columns: see
:mod:`streameval.pipeline.learners.naive_bayes`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Literal

import numpy as np
from river import base as river_base
from river import compose, preprocessing
from river import tree as river_tree
from streameval.pipeline.learners.base import Features, Proba, StreamContext, argmax, bind_context
from streameval.pipeline.learners.frame import NumericFrame
from streameval.pipeline.learners.labelset import order_labels
from streameval.pipeline.learners.mixins import (
    LearnerWrapper,
    ProbaMixin,
    StreamLearner,
    check_aligned,
)
from streameval.pipeline.learners.tree_batch import TreeBatch


def _missing(value: Any) -> bool:
    kind = value.__class__
    if kind is float:
        return value - value != 0.0  # NaN for NaN and infinities
    if kind is str or kind is int or kind is bool:
        return False
    if value is None:
        return True
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and not math.isfinite(value)
    )


def clean(x: Features) -> dict[str, Any]:
    """``x`` without its missing values (``None``, NaN, infinities).

    ``x`` itself is returned when nothing is missing (the common case: no copy).

    >>> clean({"a": 1.0, "b": float("nan"), "c": "CO", "d": float("-inf"), "e": None})
    {'a': 1.0, 'c': 'CO'}
    """
    try:
        if math.isfinite(sum(x.values())):  # all numbers, none NaN or infinite
            return x  # type: ignore[return-value]
    except (TypeError, ValueError, OverflowError):  # a str, None, a huge int...: look closer
        pass
    return clean_scan(x)


def clean_scan(x: Features) -> dict[str, Any]:
    """:func:`clean` by one look at each value: cheaper than :func:`clean` for features
    that hold a ``str`` (where its sum fails), dearer for many numbers.

    >>> clean_scan({"a": 1.0, "c": "CO", "e": None})
    {'a': 1.0, 'c': 'CO'}
    """
    for value in x.values():
        kind = value.__class__
        if kind is float:
            if value - value != 0.0:  # NaN or infinite
                break
        elif kind is not str and kind is not int and _missing(value):
            break
    else:
        return x  # type: ignore[return-value]
    return {key: value for key, value in x.items() if not _missing(value)}


def cleaner_for(x: Features) -> Any:
    """The cheaper of :func:`clean` and :func:`clean_scan` for a stream whose first
    instance is ``x`` (both give the same answer for any instance).

    >>> cleaner_for({"a": 1.0, "c": "CO"}).__name__, cleaner_for({"a": 1.0}).__name__
    ('clean_scan', 'clean')
    """
    return clean_scan if any(v.__class__ is str for v in x.values()) else clean


def _clean_batch(xs: Sequence[Features]) -> tuple[list[dict[str, Any]], NumericFrame]:
    """``[clean(x) for x in xs]`` and its :class:`~streameval.pipeline.learners.frame.NumericFrame`;
    the instances are only looked at again when some value is not a finite
    number or a ``str``. A :class:`~streameval.pipeline.reeval.rows.PendingRows` batch
    brings its frame along (kept by the pending buffer): nothing is converted."""
    ready = getattr(xs, "frame", None)  # a PendingRows batch of the re-evaluation buffer
    if isinstance(ready, NumericFrame):
        dirty = getattr(xs, "needs_clean", True)
        return ([clean(x) for x in xs] if dirty else list(xs)), ready
    batch: list[dict[str, Any]] = list(xs)  # type: ignore[arg-type]
    frame = NumericFrame(batch)
    if frame.odd or not np.isfinite(frame.values).all():
        batch = [clean(x) for x in batch]
        frame = NumericFrame(batch)
    return batch, frame


def _clean_tree_batch(xs: Sequence[Features]) -> tuple[list[dict[str, Any]], NumericFrame | None]:
    """``[clean(x) for x in xs]``, and the frame a
    :class:`~streameval.pipeline.reeval.rows.PendingRows`
    batch brings (``None``: the tree code makes one if a leaf needs it)."""
    ready = getattr(xs, "frame", None)
    if isinstance(ready, NumericFrame):
        return ([clean(x) for x in xs] if getattr(xs, "needs_clean", True) else list(xs)), ready
    return [clean(x) for x in xs], None


def with_one_hot(model: river_base.Estimator, *, scale: bool = False) -> compose.Pipeline:
    """``model`` fed with numeric features as they are (or standardised) and
    ``str`` features one-hot encoded, all by river transformers.

    >>> from river import naive_bayes
    >>> pipe = with_one_hot(naive_bayes.GaussianNB())
    >>> pipe.learn_one({"Length": 205.0, "Airline": "CO"}, "1")
    >>> sorted(pipe.transform_one({"Length": 222.0, "Airline": "US"}))
    ['Airline_CO', 'Airline_US', 'Length']
    """
    numeric: river_base.Transformer = compose.SelectType(numbers.Number)
    if scale:
        numeric = numeric | preprocessing.StandardScaler()
    categorical = compose.SelectType(str) | preprocessing.OneHotEncoder()
    return compose.TransformerUnion(numeric, categorical) | model


Task = Literal["classification", "regression"]


class RiverClassifier(ProbaMixin, LearnerWrapper, river_base.Classifier):
    """A river classifier (or a pipeline ending in one) as a streameval learner.

    A classifier that only predicts labels (no ``predict_proba_one``, or one
    that raises ``NotImplementedError``) gives probability 1 to the label it
    predicts.

    >>> from river import tree
    >>> model = RiverClassifier(tree.HoeffdingTreeClassifier())
    >>> model.predict_proba_one({"Airline": "CO", "Length": 205.0})
    {}
    >>> model.learn_one({"Airline": "CO", "Length": 205.0}, "1", at=0)
    >>> model.predict_proba_one({"Airline": "US", "Length": float("nan")}, at=1)
    {'1': 1.0}
    >>> fresh = model.clone()  # untrained, same parameters
    >>> fresh.predict_proba_one({"Length": 205.0}), repr(fresh) == repr(model)
    ({}, True)
    """

    def __init__(self, model: river_base.Classifier) -> None:
        # labels in first-seen order, not a set's hash order (see learners.labelset)
        self.model = order_labels(model)
        self._trees = TreeBatch()

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        from river import naive_bayes

        yield {"model": naive_bayes.GaussianNB()}
        yield {"model": river_tree.HoeffdingTreeClassifier()}

    def bind(self, context: StreamContext) -> None:
        """Pass the stream context on to the wrapped model, if it reads one."""
        bind_context(self.model, context)

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None, **kwargs: Any) -> None:
        self.model.learn_one(clean(x), y, **kwargs)

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        x = clean(x)
        proba_one = getattr(self.model, "predict_proba_one", None)
        if proba_one is not None:
            try:
                proba = proba_one(x, **kwargs)
            except NotImplementedError:  # river's default for label-only classifiers
                pass
            else:
                return {label: float(p) for label, p in proba.items()}
        label = self.model.predict_one(x, **kwargs)
        return {} if label is None else {label: 1.0}

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Proba]:
        """``predict_proba_one`` of each instance, in order, computed together.

        Batched (same answers, see :mod:`streameval.pipeline.learners.tree_batch` and
        :meth:`~streameval.pipeline.learners.naive_bayes.MixedNB.predict_proba_batch`)
        for a model with a ``predict_proba_batch`` method (``MixedNB``, which must
        give ``float`` probabilities) and for river's ``HoeffdingTreeClassifier``
        and ``HoeffdingAdaptiveTreeClassifier``; a loop over ``predict_proba_one``
        for any other model.
        """
        if at is not None:
            check_aligned(xs, at)
        model = self.model
        batch = getattr(model, "predict_proba_batch", None)
        if batch is not None and not isinstance(model, compose.Pipeline):
            return batch(*_clean_batch(xs))  # type: ignore[no-any-return]
        if TreeBatch.supports(model):
            return self._trees.predict(model, *_clean_tree_batch(xs))
        return [self.predict_proba_one(x, **kwargs) for x in xs]

    def predict_labels_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Hashable | None]:
        """``[argmax(p) for p in self.predict_proba_many(xs)]``, without making
        the dicts where the batch code ranks a matrix (a model with
        ``predict_labels_batch`` such as ``MixedNB``, plain Hoeffding trees:
        see :func:`~streameval.pipeline.learners.logmath.argmax_log_rows`)."""
        if at is not None:
            check_aligned(xs, at)
        model = self.model
        ranked = getattr(model, "predict_labels_batch", None)
        if ranked is not None and not isinstance(model, compose.Pipeline):
            batch, frame = _clean_batch(xs)
            key = getattr(xs, "key", None) if getattr(xs, "frame", None) is frame else None
            got = ranked(batch, frame, key) if key is not None else ranked(batch, frame)
            if got is not None:
                return got  # type: ignore[no-any-return]
            return [argmax(self.predict_proba_one(x)) for x in xs]
        if type(model) is river_tree.HoeffdingTreeClassifier:
            batch, frame = _clean_tree_batch(xs)
            key = getattr(xs, "key", None) if getattr(xs, "frame", None) is frame else None
            return self._trees.predict_labels(model, batch, frame, key)
        return [argmax(p) for p in self.predict_proba_many(xs, **kwargs)]


class RiverRegressor(StreamLearner, LearnerWrapper, river_base.Regressor):
    """A river regressor (or a pipeline ending in one) as a streameval learner.

    >>> from river import tree
    >>> model = RiverRegressor(tree.HoeffdingTreeRegressor(leaf_prediction="mean"))
    >>> model.learn_one({"x": 1.0}, 2.0)
    >>> model.learn_one({"x": 2.0}, float("nan"))  # ignored
    >>> model.predict_one({"x": float("inf")})
    2.0
    >>> model.clone().predict_one({"x": 1.0})  # untrained: river's tree says 0
    0.0
    """

    def __init__(self, model: river_base.Regressor) -> None:
        self.model = model

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        from river import linear_model

        yield {"model": preprocessing.StandardScaler() | linear_model.LinearRegression()}
        yield {"model": river_tree.HoeffdingTreeRegressor()}

    def bind(self, context: StreamContext) -> None:
        """Pass the stream context on to the wrapped model, if it reads one."""
        bind_context(self.model, context)

    def learn_one(self, x: Features, y: float, *, at: int | None = None, **kwargs: Any) -> None:
        y = float(y)
        if math.isfinite(y):
            self.model.learn_one(clean(x), y, **kwargs)

    def predict_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> float | None:
        y = self.model.predict_one(clean(x), **kwargs)
        return None if y is None else float(y)

    def predict_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[float | None]:
        if at is not None:
            check_aligned(xs, at)
        return [self.predict_one(x, **kwargs) for x in xs]


def _named(obj: Any) -> str:
    """``obj`` for a one-line message: its repr if short, else its class."""
    text = repr(obj)
    if "\n" in text or len(text) > 60:
        return f"a {type(obj).__name__}"
    return text


def as_learner(model: Any, task: Task = "classification") -> Any:
    """``model`` as a streameval learner for ``task``.

    * a learner of this package (baselines, temporal wrappers, adapters) is
      returned unchanged, as is any object that already speaks the protocol
      (``predict_proba_many``, resp. ``predict_many``, beside ``learn_one``);
    * a river classifier, resp. regressor (or a pipeline ending in one), or
      any other object with ``learn_one`` and ``predict_proba_one`` or
      ``predict_one``, is wrapped in :class:`RiverClassifier`, resp.
      :class:`RiverRegressor`;
    * anything else raises a one-line ``TypeError``.

    >>> from river import linear_model, naive_bayes
    >>> as_learner(naive_bayes.GaussianNB())
    RiverClassifier (
      model=GaussianNB ()
    )
    >>> from streameval.pipeline.learners.baselines import NoChange
    >>> model = NoChange()
    >>> as_learner(model) is model
    True
    >>> as_learner(with_one_hot(naive_bayes.GaussianNB())).model.steps.keys()
    odict_keys(['TransformerUnion', 'GaussianNB'])
    >>> as_learner(linear_model.LinearRegression())
    Traceback (most recent call last):
    ...
    TypeError: a LinearRegression is a river regressor, not a classification learner
    >>> as_learner(42, task="regression")
    Traceback (most recent call last):
    ...
    TypeError: 42 is not a regression learner: it needs learn_one and predict_one
    """
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
    classification = task == "classification"
    kind, other = (
        (river_base.Classifier, river_base.Regressor)
        if classification
        else (river_base.Regressor, river_base.Classifier)
    )
    if isinstance(model, river_base.Estimator):
        if isinstance(model, kind):
            return model if isinstance(model, StreamLearner) else _adapter(model, classification)
        if isinstance(model, other):
            found = "regressor" if classification else "classifier"
            raise TypeError(f"{_named(model)} is a river {found}, not a {task} learner")
        raise TypeError(f"{_named(model)} is neither a river classifier nor a regressor")
    batch = "predict_proba_many" if classification else "predict_many"
    predicts = ("predict_proba_one", "predict_one") if classification else ("predict_one",)
    if hasattr(model, "learn_one") and any(hasattr(model, name) for name in predicts):
        return model if hasattr(model, batch) else _adapter(model, classification)
    needs = " or ".join(predicts)
    raise TypeError(f"{_named(model)} is not a {task} learner: it needs learn_one and {needs}")


def _adapter(model: Any, classification: bool) -> RiverClassifier | RiverRegressor:
    return RiverClassifier(model) if classification else RiverRegressor(model)
