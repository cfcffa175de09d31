"""How the columnar core calls each learner: the fewest Python calls per instance.

A :class:`Caller` predicts (the label, and the positive-class score when an AUC is
computed) and learns for one learner, with the semantics of
:class:`~streameval.pipeline.calls.LearnerCalls` and the learner's own methods:

* a River model behind :class:`~streameval.pipeline.learners.river_adapter.RiverClassifier`
  is called directly, on features cleaned once per instance (the adapter would clean
  them at every call) -- the calls of River's own ``predict_proba_one`` /
  ``learn_one`` loop, made for a whole block in one loop where the driver calls the
  learners for a block first (``block``, :mod:`~.river_loop`, whose answers come back
  read: :class:`~.river_loop.Answered`);
* an untrained No-Change or whole-history Majority is not called when nothing needs
  its probabilities: its prediction is the reference baseline's (``reference``: 0 for
  No-Change, 1 for Majority, the columns of a scored row), which learns the same
  labels in the same order;
* a learner with ``predict_learn_many(xs, ys)`` (MOA's, which runs MOA's own
  test-then-train loop in Java) is also given a whole block of instances in one call,
  where the driver calls the learners for a block first (``block``);
* any other learner gets its ``predict_proba_one(x, at=...)`` and ``learn_one``.

The prediction is the most probable label (ties to the smallest ``str``,
:func:`~streameval.pipeline.learners.base.argmax`); under the ``papers`` protocol, the
only one this core runs, an untrained learner's empty answer is no prediction (the
protocol's cold start leaves it as it is). A failure names the learner, the instance
and the step (:class:`~streameval.pipeline.failure.LearnerFailed`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from streameval.pipeline.calls import positive_score
from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.columnar.river_loop import positive_share, river_block
from streameval.pipeline.failure import LearnerFailed, StoppedAt
from streameval.pipeline.learners.base import argmax
from streameval.pipeline.learners.baselines import Majority, NoChange
from streameval.pipeline.learners.river_adapter import RiverClassifier

Predict = Callable[[Any, Any, int], tuple[Hashable | None, float]]
Learn = Callable[[Any, Any, Hashable, int], None]
Ask = Callable[[Any, Any, int], Any]
Answer = Callable[[Any, int], tuple[Hashable | None, float]]
Clean = Callable[[Any], Any] | None
Block = Callable[[InstanceBlock, int, Clean], tuple[Sequence[Any], LearnerFailed | None]]


@dataclass
class Caller:
    """One learner's calls: ``predict(x, x_clean, at)`` gives ``(label, score)``,
    ``learn(x, x_clean, y, at)``; ``reference`` set means: not called at all.

    ``predict`` is ``answer(ask(x, x_clean, at), at)``: ``ask`` is the learner's own call
    (its raw answer, the class probabilities), ``answer`` what the evaluation makes of it,
    so that a driver may call the learners for many instances first and read their
    answers after (:meth:`~streameval.pipeline.columnar.experiment.ColumnarExperiment.immediate`).
    ``block(instances, first_at, clean)``, where set, is ``ask`` then ``learn`` of each
    instance in one call (``clean`` gives the features a ``cleaned`` learner gets): the
    answers (raw, or already read as an :class:`~.river_loop.Answered`), and the failure
    that stopped it (the answers stop before its instance, or after it when the learner
    failed to learn it).
    """

    name: str
    predict: Predict
    learn: Learn
    cleaned: bool = False
    reference: int | None = None
    ask: Ask | None = None
    answer: Answer | None = None
    block: Block | None = None


def reference_of(learner: Any) -> int | None:
    """0 for an untrained No-Change, 1 for an untrained whole-history Majority (their
    predictions are the reference baselines'), else ``None``."""
    if type(learner) is NoChange and learner.last is None:
        return 0
    if type(learner) is Majority and learner.window is None and not learner.counts:
        return 1
    return None


def _no_proba(x: Any) -> Any:
    raise NotImplementedError


def _river(name: str, learner: RiverClassifier, positive: str | None) -> Caller:
    model = learner.model
    proba_one = getattr(model, "predict_proba_one", None) or _no_proba
    model_learn = model.learn_one

    def ask(x: Any, xc: Any, at: int) -> Any:
        try:
            try:
                return proba_one(xc)
            except NotImplementedError:  # river's default for label-only classifiers
                label = model.predict_one(xc)
                return {} if label is None else {label: 1.0}
        except Exception as exc:
            raise LearnerFailed(name, at, "predict", exc) from exc

    def answer(proba: Any, at: int) -> tuple[Hashable | None, float]:
        try:
            if positive is None:
                return argmax(proba), 0.0
            return argmax(proba), positive_share(proba, positive)
        except Exception as exc:
            raise LearnerFailed(name, at, "predict", exc) from exc

    def predict(x: Any, xc: Any, at: int) -> tuple[Hashable | None, float]:
        return answer(ask(x, xc, at), at)

    def learn(x: Any, xc: Any, y: Hashable, at: int) -> None:
        try:
            model_learn(xc, y)
        except Exception as exc:
            raise LearnerFailed(name, at, "learn", exc) from exc

    caller = Caller(name, predict, learn, cleaned=True, ask=ask, answer=answer)
    caller.block = river_block(name, proba_one, model_learn, positive, (ask, answer, learn))
    return caller


def _generic(name: str, learner: Any, positive: str | None) -> Caller:
    proba_one, learner_learn = learner.predict_proba_one, learner.learn_one

    def ask(x: Any, xc: Any, at: int) -> Any:
        try:
            return proba_one(x, at=at)
        except LearnerFailed:
            raise
        except Exception as exc:
            raise LearnerFailed(name, at, "predict", exc) from exc

    def answer(proba: Any, at: int) -> tuple[Hashable | None, float]:
        return argmax(proba), positive_score(proba, positive) if positive is not None else 0.0

    def predict(x: Any, xc: Any, at: int) -> tuple[Hashable | None, float]:
        return answer(ask(x, xc, at), at)

    def learn(x: Any, xc: Any, y: Hashable, at: int) -> None:
        try:
            learner_learn(x, y, at=at)
        except LearnerFailed:
            raise
        except Exception as exc:
            raise LearnerFailed(name, at, "learn", exc) from exc

    caller = Caller(name, predict, learn, ask=ask, answer=answer)
    many = getattr(learner, "predict_learn_many", None)
    if many is not None:
        caller.block = _block(name, many)
    return caller


def _block(name: str, many: Callable[[list[Any], list[Any]], list[Any]]) -> Block:
    def block(
        rows: InstanceBlock, first_at: int, clean: Clean
    ) -> tuple[list[Any], LearnerFailed | None]:
        try:
            return many(list(rows.xs), list(rows.ys)), None
        except StoppedAt as stop:
            failed = LearnerFailed(name, first_at + stop.done, stop.step, stop.cause)
            return stop.answers, failed

    return block


def callers_for(slots: Sequence[Any], positive: str | None, *, label_only_ok: bool) -> list[Caller]:
    """A caller for the learner of each slot; ``positive`` names the AUC's positive class
    (``None``: no AUC); ``label_only_ok`` lets baselines be answered by the references."""
    out = []
    for slot in slots:
        learner = slot.learner
        reference = reference_of(learner) if label_only_ok else None
        if reference is not None:
            out.append(Caller(slot.name, _never, _never, reference=reference))
        elif type(learner) is RiverClassifier:
            out.append(_river(slot.name, learner, positive))
        else:
            out.append(_generic(slot.name, learner, positive))
    return out


def _never(*args: Any) -> Any:
    raise AssertionError("a learner answered by the reference baselines is never called")
