"""An experiment of label-only learners, evaluated a block of events at a time.

:class:`ColumnarExperiment` takes the same input events as the per-event
:class:`~streameval.pipeline.experiment.Experiment` (the reference), in blocks. The
only per-event work is what the events themselves demand: matching each label to
its pending instance and coding it. Per block, the baselines' predictions at every
feature event come out as arrays (:mod:`~streameval.pipeline.columnar.labels`); at
snapshot time the confusion counts, AUC and pairwise comparisons are computed from
the arrays of scored labels, written into a reference experiment's scorecards, and
reported by its own code. So the results document is the per-event one, value for
value, and the same for any block size.

Its learners are No-Change and Majority (whole history): under the protocol of
``delayed-labelling-continuous-reevaluation.txt`` (Algorithm 1, without
re-evaluation) each predicts at a feature event from the labels learned so far,
exactly as the references ``y_per`` and ``y_maj`` do.

>>> from streameval.pipeline.config import ExperimentConfig
>>> from streameval.pipeline.events import FeatureEvent, LabelEvent, EndOfStream
>>> exp = ColumnarExperiment(ExperimentConfig("s", ["majority"]))
>>> events = []
>>> for i, y in enumerate("aab"):
...     events += [FeatureEvent("s", str(i), float(i), {}, 2 * i),
...                LabelEvent("s", str(i), float(i), y, 2 * i + 1)]
>>> exp.process_block(events + [EndOfStream("s", 3.0, 6)])
>>> exp.results()["learners"]["majority"]["accuracy"]  # None, then 'a' twice: right once
0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from streameval.pipeline.columnar.auc import filled_auc
from streameval.pipeline.columnar.confusion import Estimate, confusion_matrix, estimator
from streameval.pipeline.columnar.diagnostics import fill_temporal, instance_order
from streameval.pipeline.columnar.labels import ClassCodes, Column, LabelBaselines
from streameval.pipeline.columnar.pairs import fill_pairs
from streameval.pipeline.columnar.schedule import Block
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.learners.baselines import Majority, NoChange
from streameval.pipeline.metrics.forgetting import Forgetting


def label_only(learner: Any) -> str | None:
    """``"per"`` for an untrained No-Change, ``"maj"`` for an untrained whole-history
    Majority, else ``None`` (the learner needs the per-event path)."""
    if type(learner) is NoChange and learner.last is None:
        return "per"
    if type(learner) is Majority and learner.window is None and not learner.counts:
        return "maj"
    return None


class ColumnarExperiment:
    """Evaluate No-Change and Majority learners on blocks of input events.

    ``config`` and ``learners`` are as for :class:`Experiment`; every learner must be
    label-only (:func:`label_only`), and the config must ask for nothing the arrays do
    not hold (:func:`~streameval.pipeline.columnar.driver.supports`).
    """

    def __init__(
        self,
        config: ExperimentConfig,
        *,
        learners: Mapping[str, Any] | None = None,
        allow_import: bool = False,
    ) -> None:
        self.config = config
        self.reporter = Experiment(config, learners=learners, allow_import=allow_import)
        self.kinds = [label_only(slot.learner) for slot in self.reporter.slots]
        if None in self.kinds:
            names = [s.name for s, k in zip(self.reporter.slots, self.kinds, strict=True) if not k]
            raise ValueError(f"learners {names} are not label-only: use the per-event path")
        self.codes = ClassCodes()
        self.baselines = LabelBaselines()
        self.pending: dict[str, int] = {}  # instance id -> arrival index
        self.by_arrival = {
            "per": Column(np.int32),
            "maj": Column(np.int32),
            "per_score": Column(np.float64),
            "maj_score": Column(np.float64),
        }
        self.y = Column(np.int32)  # scored labels' codes, in label order
        self.arrival = Column(np.int64)  # their instances' arrival indices
        self.n_instances = 0
        self.n_labelled = 0
        self.max_pending = 0
        self.last_ts = 0.0
        self.ended = False
        self.counters = dict(self.reporter.counters)

    def process_block(self, events: Sequence[InputEvent]) -> None:
        """Handle a block of events in schedule order (they produce no output)."""
        seen: list[int] = []  # labels learned before each new instance arrived
        learned: list[int] = []  # codes of the labels learned in this block
        arrivals: list[int] = []  # arrival index of each labelled instance
        pending, code = self.pending, self.codes.code
        for ev in events:
            if ev.ts > self.last_ts:
                self.last_ts = ev.ts
            if isinstance(ev, FeatureEvent):
                if ev.id in pending:
                    self.counters["feature_updates"] += 1
                    continue
                pending[ev.id] = self.n_instances
                self.n_instances += 1
                seen.append(self.n_labelled)
                if len(pending) > self.max_pending:
                    self.max_pending = len(pending)
            elif isinstance(ev, LabelEvent):
                at = pending.pop(ev.id, None)
                if at is None:
                    self.counters["unknown_labels"] += 1
                    continue
                self.n_labelled += 1
                learned.append(code(ev.y))
                arrivals.append(at)
            elif isinstance(ev, EndOfStream):
                self.end()
            else:
                raise TypeError(f"not an input event: {ev!r}")
        self._append(seen, learned, arrivals)

    def _append(self, seen: Any, learned: Any, arrivals: Any) -> None:
        """The block's predictions by arrival index, and its scored labels."""
        p = self.baselines.predict(np.asarray(seen), learned, self.codes, self.config.positive)
        columns = self.by_arrival
        columns["per"].extend(p.per)
        columns["maj"].extend(p.maj)
        columns["per_score"].extend(p.per_score)
        columns["maj_score"].extend(p.maj_score)
        self.y.extend(np.asarray(learned, dtype=np.int32))
        self.arrival.extend(np.asarray(arrivals, dtype=np.int64))

    def process_arrays(self, block: Block, codes: np.ndarray) -> None:
        """A block of a :class:`~streameval.pipeline.columnar.schedule.LabelSchedule`;
        ``codes[i]`` is the code of instance ``i``'s label in ``self.codes``
        (:meth:`code_labels`). Set ``max_pending`` and ``last_ts`` from the schedule and
        call :meth:`end` after the last block."""
        learned = codes[block.labels]
        self.n_instances += len(block.seen)
        self.n_labelled += len(learned)
        self._append(block.seen, learned, block.labels)

    def code_labels(self, y: Sequence[Hashable], order: np.ndarray) -> np.ndarray:
        """The code of every instance's label ``y[i]``, numbered in the release ``order``
        of the labels (the order the per-event core meets them in)."""
        raw: dict[Hashable, int] = {}
        first = np.fromiter((raw.setdefault(v, len(raw)) for v in y), np.int64, len(y))
        labels = list(raw)
        met, where = np.unique(first[order], return_index=True)
        ranked = met[np.argsort(where)]  # the raw codes in the order the labels are released
        remap = np.empty(len(labels), dtype=np.int32)
        remap[ranked] = [self.codes.code(labels[r]) for r in ranked.tolist()]
        return remap[first]

    def end(self) -> None:
        """The stream has ended: the instances still pending are never labelled."""
        self.counters["never_labelled"] = self.n_instances - self.n_labelled
        self.ended = True

    # -- reporting --------------------------------------------------------------------------

    def results(self) -> dict[str, Any]:
        """The results document, as :meth:`Experiment.results` gives it."""
        rep = self.reporter
        y = self.y.values
        at = self.arrival.values
        cols = {name: col.values[at] for name, col in self.by_arrival.items()}
        labels = self.codes.labels
        cache: dict[Forgetting, tuple[Estimate, float]] = {}
        for slot, kind in zip(rep.slots, self.kinds, strict=True):
            card = slot.card
            card.n_scored = len(y)
            for m in card.metrics.values():
                f = m.forgetting
                if f not in cache:
                    cache[f] = estimator(f, len(y))
                m.cm = confusion_matrix(
                    labels, y, cols[kind], cols["per"], cols["maj"], f, cache[f]
                )
            if card.auc:
                positive = self._is_positive(y)
                score = cols[f"{kind}_score"]
                card.auc = {
                    name: filled_auc(score, positive, a.window) for name, a in card.auc.items()
                }
        errors = [(cols[kind] != y).astype(float) for kind in self.kinds]
        fill_pairs(rep.pairs, errors, self.config.estimators())
        rep.n_instances, rep.n_labelled = self.n_instances, self.n_labelled
        rep.classes = [str(label) for label in labels]
        rep.counters = dict(self.counters)
        rep.max_pending, rep.last_ts, rep.ended = self.max_pending, self.last_ts, self.ended
        if rep.diagnostics is not None:
            seq = instance_order(at, y, self.ended)
            fill_temporal(rep.diagnostics, seq, [str(label) for label in labels])
        doc = rep.results()
        doc["overhead"]["pending"] = self.n_instances - self.n_labelled
        return doc

    def _is_positive(self, y: np.ndarray) -> np.ndarray:
        positive = self.config.positive
        flags = np.array([str(label) == positive for label in self.codes.labels], dtype=bool)
        return flags[y] if len(flags) else np.zeros(len(y), dtype=bool)
