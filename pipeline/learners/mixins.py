"""Small defaults shared by the classifiers of this package.

A class that implements ``predict_proba_one`` gets from :class:`ProbaMixin`
a ``predict_proba_many`` that loops over the instances (what river models
need: they have no pandas-free batch prediction) and a river-style
``predict_one`` (the :func:`~streameval.pipeline.learners.base.argmax` of the
probabilities, ties to the smallest label), so that a learner of this package
can be used in place of a river classifier in a plain test-then-train loop.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from streameval.pipeline.learners.base import Features, Proba, argmax


class ProbaMixin:
    """``predict_proba_many`` and ``predict_one`` from ``predict_proba_one``."""

    def predict_proba_one(self, x: Features, *, at: int | None = None) -> Proba:
        raise NotImplementedError

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None
    ) -> list[Proba]:
        """Probabilities for each instance, in order; ``at`` aligned with ``xs``."""
        if at is None:
            return [self.predict_proba_one(x) for x in xs]
        check_aligned(xs, at)
        return [self.predict_proba_one(x, at=i) for x, i in zip(xs, at, strict=True)]

    def predict_labels_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None
    ) -> list[Hashable | None]:
        """The most probable label of each instance (:func:`argmax` of
        :meth:`predict_proba_many`); learners that can rank a whole batch at
        once override it."""
        return [argmax(p) for p in self.predict_proba_many(xs, at=at)]

    def predict_one(self, x: Features, *, at: int | None = None) -> Hashable | None:
        """The most probable label, ``None`` before any class is known."""
        return argmax(self.predict_proba_one(x, at=at))


def check_aligned(xs: Sequence[Features], at: Sequence[int]) -> None:
    """Fail loudly when the arrival indices do not match the instances one to one.

    >>> check_aligned([{}, {}], [3])
    Traceback (most recent call last):
    ...
    ValueError: 2 instances but 1 arrival indices
    """
    if len(xs) != len(at):
        raise ValueError(f"{len(xs)} instances but {len(at)} arrival indices")
