"""A River model's test-then-train over a block of instances, as River's own loop runs it.

For each instance: ``predict_proba_one`` on its features, what the evaluation reads of
the answer (the predicted label, :func:`~streameval.pipeline.learners.base.argmax`, and
the positive class's share, :func:`positive_share`), then ``learn_one``. One tight loop
with no wrapper per call; a failure is named afterwards, from where the loop stopped.

The answers are kept read, as two lists (:class:`Answered`), not as the model's
probability ``dict`` s: a block of 512 ``dict`` s held until the evaluation makes
CPython's collector run (it counts every ``dict`` made and not yet freed), move the
block's objects to older generations and, once in a run, walk the whole heap.

>>> from river.naive_bayes import GaussianNB
>>> from streameval.pipeline.columnar.block import InstanceBlock
>>> from streameval.pipeline.streams.base import Instance
>>> model = GaussianNB()
>>> seen = [(0.1, "a"), (0.9, "b"), (0.2, "a")]
>>> rows = InstanceBlock.of(Instance(str(i), 0.0, {"v": v}, y) for i, (v, y) in enumerate(seen))
>>> block = river_block("nb", model.predict_proba_one, model.learn_one, "b", (None,) * 3)
>>> answered, failure = block(rows, 0, None)
>>> answered.labels, answered.scores, failure  # untrained; one class known; 50/50
([None, 'a', 'a'], [0.0, 0.0, 0.5], None)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

from streameval.pipeline.calls import share_of
from streameval.pipeline.columnar.block import Columns
from streameval.pipeline.failure import LearnerFailed
from streameval.pipeline.learners.base import argmax

if TYPE_CHECKING:
    from streameval.pipeline.columnar.block import InstanceBlock
    from streameval.pipeline.columnar.callers import Block

Pair = tuple[Hashable | None, float]


class Answered(Columns[Pair]):
    """A learner's answers as the evaluation reads them: the predicted labels and the
    positive-class scores, one list each; an item is the ``(label, score)`` pair."""

    __slots__ = ("labels", "scores")

    def __init__(self, labels: list[Hashable | None], scores: list[float]) -> None:
        self.labels = labels
        self.scores = scores

    @staticmethod
    def _item(label: Hashable | None, score: float) -> Pair:
        return label, score

    def __iter__(self) -> Iterator[Pair]:
        return zip(self.labels, self.scores, strict=True)  # the pairs, made in C


def positive_share(proba: Any, positive: str) -> float:
    """:func:`~streameval.pipeline.calls.positive_score` of a River model's answer as the
    adapter gives it (``float`` values).

    >>> positive_share({"a": 1, "b": 3}, "b"), positive_share({}, "b")
    (0.75, 0.0)
    """
    if not proba:
        return 0.0
    total = sum(proba.values())
    if type(total) is not float:  # not all of them floats: the adapter would convert them
        proba = {label: float(p) for label, p in proba.items()}
        total = sum(proba.values())
    return share_of(proba, positive, total)


def river_block(
    name: str,
    proba_one: Callable[[Any], Any],
    learn_one: Callable[[Any, Any], Any],
    positive: str | None,
    wrapped: tuple[Any, Any, Any],
) -> Block:
    """The block call of learner ``name``: ``block(rows, first_at, clean)`` gives the
    answers read and the failure that stopped it. ``wrapped`` is the caller's
    ``(ask, answer, learn)``, which name a failure: a model without probabilities (River's
    ``NotImplementedError``) goes on through them (``ask`` answers it by its
    ``predict_one``)."""

    def block(
        rows: InstanceBlock, first_at: int, clean: Callable[[Any], Any] | None
    ) -> tuple[Answered, LearnerFailed | None]:
        labels: list[Hashable | None] = []
        scores: list[float] = []
        add_label, add_score = labels.append, scores.append
        asking = True
        try:
            for x, y in zip(rows.xs, rows.ys, strict=True):
                asking = True
                xc = x if clean is None else clean(x)
                proba = proba_one(xc)
                label = argmax(proba)
                score = 0.0 if positive is None else positive_share(proba, positive)
                add_label(label)
                add_score(score)
                asking = False
                learn_one(xc, y)
        except Exception as exc:
            return _stopped(
                name, rows, first_at, clean, Answered(labels, scores), exc, asking, wrapped
            )
        return Answered(labels, scores), None

    return block


def _stopped(
    name: str,
    rows: InstanceBlock,
    first_at: int,
    clean: Callable[[Any], Any] | None,
    answered: Answered,
    exc: Exception,
    asking: bool,
    wrapped: tuple[Any, Any, Any],
) -> tuple[Answered, LearnerFailed | None]:
    """What the block gives once a call raised ``exc``: the failure it names, or the rest
    of the block through the caller's wrappers for a model without probabilities."""
    done = len(answered)
    if not asking:
        return answered, LearnerFailed(name, first_at + done - 1, "learn", exc)
    if not isinstance(exc, NotImplementedError):
        return answered, LearnerFailed(name, first_at + done, "predict", exc)
    ask, answer, learn = wrapped
    at = first_at + done
    try:
        for x, y in zip(rows.xs[done:], rows.ys[done:], strict=True):
            xc = x if clean is None else clean(x)
            label, score = answer(ask(x, xc, at), at)
            answered.labels.append(label)
            answered.scores.append(score)
            learn(x, xc, y, at)
            at += 1
    except LearnerFailed as failure:
        return answered, failure
    return answered, None
