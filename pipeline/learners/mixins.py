"""Small defaults shared by the learners of this package.

* :class:`StreamLearner` marks a class that speaks the streameval protocol
  (the keyword ``at``, batch methods over lists of dicts):
  :func:`~streameval.pipeline.learners.river_adapter.as_learner` returns such
  objects unchanged.
* :class:`ProbaMixin` gives a class that implements ``predict_proba_one`` a
  ``predict_proba_many`` that loops over the instances (what river models
  need: they have no pandas-free batch prediction) and a river-style
  ``predict_one`` (the :func:`~streameval.pipeline.learners.base.argmax` of
  the probabilities, ties to the smallest label).
* :class:`LearnerWrapper` is river's ``Wrapper`` for the classes that wrap a
  model held in ``self.model`` (the adapters and the temporal wrappers).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from river import base as river_base
from streameval.pipeline.learners.base import Features, Proba, argmax


class StreamLearner:
    """A learner of this package: ``learn_one``/``predict_*`` take the keyword ``at``."""


class ProbaMixin(StreamLearner):
    """``predict_proba_many`` and ``predict_one`` from ``predict_proba_one``.

    Extra keyword arguments (river passes some through pipelines and
    wrappers) are accepted and handed on to ``predict_proba_one``.
    """

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        raise NotImplementedError

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Proba]:
        """Probabilities for each instance, in order; ``at`` aligned with ``xs``."""
        if at is None:
            return [self.predict_proba_one(x, **kwargs) for x in xs]
        check_aligned(xs, at)
        return [self.predict_proba_one(x, at=i, **kwargs) for x, i in zip(xs, at, strict=True)]

    def predict_labels_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Hashable | None]:
        """The most probable label of each instance (:func:`argmax` of
        :meth:`predict_proba_many`); learners that can rank a whole batch at
        once override it."""
        return [argmax(p) for p in self.predict_proba_many(xs, at=at, **kwargs)]

    def predict_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Hashable | None:
        """The most probable label, ``None`` before any class is known."""
        return argmax(self.predict_proba_one(x, at=at, **kwargs))


class LearnerWrapper(river_base.Wrapper):
    """River's ``Wrapper`` for a class that keeps the wrapped model in ``self.model``.

    The wrapped model may be a river estimator or any object that speaks the
    streameval protocol; tags and the multiclass flag come from the former
    (an object without them is taken as supervised and multiclass).
    """

    model: Any

    @property
    def _wrapped_model(self) -> Any:
        return self.model

    def _more_tags(self) -> set[str]:
        return set(getattr(self.model, "_tags", ()))

    @property
    def _supervised(self) -> bool:
        return True

    @property
    def _multiclass(self) -> bool:
        return bool(getattr(self.model, "_multiclass", True))


def check_aligned(xs: Sequence[Features], at: Sequence[int]) -> None:
    """Fail loudly when the arrival indices do not match the instances one to one.

    >>> check_aligned([{}, {}], [3])
    Traceback (most recent call last):
    ...
    ValueError: 2 instances but 1 arrival indices
    """
    if len(xs) != len(at):
        raise ValueError(f"{len(xs)} instances but {len(at)} arrival indices")
