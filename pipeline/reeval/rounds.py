"""The re-evaluation rounds of continuous re-evaluation, and the bins of a labelled instance.

``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1: at every label, the
pending instances that have waited a multiple of K labels are re-predicted by every
learner (one batched call per learner, together with the labelled instance's own
test-then-train prediction: both come from the model that has not yet learned the
label), and the predictions are recorded in the pending buffer. When an instance is
labelled, the prediction in force for the longest time within each of the B bins of its
waiting period is its prediction for that bin (the dominance rule ``d_D``, sect. 4.2).

:class:`Rounds` holds what those steps share: the buffer, the number of bins, and the
bins already computed for the label at hand (equal histories, e.g. the No-Change learner
and the No-Change reference, are binned once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streameval.pipeline.learners.base import argmax
from streameval.pipeline.reeval.bins import dominant_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer

Predict = Callable[[Any, list, list[int]], list[Any]]
Binner = Callable[[Any, float, float, int], list[Any]]


class Rounds:
    """Re-prediction rounds on ``buffer`` and the dominant prediction per bin."""

    def __init__(
        self,
        buffer: PendingBuffer,
        n_bins: int,
        *,
        classification: bool,
        binner: Binner = dominant_per_bin,
    ) -> None:
        self.buffer = buffer
        self.n_bins = n_bins
        self.classification = classification
        self.binner = binner  # a history's middle bins (the protocol's mapping)
        self._seen_bins: list[tuple[Any, list[Any]]] = []

    def start_label(self) -> None:
        """Forget the bins of the previous label."""
        self._seen_bins.clear()

    def predict(
        self,
        learners: Sequence[Any],
        predict_many: Predict,
        n_labelled: int,
        inst: Any | None,
        firsts: Sequence[Any] = (),
    ) -> tuple[list[Any], list[list[Any]]]:
        """This label's round: the instances due (:meth:`PendingBuffer.due`) and, per
        learner, its predictions for them, then for ``firsts`` (pending instances whose
        first prediction was put off: no learner has learned since they arrived) and,
        when ``inst`` is given, the test-then-train prediction of ``inst``. The
        instances' features come as rows of the buffer's matrix."""
        due = self.buffer.due(n_labelled)
        members = [*due, *firsts]
        if inst is not None:
            members.append(inst)
        if not members:
            return due, [[] for _ in learners]
        xs = self.buffer.batch(members)
        ats = [m.at for m in members]
        return due, [predict_many(learner, xs, ats) for learner in learners]

    def record(
        self,
        ts: float,
        due: list[Any],
        predictions: dict[str, list[Any]],
    ) -> None:
        """Record each key's predictions for the instances ``due`` at time ``ts``."""
        if self.classification:
            rows = self.buffer.rows_of(due)
            for key, preds in predictions.items():
                self.buffer.record_many(due, key, ts, preds, rows)
            return
        for key, preds in predictions.items():  # one by one: compaction compares floats
            for d, y in zip(due, preds, strict=True):
                self.buffer.record(d.uid, key, ts, y)

    def dominant(self, history: Any, t_start: float, t_end: float) -> list[Any]:
        """``binner`` (``dominant_per_bin``) of ``history`` over ``[t_start, t_end]``, reused for an
        equal history of the same label (every caller passes this label's waiting time)."""
        for other, bins in self._seen_bins:
            if other == history:
                return bins
        bins = self.binner(history, t_start, t_end, self.n_bins)
        self._seen_bins.append((history, bins))
        return bins

    def reference_bins(self, inst: Any, key: str, t_end: float, final: Any) -> list[Any]:
        """A reference's B + 2 predictions: its first, the dominant one per bin, ``final``."""
        history = inst.history[key]
        return [history[0][1], *self.dominant(history, inst.ts, t_end), final]


def label_of(model: Any, x: Any) -> Any:
    """The label a reference model predicts for ``x``."""
    return argmax(model.predict_proba_one(x))
