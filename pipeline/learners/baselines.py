"""Baselines that look only at the labels, never at the features.

Žliobaitė, Bifet, Read, Pfahringer & Holmes, *Evaluation methods and decision
theory for classification of streaming data with temporal dependence*
(``temporal-dependence-evaluation-journal.txt``), sect. 4.1:

* :class:`NoChange` is the Persistent classifier of Definition 3: it predicts
  the label it saw last. Its accuracy is ``P(y_t = y_{t-1})`` (eq. 7), the
  reference of the Kappa-Temporal statistic.
* :class:`Majority` is the Majority Class classifier of Definition 2: it
  predicts the most frequent label (eq. 6), here over the whole history or a
  sliding window of the last ``window`` labels.

:class:`TargetMean` is the regression counterpart of :class:`Majority`.

"Last" and "most frequent" are in the order the labels were *learned*, which
is the order in which they arrived: under delayed labels :class:`NoChange`
repeats the newest label it has received, not the label of the previous
instance. All three accept new classes at any time, and give the same answer
to every pending instance, so their ``*_many`` methods compute it once.

They are river estimators (``river.base.Classifier`` and ``Regressor``): they
run in river's ``progressive_val_score`` and pass river's
``check_estimator``. As river's ``dummy.NoChangeClassifier`` does, the two
classifiers give every label they have learned a probability, 0 for the
labels they do not predict.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Hashable, Sequence
from typing import Any

from river import base as river_base
from streameval.pipeline.learners.base import Features, Proba, argmax
from streameval.pipeline.learners.mixins import ProbaMixin, StreamLearner, check_aligned


def _check_window(window: int | None) -> None:
    if window is not None and (isinstance(window, bool) or window < 1):
        raise ValueError(f"window must be a positive int or None, got {window!r}")


class _SameForEveryInstance(ProbaMixin, river_base.Classifier):
    """Batch predictions of a baseline that ignores the features: one prediction, repeated."""

    @property
    def _multiclass(self) -> bool:
        return True

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Proba]:
        if at is not None:
            check_aligned(xs, at)
        proba = self.predict_proba_one({})
        return [dict(proba) for _ in xs]

    def predict_labels_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Hashable | None]:
        """The same label for every instance: one :func:`argmax`."""
        if at is not None:
            check_aligned(xs, at)
        return [argmax(self.predict_proba_one({}))] * len(xs)


class NoChange(_SameForEveryInstance):
    """Persistent classifier (Definition 3): predict the last learned label.

    >>> model = NoChange()
    >>> model.predict_proba_one({})
    {}
    >>> for y in ("UP", "UP", "DOWN"):
    ...     model.learn_one({}, y)
    >>> model.predict_proba_one({"nswprice": 0.1})
    {'UP': 0.0, 'DOWN': 1.0}
    >>> model.predict_one({})
    'DOWN'
    """

    def __init__(self) -> None:
        self.last: Hashable | None = None
        self._seen: dict[Hashable, float] = {}  # every learned label, at probability 0

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None, **kwargs: Any) -> None:
        self.last = y
        if y not in self._seen:
            self._seen[y] = 0.0

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        if self.last is None:
            return {}
        proba = dict(self._seen)
        proba[self.last] = 1.0
        return proba


class Majority(_SameForEveryInstance):
    """Majority Class classifier (Definition 2), whole history or last ``window`` labels.

    The probabilities are the label frequencies, so the prediction is the most
    frequent label and a tie goes to the smallest label, as in
    :func:`~streameval.pipeline.learners.base.argmax`.

    >>> model = Majority(window=3)
    >>> for y in ("b", "b", "a", "a"):
    ...     model.learn_one({}, y)
    >>> model.predict_proba_one({})  # the window holds b, a, a
    {'b': 0.3333333333333333, 'a': 0.6666666666666666}
    >>> model.learn_one({}, "b")  # a, a, b
    >>> model.predict_one({})
    'a'
    >>> model.learn_one({}, "c"); model.learn_one({}, "c")  # b, c, c: "a" has left the window
    >>> model.predict_proba_one({})
    {'b': 0.3333333333333333, 'a': 0.0, 'c': 0.6666666666666666}
    """

    def __init__(self, window: int | None = None) -> None:
        _check_window(window)
        self.window = window
        self.counts: Counter[Hashable] = Counter()
        self._recent: deque[Hashable] | None = deque() if window is not None else None

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None, **kwargs: Any) -> None:
        self.counts[y] += 1
        if self._recent is None or self.window is None:
            return
        self._recent.append(y)
        if len(self._recent) > self.window:
            # A label that leaves the window keeps its entry, at count 0 (probability 0).
            self.counts[self._recent.popleft()] -= 1

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        total = sum(self.counts.values())
        return {label: n / total for label, n in self.counts.items()} if total else {}


class TargetMean(StreamLearner, river_base.Regressor):
    """Regression baseline: the mean of the learned targets (all, or the last ``window``).

    Non-finite targets are ignored. Predicts ``None`` before the first target.

    >>> model = TargetMean(window=2)
    >>> model.predict_one({}) is None
    True
    >>> for y in (1.0, 2.0, 4.0):
    ...     model.learn_one({}, y)
    >>> model.predict_one({})
    3.0
    """

    def __init__(self, window: int | None = None) -> None:
        _check_window(window)
        self.window = window
        self.total = 0.0
        self.count = 0
        self._recent: deque[float] = deque()
        self._updates = 0

    def learn_one(self, x: Features, y: float, *, at: int | None = None, **kwargs: Any) -> None:
        y = float(y)
        if not math.isfinite(y):
            return
        if self.window is None:
            self.total += y
            self.count += 1
            return
        self._recent.append(y)
        self.total += y
        if len(self._recent) > self.window:
            self.total -= self._recent.popleft()
        self.count = len(self._recent)
        self._updates += 1
        if self._updates % self.window == 0:
            # Re-sum now and then so that rounding errors of the running sum cannot pile up.
            self.total = math.fsum(self._recent)

    def predict_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> float | None:
        return self.total / self.count if self.count else None

    def predict_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[float | None]:
        if at is not None:
            check_aligned(xs, at)
        return [self.predict_one({})] * len(xs)
