"""One stream, many learners, metrics in bulk: the columnar evaluation core.

:class:`ColumnarExperiment` takes the same input events as the per-event
:class:`~streameval.pipeline.experiment.Experiment` (its reference) and returns the
same outputs and the same results document, number for number, for every experiment
without continuous re-evaluation under the ``papers`` protocol
(``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1 with no re-prediction):

* features of a new instance arrive: every learner makes its first prediction, and
  the two reference baselines theirs -- No-Change the last label learned, Majority the
  most frequent (``temporal-dependence-evaluation-journal.txt`` eq. 6 and 7);
* its label arrives: the instance is scored, then every learner learns the label.

Only what the protocol needs at each event is done at that event: the learners' calls
(one ``predict_proba_one`` per instance and learner, one ``learn_one`` per label, as in
River's own loop), the baselines' two numbers, the drift detectors when asked for. A
scored label is a row of class codes (:class:`~streameval.pipeline.columnar.segment.Segment`);
the metrics -- the kappa family under every estimator, the prequential AUC, the
pairwise comparisons, the temporal-dependence diagnostics -- are computed from those
rows a segment at a time by the :class:`~streameval.pipeline.columnar.scoreboard.Scoreboard`,
when a snapshot or the results are read, and reported by the per-event reporting code.

Learners that read no feature (an untrained No-Change or whole-history Majority) are
not called at all when no AUC needs their probabilities: their predictions are the
reference baselines'.

>>> from streameval.pipeline.events import FeatureEvent, LabelEvent, EndOfStream
>>> exp = ColumnarExperiment(ExperimentConfig("s", ["majority"]))
>>> for i, y in enumerate("aab"):
...     _ = exp.process(FeatureEvent("s", str(i), float(i), {}, 2 * i))
...     _ = exp.process(LabelEvent("s", str(i), float(i), y, 2 * i + 1))
>>> _ = exp.process(EndOfStream("s", 3.0, 6))
>>> exp.results()["learners"]["majority"]["accuracy"]  # None, then 'a' twice: right once
0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from streameval.pipeline import reporting
from streameval.pipeline.calls import LearnerCalls
from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.columnar.bulk import score_in_bulk
from streameval.pipeline.columnar.callers import Caller, callers_for
from streameval.pipeline.columnar.held import FIRSTS, LEARNERS, HeldLabels
from streameval.pipeline.columnar.immediate import ask_and_learn, replay_answers
from streameval.pipeline.columnar.labels import ClassCodes
from streameval.pipeline.columnar.references import ReferenceScores
from streameval.pipeline.columnar.scoreboard import Scoreboard
from streameval.pipeline.columnar.segment import NONE, Segment
from streameval.pipeline.columnar.waiting import Waiting
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.diagnostics.temporal import TemporalDependence
from streameval.pipeline.events import (
    DriftEvent,
    EndOfStream,
    FeatureEvent,
    InputEvent,
    LabelEvent,
    MetricSnapshot,
    Output,
    PredictionEvent,
)
from streameval.pipeline.experiment import _Slot, check_positive
from streameval.pipeline.learners import bind_context
from streameval.pipeline.learners.base import StreamContext
from streameval.pipeline.learners.river_adapter import cleaner_for
from streameval.pipeline.lineup import build_learners, scorecard_for
from streameval.pipeline.pairs import PairwiseComparisons
from streameval.pipeline.protocol import protocol_of
from streameval.pipeline.report.curves import CurveRecorder
from streameval.pipeline.streams.base import Instance

# a pending instance's record: arrival index, features, cleaned features, labels seen
# at arrival, its row, scores, whether newer features replaced the first ones
AT, X, XC, SEEN, ROW, SCORES, UPDATED = range(7)
# a row (FIRSTS, LEARNERS: see .held): the arrival index, the first predictions (codes:
# No-Change, Majority, the learners), and once labelled the label's code


def unsupported(config: ExperimentConfig) -> str | None:
    """Why the columnar core cannot evaluate ``config`` (``None``: it can).

    >>> unsupported(ExperimentConfig("s", ["nb"], reeval_k=10))
    'continuous re-evaluation'
    """
    if config.task != "classification":
        return "a regression task"
    if config.reeval:
        return "continuous re-evaluation"
    if config.protocol != "papers":
        return f"the {config.protocol} protocol"
    return None


class ColumnarExperiment:
    """Evaluate several learners on one stream of input events (see the module docstring).

    The interface is :class:`~streameval.pipeline.experiment.Experiment`'s: ``process``
    each event in schedule order (or :meth:`process_block` a list of them),
    :meth:`snapshots`, :meth:`results`; ``buffer`` holds the pending instances; the
    object pickles (a checkpoint). ``complete`` says the stream has no missing feature
    value (:attr:`~streameval.pipeline.streams.base.Dataset.complete`): the features
    are then not looked through for one.
    """

    def __init__(
        self,
        config: ExperimentConfig,
        *,
        learners: Mapping[str, Any] | None = None,
        emit_predictions: bool = False,
        allow_import: bool = False,
        complete: bool = False,
    ) -> None:
        why = unsupported(config)
        if why is not None:
            raise ValueError(f"the columnar core does not evaluate {why}: use Experiment")
        self.config = config
        self.emit_predictions = emit_predictions
        self.complete = complete
        self.classification = True
        self.n_bins = config.bins
        self.context = StreamContext()
        self.protocol = protocol_of(config.protocol, config.classes)
        given = build_learners(config, learners, self.context, allow_import=allow_import)
        self.slots = [_Slot(name, m, scorecard_for(config)) for name, m in given.items()]
        self.calls = LearnerCalls(self.protocol, True, self.slots)
        self._lags = self.context.capacity
        self.buffer = Waiting(cap=config.pending_cap)
        names = [slot.name for slot in self.slots]
        self.pairs = PairwiseComparisons(names, config.estimators(), classification=True)
        self.diagnostics = TemporalDependence(max_lag=config.max_lag)
        self.curves = CurveRecorder()
        self.codes = ClassCodes()
        self.board = Scoreboard(config, len(self.slots))
        self.n_instances = self.n_labelled = self.n_repredictions = 0
        self.max_pending = self.max_held = 0
        self.classes: list[str] = []
        self._is_label: set[int] = set()
        self.counters = {
            "unknown_labels": 0,
            "feature_updates": 0,
            "features_after_eviction": 0,
            "never_labelled": 0,
        }
        if config.stop_at_labels is not None:
            self.counters["after_stop"] = 0
        self.last_ts = 0.0
        self.ended = False
        # the reference baselines: No-Change's last label, Majority's counts and choice
        self._per = self._maj = NONE
        self._counts: list[int] = []
        positive = config.positive
        self._refs = ReferenceScores(positive) if positive is not None else None
        self.held = HeldLabels(len(self.slots), positive is not None)  # not yet on the board
        self._plan()

    # -- the protocol -----------------------------------------------------------------------

    def _plan(self) -> None:
        """How each learner is called (rebuilt after a drift reset and after unpickling)."""
        with_auc = self.config.positive is not None
        self._callers: list[Caller] = callers_for(
            self.slots,
            self.config.positive if with_auc else None,
            label_only_ok=not self.config.drift_reset,
        )
        self._predict = [(c.reference, c.predict) for c in self._callers]
        self._learners = [c.learn for c in self._callers if c.reference is None]
        self._cleans = not self.complete and any(c.cleaned for c in self._callers)
        self._auc = with_auc
        self._watch = bool(self.config.detectors) or self.emit_predictions
        self._every = self.config.snapshot_every
        self._context_read = self.context.read  # a wrapper reads the released labels

    def process(self, event: InputEvent, nbytes: int = 0) -> list[Output]:
        """Handle one input event; return what it produced (as ``Experiment.process``)."""
        if isinstance(event, FeatureEvent):
            if self.stopped:
                self.counters["after_stop"] += 1
                return []
            return self.features(event.id, event.ts, event.x, nbytes)
        if isinstance(event, LabelEvent):
            if self.stopped:
                self.counters["after_stop"] += 1
                return []
            return self.label(event.id, event.ts, event.y)
        if isinstance(event, EndOfStream):
            return self.end(event.ts)
        raise TypeError(f"not an input event: {event!r}")

    def process_block(self, events: Iterable[InputEvent]) -> list[Output]:
        """Handle events in schedule order; return everything they produced."""
        out: list[Output] = []
        for event in events:
            out.extend(self.process(event))
        return out

    run = process_block

    @property
    def two_pass(self) -> bool:
        """Whether :meth:`immediate` may call the learners for a whole block before
        evaluating their answers: nothing done between two calls of a learner reads or
        changes it (see :mod:`~streameval.pipeline.columnar.immediate`)."""
        return not (self._context_read or self._watch or self.config.stop_at_labels is not None)

    def immediate(self, instances: Sequence[Instance], out: list[Output] | None = None) -> None:
        """Each instance's :meth:`features`, then its :meth:`label` (test-then-train, delay
        0), the same results as calling them in turn; the outputs those calls return go to
        ``out`` when it is given. In two passes when :attr:`two_pass` allows: the learners'
        calls for all of ``instances``, then the evaluation of their answers, in bulk where
        :mod:`.bulk` can. A learner's failure is raised where calling them in turn raises
        it: once the instances before it are evaluated, and the one it names when it failed
        to learn it; when it failed to predict, that instance's arrival is counted (its
        index and event time), as :meth:`features` counts it before it calls a learner."""
        if not self.two_pass:
            self._each(instances, out)
            return
        instances = InstanceBlock.of(instances)
        clean = None
        if self._cleans and instances:
            self._clean(instances.xs[0])  # its first call picks this stream's cleaner
            clean = self._clean
        first = self.n_instances
        asked, done, failure = ask_and_learn(self._callers, instances, first, clean)
        if not score_in_bulk(self, instances[:done], asked, out):
            replay_answers(self, instances[:done], asked, out)
        if self.n_instances != first + done:
            raise RuntimeError("the evaluation did not take every instance the learners saw")
        if failure is not None:
            if failure.step != "learn":
                self.n_instances += 1
                self.last_ts = max(self.last_ts, instances[done].ts)
            raise failure

    def _each(self, instances: Sequence[Instance], out: list[Output] | None = None) -> None:
        for inst in instances:
            made = self.features(inst.id, inst.ts, inst.x)
            made += self.label(inst.id, inst.ts, inst.y)
            if out is not None:
                out += made

    @property
    def stopped(self) -> bool:
        """Whether ``config.stop_at_labels`` labels have been scored."""
        stop = self.config.stop_at_labels
        return stop is not None and self.n_labelled >= stop

    def features(self, uid: Hashable, ts: float, x: Any, nbytes: int = 0) -> list[Output]:
        """The features of instance ``uid`` arrive at event time ``ts``."""
        if ts > self.last_ts:
            self.last_ts = ts
        buffer = self.buffer
        if uid in buffer.pending:  # newer features of a pending instance (sect. 7.2)
            return self._update(uid, x, nbytes)
        if buffer.evicted and uid in buffer.evicted:
            self.counters["features_after_eviction"] += 1
            return []
        at = self.n_instances
        if self._context_read:
            self.context.arrive()
        self.n_instances = at + 1
        xc = self._clean(x) if self._cleans else x
        row = [at, self._per, self._maj]
        scores: list[float] = []
        index = self.codes.index
        refs = self._refs
        for reference, predict in self._predict:
            if reference is not None:  # a baseline's own prediction: no call
                row.append(row[FIRSTS + reference])
                if refs is not None:
                    scores.append(refs.maj if reference else refs.per)
                continue
            y_pred, score = predict(x, xc, at)
            if y_pred is None:
                row.append(NONE)
            else:
                c = index.get(y_pred)
                row.append(self.codes.code(y_pred) if c is None else c)
            scores.append(score)
        buffer.add(uid, [at, x, xc, self.n_labelled, row, scores, False], nbytes)
        n_pending = len(buffer.pending)
        if n_pending > self.max_pending:
            self.max_pending = n_pending
        if not self.emit_predictions:
            return []
        labels, stream = self.codes.labels, self.config.stream
        return [
            PredictionEvent(stream, slot.name, uid, ts, "first", _label(labels, c), 0)  # type: ignore[arg-type]
            for slot, c in zip(self.slots, row[LEARNERS:], strict=True)
        ]

    def _clean(self, x: Any) -> Any:
        """``x`` without missing values, by the cleaner cheaper for this stream's features
        (chosen at its first instance)."""
        self._clean = cleaner_for(x)  # type: ignore[method-assign]
        return self._clean(x)

    def _update(self, uid: Hashable, x: Any, nbytes: int) -> list[Output]:
        record = self.buffer.pending[uid]
        self.buffer.replace(uid, nbytes)
        record[X], record[XC], record[UPDATED] = x, self._clean(x) if self._cleans else x, True
        self.counters["feature_updates"] += 1
        return []

    def label(self, uid: Hashable, ts: float, y: Any) -> list[Output]:
        """The label of instance ``uid`` arrives at event time ``ts``: score, then learn."""
        if ts > self.last_ts:
            self.last_ts = ts
        record = self.buffer.pop(uid)
        if record is None:
            self.counters["unknown_labels"] += 1
            return []
        self.n_labelled += 1
        code = self.codes.index.get(y)
        if code is None or code not in self._is_label:
            code = self.codes.code(y)
            self._is_label.add(code)
            self.classes.append(str(y))
            if self._refs is not None:
                self._refs.learned(code, self.codes.labels)
        row = record[ROW]
        row.append(code)
        full = self.held.add_row(row, record[SCORES])
        out = self._watched(uid, ts, record, code) if self._watch else []
        self._learn(record, y, code)
        if self._watch and self.config.drift_reset:
            self._reset_alarmed()
        every = self._every
        if every and self.n_labelled % every == 0:
            snapshots = self.snapshots("periodic")
            self.curves.extend(snapshots)
            out.extend(snapshots)
        elif full:
            self._flush()
        return out

    def _watched(self, uid: Hashable, ts: float, record: list, code: int) -> list[Output]:
        """The outputs of a label: test-then-train predictions, drift alarms."""
        out: list[Output] = []
        unchanged = record[SEEN] == self.n_labelled - 1 and not record[UPDATED]
        labels, stream = self.codes.labels, self.config.stream
        for i, slot in enumerate(self.slots):
            first = record[ROW][LEARNERS + i]
            if self.emit_predictions:
                reference = self._callers[i].reference
                if unchanged:
                    final = _label(labels, first)
                elif reference is not None:  # never called: the baseline's prediction now
                    final = _label(labels, self._maj if reference else self._per)
                else:
                    final = self.calls.predict(slot.learner, record[X], record[AT])[0]
                out.append(
                    PredictionEvent(stream, slot.name, uid, ts, "final", final, self.n_bins + 1)
                )
            card = slot.card
            card.n_scored = self.n_labelled
            for alarm in card.detect(0.0 if first == code else 1.0):
                out.append(
                    DriftEvent(
                        stream, slot.name, alarm.detector, alarm.n_scored, ts, alarm.statistic
                    )
                )
        return out

    def _learn(self, record: list, y: Any, code: int) -> None:
        """Every learner and both baselines learn the label; the context releases it."""
        at = record[AT]
        x, xc = record[X], record[XC]
        for learn in self._learners:
            learn(x, xc, y, at)
        self._per = code
        counts = self._counts
        if code >= len(counts):
            counts.extend([0] * (code + 1 - len(counts)))
        counts[code] += 1
        if code != self._maj and (self._maj == NONE or counts[code] >= counts[self._maj]):
            self._majority_after(code)
        if self._refs is not None:
            self._refs.update(code, counts)
        if not self._context_read:
            return
        self.context.receive(at, y)
        if self.n_labelled % 1024 == 0:
            oldest = self.buffer.oldest()
            self.context.forget_before((oldest[AT] if oldest is not None else at) - self._lags)

    def _majority_after(self, code: int) -> None:
        """Majority's choice once ``code`` caught up with it: the most frequent label, a
        tie to the smallest ``str`` (as :func:`~streameval.pipeline.learners.base.argmax`
        of its frequencies)."""
        best, counts, labels = self._maj, self._counts, self.codes.labels
        if best == NONE or counts[code] > counts[best] or str(labels[code]) < str(labels[best]):
            self._maj = code

    def _reset_alarmed(self) -> None:
        """A learner whose detector alarmed on this label starts afresh: an untrained clone."""
        reset = False
        for slot in self.slots:
            if any(a and a[-1] == slot.card.n_scored for a in slot.card.alarms.values()):
                fresh = slot.learner.clone()
                bind_context(fresh, self.context)
                slot.learner = fresh
                slot.card.n_resets += 1
                reset = True
        if reset:
            self._plan()

    def end(self, ts: float) -> list[Output]:
        """The stream has ended at event time ``ts``."""
        if ts > self.last_ts:
            self.last_ts = ts
        self._flush()
        self.board.end(self.codes, self.diagnostics)
        self.counters["never_labelled"] = len(self.buffer)
        check_positive(self.config.positive, self.config.classes or self.classes, self.n_labelled)
        self.ended = True
        snapshots = self.snapshots("final")
        if self.config.snapshot_every:
            self.curves.extend(snapshots)
        return list(snapshots)

    def code_labels(self, y: list[Hashable], order: np.ndarray) -> np.ndarray:
        """Code the label ``y[i]`` of every instance of a stream read whole, numbered in
        the release ``order`` of the labels (the order the per-event core meets them
        in); the stream's classes are then known."""
        raw: dict[Hashable, int] = {}
        first = np.fromiter((raw.setdefault(v, len(raw)) for v in y), np.int64, len(y))
        labels = list(raw)
        met, where = np.unique(first[order], return_index=True)
        ranked = met[np.argsort(where)]  # the raw codes in the order the labels are released
        remap = np.empty(len(labels), dtype=np.int32)
        remap[ranked] = [self.codes.code(labels[r]) for r in ranked.tolist()]
        self.classes = [str(label) for label in self.codes.labels]
        self._is_label = set(range(len(self.codes)))
        return remap[first]

    # -- the scoreboard ---------------------------------------------------------------------

    def _flush(self) -> None:
        """Put the labels held on the board, in the order they were scored."""
        seg = self.held.take()
        if seg is not None:
            self.score(seg)

    def hold(self, seg: Segment) -> None:
        """Scored labels for the board, after those held (:class:`~.held.HeldLabels`:
        the board takes them every :data:`~.held.FLUSH_EVERY` labels or at a snapshot)."""
        if self.held.add(seg):
            self._flush()

    def score(self, seg: Segment) -> None:
        """Put scored labels on the board (a driver that computes the rows itself, as the
        label-schedule arrays do, calls this directly)."""
        self.board.extend(seg, self.codes, self.diagnostics)

    def _fill(self) -> None:
        self._flush()
        self.board.fill([slot.card for slot in self.slots], self.pairs, self.codes)

    def snapshots(self, kind: str = "periodic") -> list[MetricSnapshot]:
        """A compact snapshot of every learner (what the ``metrics`` topic carries)."""
        self._fill()
        return reporting.snapshots(self, kind)  # type: ignore[arg-type]

    def results(self) -> dict[str, Any]:
        """The results document (``DESIGN.md``, *Results JSON*), NaN as ``null``."""
        self._fill()
        return reporting.results(self)  # type: ignore[arg-type]

    # -- checkpoints ------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_callers", "_predict", "_learners"):  # closures: rebuilt on load
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "held" not in state:  # a checkpoint written when the core held rows itself
            state["held"] = _held_of(state)
        self.__dict__.update(state)
        self._plan()


def _label(labels: list[Hashable], code: int) -> Hashable | None:
    return None if code == NONE else labels[code]


def _held_of(state: dict[str, Any]) -> HeldLabels:
    """The held labels of a checkpoint whose core kept them in its own attributes."""
    held = HeldLabels(len(state["slots"]), state["config"].positive is not None)
    for seg in state.pop("_segments", []):
        held.add(seg)
    held.rows, held.scores = state.pop("_rows"), state.pop("_scores")
    state.pop("_n_held", None)
    state.pop("_flush_at", None)
    return held
