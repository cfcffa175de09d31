"""Every metric of an experiment's learners, kept in bulk and read into the reports.

:class:`Scoreboard` takes the scored labels a
:class:`~streameval.pipeline.columnar.segment.Segment` at a time and keeps, for every
learner and estimator, what the per-event scorecards would hold: the confusion counts
(:mod:`~streameval.pipeline.columnar.confusion`), the prequential AUC
(:mod:`~streameval.pipeline.columnar.auc`), the pairwise comparisons
(:mod:`~streameval.pipeline.columnar.pairs`) and the temporal-dependence diagnostics of
the label sequence (:mod:`~streameval.pipeline.columnar.diagnostics`). :meth:`fill`
writes that state into the report objects of the per-event code (the scorecards'
metrics, ``PairwiseComparisons``, ``TemporalDependence``), so snapshots and results are
read by the very same code and are the same, number for number, however the labels
were cut into segments.

>>> from streameval.pipeline.columnar.labels import ClassCodes
>>> from streameval.pipeline.config import ExperimentConfig
>>> from streameval.pipeline.lineup import scorecard_for
>>> config = ExperimentConfig("s", ["nochange"], window=2)
>>> board, codes = Scoreboard(config, 1), ClassCodes()
>>> y = [codes.code(v) for v in "aab"]
>>> board.extend(Segment.of(y, [0, 1, 2], [-1, 0, 0], [-1, 0, 0], [[-1], [0], [0]]), codes)
>>> card = scorecard_for(config)
>>> board.fill([card], None, codes)
>>> card.metrics["whole"].get()["accuracy"], card.metrics["window"].get()["accuracy"]
(0.3333333333333333, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from streameval.pipeline.columnar.auc import AUCTally
from streameval.pipeline.columnar.confusion import ConfusionTally, WholeCounts
from streameval.pipeline.columnar.diagnostics import Ordered, extend_temporal
from streameval.pipeline.columnar.labels import ClassCodes
from streameval.pipeline.columnar.pairs import PairsTally
from streameval.pipeline.columnar.segment import Segment, Tape
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.diagnostics.temporal import TemporalDependence
from streameval.pipeline.pairs import PairwiseComparisons


class Scoreboard:
    """The bulk state of an experiment's metrics (see the module docstring)."""

    def __init__(self, config: ExperimentConfig, n_learners: int) -> None:
        estimators = config.estimators()
        self.positive = config.positive
        self.whole = WholeCounts(n_learners)
        self.confusion = {name: ConfusionTally(f, self.whole) for name, f in estimators.items()}
        self.auc: dict[str, AUCTally] = {}
        windows = [f.window for f in estimators.values() if f.kind == "window"]
        if config.positive is not None:
            auc_window = config.window or config.auc_window
            self.auc = {
                "whole": AUCTally(n_learners, None),
                "window": AUCTally(n_learners, auc_window),
            }
            windows.append(auc_window)
        self.pairs = PairsTally(estimators, n_learners)
        keep = max((w for w in windows if w is not None), default=0)
        self.tape = Tape(keep, n_learners, config.positive is not None)
        self.order = Ordered()
        self.first_seen: list[int] = []  # label codes, in the order they first came as labels
        self._seen = np.zeros(0, dtype=bool)

    @property
    def n(self) -> int:
        """Labels scored so far."""
        return self.whole.n

    def extend(
        self, seg: Segment, codes: ClassCodes, diagnostics: TemporalDependence | None = None
    ) -> None:
        """Score ``seg``, whose codes are ``codes``'; feed ``diagnostics`` its labels in
        instance order."""
        if not len(seg):
            return
        k = len(codes)
        self._note_labels(seg.y, k)
        self.whole.extend(seg, k)
        for tally in self.confusion.values():
            tally.extend(seg, k)
        if self.auc:
            flags = self.positive_flags(codes)
            for auc in self.auc.values():
                auc.extend(seg, flags)
        self.pairs.extend(seg)
        self.tape.extend(seg)
        if diagnostics is not None:
            handed = self.order.push(seg.at, seg.y)
            extend_temporal(diagnostics, handed, _names(codes))

    def end(self, codes: ClassCodes, diagnostics: TemporalDependence | None) -> None:
        """The stream has ended: the diagnostics read every label still waiting."""
        if diagnostics is not None:
            extend_temporal(diagnostics, self.order.flush(), _names(codes))

    def _note_labels(self, y: np.ndarray, k: int) -> None:
        if len(self._seen) < k:
            self._seen = np.concatenate((self._seen, np.zeros(k - len(self._seen), dtype=bool)))
        if self._seen[y].all():
            return
        for c in dict.fromkeys(y.tolist()):
            if not self._seen[c]:
                self._seen[c] = True
                self.first_seen.append(c)

    def positive_flags(self, codes: ClassCodes) -> np.ndarray:
        """Per code: whether it is the positive class (named by its ``str``)."""
        return np.array([str(label) == self.positive for label in codes.labels], dtype=bool)

    def fill(
        self, cards: Sequence[Any], pairs: PairwiseComparisons | None, codes: ClassCodes
    ) -> None:
        """Write the state into the learners' scorecards (in learner order) and ``pairs``."""
        labels = codes.labels
        for name, tally in self.confusion.items():
            for card, cm in zip(
                cards, tally.matrices(labels, self.first_seen, self.tape), strict=True
            ):
                card.metrics[name].cm = cm
        if self.auc:
            flags = self.positive_flags(codes)
            for name, auc in self.auc.items():
                for card, state in zip(cards, auc.states(self.tape, flags), strict=True):
                    card.auc[name].auc = state
        for card in cards:
            card.n_scored = self.n
        if pairs is not None:
            self.pairs.fill(pairs, self.tape)


def _names(codes: ClassCodes) -> list[str]:
    """The diagnostics' labels: the ``str`` of each code's label."""
    return [str(label) for label in codes.labels]
