"""The learners' calls under the protocol: predictions with cold start, failures named.

An :class:`~streameval.pipeline.experiment.Experiment` asks its learners for
predictions one at a time (the first prediction, the test-then-train one without
re-evaluation) or in one batched call per learner (a re-evaluation round). Both
go through :class:`LearnerCalls`, so that a class prediction before any label is
the protocol's cold start (:meth:`~streameval.pipeline.protocol.Protocol.cold_start`)
and an exception of a learner surfaces as :class:`~streameval.pipeline.failure.LearnerFailed`
naming the learner, the instance and the step.

>>> from streameval.pipeline.learners import as_learner
>>> from streameval.pipeline.learners.baselines import Majority
>>> from streameval.pipeline.protocol import protocol_of
>>> calls = LearnerCalls(protocol_of("papers", None), classification=True, slots=[])
>>> calls.predict(as_learner(Majority(), "classification"), {}, at=0)  # no label yet
(None, {})
>>> positive_score({"a": 1.0, "b": 3.0}, "b")
0.75
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streameval.pipeline.failure import LearnerFailed
from streameval.pipeline.learners.base import argmax


@dataclass
class LearnerCalls:
    """Predict with the learners of one stream, as its protocol and task say.

    ``slots`` are the experiment's own (each with a ``name`` and a ``learner``, which
    a drift reset replaces), so a failure names the learner that raised.
    """

    protocol: Any
    classification: bool
    slots: Sequence[Any]

    def predict(self, learner: Any, x: Any, at: int) -> tuple[Any, dict | None]:
        """The prediction for ``x`` and, for a classifier, the class probabilities."""
        try:
            if self.classification:
                proba = learner.predict_proba_one(x, at=at)
                return self.protocol.cold_start(argmax(proba)), proba
            return learner.predict_one(x, at=at), None
        except Exception as exc:
            raise self.failed(learner, at, "predict", exc) from exc

    def predict_many(self, learner: Any, xs: list, ats: list[int]) -> list[Any]:
        """One batched call: the label (or value) predicted for each instance."""
        try:
            if self.classification:
                labels = getattr(learner, "predict_labels_many", None)
                if labels is not None:
                    out = list(labels(xs, at=ats))
                else:
                    out = [argmax(p) for p in learner.predict_proba_many(xs, at=ats)]
                # cold start stands in for None only: a round of trained answers is as is
                return list(map(self.protocol.cold_start, out)) if None in out else out
            return list(learner.predict_many(xs, at=ats))
        except Exception as exc:
            raise self.failed(learner, ats[0] if ats else -1, "re-predict", exc) from exc

    def failed(self, learner: Any, at: int, step: str, exc: Exception) -> Exception:
        """``exc`` of a named learner as :class:`LearnerFailed` (others as is)."""
        if isinstance(exc, LearnerFailed):
            return exc
        name = next((s.name for s in self.slots if s.learner is learner), None)
        return exc if name is None else LearnerFailed(name, at, step, exc)


def positive_score(proba: dict | None, positive: str | None) -> float:
    """The score of the positive class (named by its ``str``), for the prequential AUC."""
    if not proba or positive is None:
        return 0.0
    return share_of(proba, positive, sum(proba.values()))


def share_of(proba: dict, positive: str, total: float) -> float:
    """The probability ``proba`` gives the class named ``positive`` (by its ``str``),
    over ``total``, the sum of its values; 0 when ``total`` is not positive.

    >>> share_of({"a": 1.0, 2: 3.0}, "2", 4.0), share_of({"a": 0.0}, "a", 0.0)
    (0.75, 0.0)
    """
    if total <= 0:
        return 0.0
    p = proba.get(positive)
    if p is None:  # labels that are not strings (the library's streams): match by str
        p = next((v for k, v in proba.items() if str(k) == positive), 0.0)
    return p / total
