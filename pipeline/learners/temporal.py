"""Wrappers that let any classifier use the temporal dependence of the labels.

Žliobaitė, Bifet, Read, Pfahringer & Holmes, *Evaluation methods and decision
theory for classification of streaming data with temporal dependence*
(``temporal-dependence-evaluation-journal.txt``), sect. 3:

* :class:`TemporallyAugmented` (sect. 3.2, eq. 4) appends the ``n_labels``
  previous labels to the features, as categorical features ``_y_lag1``, ``_y_lag2``, ...
  and lets the wrapped classifier learn what they say;
* :class:`TemporalCorrection` (sect. 3.1, eq. 3) multiplies the wrapped
  classifier's probabilities by ``P(y_t=i | y_{t-1}) / P(y_t=i)``, both
  estimated from the label stream with an exponential moving average
  (sect. 6.3).

The paper assumes that ``y_{t-1}`` is known when ``y_t`` is predicted. When
labels are delayed it is not, and sect. 8 names the two ways out: use an older
label, or the previous *predicted* label. Both wrappers read the labels
released so far from the experiment's
:class:`~streameval.pipeline.learners.base.StreamContext`, which the experiment
hands them with :meth:`~TemporallyAugmented.bind` (see
:func:`~streameval.pipeline.learners.base.bind_context`); the ``fill`` option
of :class:`TemporallyAugmented` chooses between the two ways. Unbound, they
keep their own history of the labels they learn, which is right under
immediate labels (the plain test-then-train loop): they are river
classifiers (``river.base.Wrapper``) and run as they are in river's
``progressive_val_score``. The context is not a constructor parameter, so
``clone()`` gives an unbound, untrained copy.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Literal

from river import base as river_base
from streameval.pipeline.learners.base import (
    Features,
    Proba,
    StreamContext,
    argmax,
    bind_context,
)
from streameval.pipeline.learners.mixins import LearnerWrapper, ProbaMixin, check_aligned
from streameval.pipeline.learners.river_adapter import as_learner

#: The value of a lag feature whose label is not known (start of the stream, or
#: a label neither received nor predicted yet).
MISSING = "?"

Fill = Literal["received", "predicted"]


def lag_feature(k: int) -> str:
    """The name of the feature that holds the label ``k`` steps back.

    >>> lag_feature(1)
    '_y_lag1'
    """
    return f"_y_lag{k}"


class TemporallyAugmented(ProbaMixin, LearnerWrapper, river_base.Classifier):
    """Temporally Augmented classifier (sect. 3.2, eq. 4): ``h(X_t, y_{t-1}, ..., y_{t-l})``.

    The instance is passed to ``model`` with ``n_labels`` extra ``str``
    features: ``_y_lag1`` for the newest previous label, ...
    ``_y_lag{n_labels}`` for the oldest, each ``str(label)`` or :data:`MISSING`
    (``"?"``) when unknown. A feature of ``x`` with one of these names is
    overwritten. Being strings, the labels are nominal attributes for Hoeffding
    trees and forests and categorical features for
    :class:`~streameval.pipeline.learners.naive_bayes.MixedNB`; models that
    need numbers get them one-hot encoded (see
    :func:`~streameval.pipeline.learners.river_adapter.with_one_hot`). ``model``
    is any classifier :func:`~streameval.pipeline.learners.river_adapter.as_learner`
    accepts.

    Which labels are "previous" once the wrapper is bound to the experiment's
    stream context (:meth:`bind`):

    * ``fill="received"``: the ``n_labels`` labels most recently *received*
      when the call is made, newest first. With immediate labels these are
      ``y_{t-1}, ..., y_{t-l}`` exactly as in the paper; with delayed labels
      they are older labels (the first option of sect. 8), and they may even
      belong to instances that arrived *after* this one if labels come out of
      order.
    * ``fill="predicted"``: the labels of the instances that arrived just
      before this one (arrival indices ``at-1``, ..., ``at-l``): the true label
      if it has been received, else this wrapper's own latest prediction for
      that instance (the second option of sect. 8), else :data:`MISSING`. The
      wrapper remembers its latest predicted label per arrival index; it
      forgets one when that instance is learned (its true label takes over)
      and keeps at most ``max_predictions`` of them. Calls without ``at`` use
      ``fill="received"``. The experiment must keep the labels of instances
      that may still be some pending instance's predecessors
      (:meth:`~streameval.pipeline.learners.base.StreamContext.forget_before`).

    Unbound, both settings mean the last ``n_labels`` labels this wrapper
    learned, i.e. the paper's setting under immediate labels (river's
    test-then-train loop).

    Training uses the previous labels as they are known *at training time*.
    Under a delay ``d``, instance ``t`` is learned when its label arrives, when
    ``y_{t-1}`` is usually known too, whereas it was first predicted when the
    newest known label was about ``y_{t-d-1}``: the model learns the (strong)
    lag-1 dependence but is then asked with staler labels (``"received"``) or
    with its own guesses (``"predicted"``), and tends to over-trust the lag
    features. This is the honest outcome of delay, not a bug, and what the
    delayed-label experiments measure.

    >>> from streameval.pipeline.learners.baselines import Majority
    >>> class Show(Majority):
    ...     def predict_proba_one(self, x, *, at=None):
    ...         print(x)
    ...         return super().predict_proba_one(x, at=at)
    >>> model = TemporallyAugmented(Show(), n_labels=2)
    >>> model.learn_one({"a": 1.0}, "UP")
    >>> model.predict_proba_one({"a": 2.0})
    {'a': 2.0, '_y_lag1': 'UP', '_y_lag2': '?'}
    {'UP': 1.0}

    Bound to a context, the lags are the labels the experiment has released:

    >>> ctx = StreamContext()
    >>> model = TemporallyAugmented(Show(), n_labels=2)
    >>> model.bind(ctx)
    >>> ctx.receive(ctx.arrive(), "DOWN")
    >>> model.lag_features()
    {'_y_lag1': 'DOWN', '_y_lag2': '?'}
    >>> model.clone().lag_features()  # a clone is unbound and untrained
    {'_y_lag1': '?', '_y_lag2': '?'}
    """

    def __init__(
        self,
        model: Any,
        n_labels: int = 1,
        fill: Fill = "received",
        max_predictions: int = 100_000,
    ) -> None:
        if isinstance(n_labels, bool) or not isinstance(n_labels, int) or n_labels < 1:
            raise ValueError(f"n_labels must be an int >= 1, got {n_labels!r}")
        if fill not in ("received", "predicted"):
            raise ValueError(f"fill must be 'received' or 'predicted', got {fill!r}")
        if max_predictions < 1:
            raise ValueError(f"max_predictions must be >= 1, got {max_predictions!r}")
        self.model = model
        self.n_labels = n_labels
        self.fill = fill
        self.max_predictions = max_predictions
        self._learner = as_learner(model)
        self._context: StreamContext | None = None
        self._learned: deque[Hashable] = deque(maxlen=n_labels)
        self._predicted: dict[int, Hashable] = {}

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        from river import tree
        from streameval.pipeline.learners.naive_bayes import MixedNB

        yield {"model": tree.HoeffdingTreeClassifier()}
        yield {"model": MixedNB(), "n_labels": 2}

    def bind(self, context: StreamContext) -> None:
        """Read the previous labels from ``context`` (which is asked to keep
        ``n_labels`` of them) instead of this wrapper's own history; the
        wrapped model is bound too."""
        context.require_recent(self.n_labels)
        self._context = context
        bind_context(self._learner, context)

    def previous_labels(self, at: int | None = None) -> list[Hashable | None]:
        """The ``n_labels`` labels before the instance ``at``, newest first, ``None`` if unknown."""
        if self._context is None:
            known = list(reversed(self._learned))
        elif self.fill == "predicted" and at is not None:
            known = [self._label_or_prediction(at - k) for k in range(1, self.n_labels + 1)]
        else:
            known = list(self._context.recent_labels(self.n_labels))
        return known + [None] * (self.n_labels - len(known))

    def _label_or_prediction(self, index: int) -> Hashable | None:
        if index < 0 or self._context is None:
            return None
        y = self._context.label_at(index)
        return self._predicted.get(index) if y is None else y

    def augment(self, x: Features, at: int | None = None) -> dict[str, Any]:
        """``x`` plus the lag features for the instance ``at``."""
        z = dict(x)
        z.update(self.lag_features(at))
        return z

    def lag_features(self, at: int | None = None) -> dict[str, str]:
        """The lag features of the instance ``at``: ``{"_y_lag1": ..., ...}``."""
        return {
            lag_feature(k): MISSING if y is None else str(y)
            for k, y in enumerate(self.previous_labels(at), start=1)
        }

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None, **kwargs: Any) -> None:
        self._learner.learn_one(self.augment(x, at), y, at=at, **kwargs)
        if self._context is None:
            self._learned.append(y)
        elif at is not None:
            self._predicted.pop(at, None)

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        proba = self._learner.predict_proba_one(self.augment(x, at), at=at, **kwargs)
        if self.fill == "predicted" and self._context is not None and at is not None:
            label = argmax(proba)
            if label is not None:
                self._remember(at, label)
        return proba

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Proba]:
        """All at once, in one call of the wrapped learner's ``predict_proba_many``
        (the lag features are the same for all instances: the labels received
        so far); under ``fill="predicted"`` one by one in arrival order, so
        that each prediction can use those of the instances just before it."""
        if at is not None:
            check_aligned(xs, at)
        if at is None or self.fill != "predicted" or self._context is None:
            lags = self.lag_features()
            augmented = []
            for x in xs:
                z = dict(x)
                z.update(lags)
                augmented.append(z)
            return self._learner.predict_proba_many(augmented, at=at, **kwargs)
        out: list[Proba] = [{} for _ in xs]
        for pos in sorted(range(len(xs)), key=lambda p: at[p]):
            out[pos] = self.predict_proba_one(xs[pos], at=at[pos], **kwargs)
        return out

    def _remember(self, at: int, label: Hashable) -> None:
        self._predicted[at] = label
        while len(self._predicted) > self.max_predictions:
            # Dicts keep insertion order: the first key is the earliest first prediction.
            del self._predicted[next(iter(self._predicted))]


class TemporalCorrection(ProbaMixin, LearnerWrapper, river_base.Classifier):
    """Temporal Correction classifier (sect. 3.1, eq. 3).

    ``P(y_t=i | X_t, y_{t-1})`` is taken proportional to
    ``P(y_t=i | y_{t-1}) / P(y_t=i) * P(y_t=i | X_t)``, where the last factor is
    the wrapped classifier's probability (``model``, any classifier
    :func:`~streameval.pipeline.learners.river_adapter.as_learner` accepts),
    ``y_{t-1}`` is the most recently received label of the stream context
    the wrapper is bound to (:meth:`bind`; unbound, its own last learned
    label), and the products are renormalised to sum to one.

    The two label statistics are exponential moving averages with weight
    ``alpha`` for the newest observation (sect. 6.3 uses 0.001 on Elec): with
    ``f = 1 - alpha``, ``S_i <- f S_i + [y = i]`` and ``N <- f N + 1``, and
    ``P(y=i) = S_i / N`` -- the fading-factor estimate of
    ``prequential-error-fading-factors.txt`` (sect. 3.2.1, eq. 1 and Algorithm
    3, with fading factor ``f``), which, unlike a moving average started at zero, is not biased
    towards zero at the start. ``P(y_t=i | y_{t-1}=j)`` is the same estimate
    over the transitions out of ``j`` only, transitions being counted in the
    order the labels arrive (previous received label -> new label).

    Zero estimates: the factor is ``(P(i|j) + eps) / (P(i) + eps)``, so a class
    never seen by this wrapper (``0/0``) keeps the base probability unchanged
    (factor 1), and a class never seen after ``j`` is all but ruled out, as eq.
    3 says. No correction is applied before a transition out of the previous
    label has been seen, and when the corrected scores sum to zero (or are
    not finite) the base probabilities are returned unchanged. Classes absent
    from the base classifier's answer stay absent. New classes may appear at
    any time.

    >>> from streameval.pipeline.learners.baselines import Majority
    >>> model = TemporalCorrection(Majority(), alpha=0.5)
    >>> for y in ("a", "a", "b", "b"):
    ...     model.learn_one({}, y)
    >>> model.prior("b"), model.transition("b", "b"), model.transition("a", "b")
    (0.8, 1.0, 0.6666666666666666)
    >>> proba = model.predict_proba_one({})  # Majority says 1/2 each, but "b" follows "b"
    >>> {label: round(p, 6) for label, p in proba.items()}
    {'a': 0.0, 'b': 1.0}
    >>> model.clone().prior("b")  # untrained copy, same alpha
    0.0
    """

    #: Added to both sides of the correction factor so that no estimate divides by zero.
    eps: float = 1e-9

    def __init__(self, model: Any, alpha: float = 0.001) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.model = model
        self.alpha = alpha
        self._learner = as_learner(model)
        self._context: StreamContext | None = None
        self._prior: dict[Hashable, float] = {}
        self._prior_weight = 0.0
        self._rows: dict[Hashable, dict[Hashable, float]] = {}
        self._row_weight: dict[Hashable, float] = {}
        self._last: Hashable | None = None

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        from river import naive_bayes, tree

        yield {"model": naive_bayes.GaussianNB()}
        yield {"model": tree.HoeffdingTreeClassifier(), "alpha": 0.01}

    def bind(self, context: StreamContext) -> None:
        """Read ``y_{t-1}`` from ``context`` instead of this wrapper's own
        history; the wrapped model is bound too."""
        context.require_recent(1)
        self._context = context
        bind_context(self._learner, context)

    def previous_label(self) -> Hashable | None:
        """``y_{t-1}``: the most recently received label, ``None`` before any."""
        if self._context is None:
            return self._last
        recent = self._context.recent_labels(1)
        return recent[0] if recent else None

    def prior(self, label: Hashable) -> float:
        """The moving-average estimate of ``P(y = label)`` (0 before any label)."""
        if not self._prior_weight:
            return 0.0
        return self._prior.get(label, 0.0) / self._prior_weight

    def transition(self, previous: Hashable, label: Hashable) -> float:
        """The moving-average estimate of ``P(y_t = label | y_{t-1} = previous)``."""
        weight = self._row_weight.get(previous, 0.0)
        if not weight:
            return 0.0
        return self._rows[previous].get(label, 0.0) / weight

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None, **kwargs: Any) -> None:
        previous = self.previous_label()
        self._prior_weight = self._fade(self._prior, self._prior_weight, y)
        if previous is not None:
            row = self._rows.setdefault(previous, {})
            self._row_weight[previous] = self._fade(row, self._row_weight.get(previous, 0.0), y)
        self._last = y
        self._learner.learn_one(x, y, at=at, **kwargs)

    def _fade(self, sums: dict[Hashable, float], weight: float, y: Hashable) -> float:
        keep = 1.0 - self.alpha
        for label in sums:
            sums[label] *= keep
        sums[y] = sums.get(y, 0.0) + 1.0
        return keep * weight + 1.0

    def factors(
        self, previous: Hashable | None, labels: Sequence[Hashable]
    ) -> dict[Hashable, float]:
        """``(P(i | previous) + eps) / (P(i) + eps)`` for each label; all 1 when
        nothing is known about the transitions out of ``previous``."""
        if previous is None or not self._row_weight.get(previous):
            return dict.fromkeys(labels, 1.0)
        return {
            label: (self.transition(previous, label) + self.eps) / (self.prior(label) + self.eps)
            for label in labels
        }

    def correct(self, proba: Proba, previous: Hashable | None) -> Proba:
        """Eq. 3 applied to the base probabilities ``proba``, renormalised."""
        if not proba:
            return {}
        return self._apply(proba, self.factors(previous, list(proba)))

    @staticmethod
    def _apply(proba: Proba, factors: dict[Hashable, float]) -> Proba:
        """``proba`` times ``factors``, renormalised (unchanged if that is impossible)."""
        if not proba:
            return {}
        scores = {label: p * factors[label] for label, p in proba.items()}
        total = sum(scores.values())
        if not (total > 0.0 and math.isfinite(total)):
            return dict(proba)
        return {label: s / total for label, s in scores.items()}

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        proba = self._learner.predict_proba_one(x, at=at, **kwargs)
        return self.correct(proba, self.previous_label())

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Proba]:
        previous = self.previous_label()
        out: list[Proba] = []
        factors: dict[tuple[Hashable, ...], dict[Hashable, float]] = {}
        for proba in self._learner.predict_proba_many(xs, at=at, **kwargs):
            labels = tuple(proba)
            known = factors.get(labels)
            if known is None:
                known = factors[labels] = self.factors(previous, labels)
            out.append(self._apply(proba, known))
        return out
