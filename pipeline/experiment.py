"""One stream, many learners: input events in, predictions, metrics and drift alarms out.

:class:`Experiment` is the deterministic core both drivers call: ``streameval
evaluate`` feeds it the replay schedule in-process, the Kafka agents feed it
the same events merged from the feature and label topics. It implements the
protocol of continuous re-evaluation
(``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1):

* features of a new instance arrive: the instance joins the pending buffer
  and every learner makes its *first* prediction (bin 0) -- with re-evaluation, and
  unless prediction events or AUC scores need it at once, in the next batched call
  (no learner learns before it, so the prediction is the same);
* the label of a pending instance arrives: every learner makes its
  *test-then-train* prediction (bin B+1); the instance is scored -- the
  whole-stream metrics score the first prediction, the binned metrics score
  every bin; every pending instance that has waited a multiple of K labels is
  re-predicted in one batched call per learner; only then do the learners
  learn the label.

Two reference baselines run beside the learners under exactly the same
protocol: No-Change (its prediction is ``y_per``) and Majority (``y_maj``).
They define ``p_per`` and ``p_maj`` of the kappa family
(``temporal-dependence-evaluation-journal.txt`` eq. 13, sect. 4.6), so that
``kappa_per`` of the No-Change learner and ``kappa_m`` of the Majority learner
are exactly 0 under any label delay and in every bin
(:mod:`streameval.pipeline.references`).

The details the papers leave open (cold start, order at equal times, the
re-prediction schedule, the bin mapping, the ``kappa_m`` reference) come from
``config.protocol`` (:mod:`streameval.pipeline.protocol`): the above is the
default, ``papers``; ``moa`` follows the authors' MOA code.

The experiment composes its parts: the learners and their scorecards come from
:mod:`~streameval.pipeline.lineup`, every prediction goes through
:mod:`~streameval.pipeline.calls` (cold start, failures named) and the snapshots
and results document are read by :mod:`~streameval.pipeline.reporting`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streameval.pipeline import reporting
from streameval.pipeline.calls import LearnerCalls, positive_score
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.diagnostics.ordered import InstanceOrder
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
from streameval.pipeline.failure import LearnerFailed
from streameval.pipeline.learners import bind_context
from streameval.pipeline.learners.base import StreamContext
from streameval.pipeline.lineup import build_learners, scorecard_for
from streameval.pipeline.pairs import PairwiseComparisons
from streameval.pipeline.protocol import protocol_of
from streameval.pipeline.reeval.bins import average_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer
from streameval.pipeline.reeval.rounds import Rounds
from streameval.pipeline.references import LabelReferences, References
from streameval.pipeline.report.curves import CurveRecorder
from streameval.pipeline.scorecard import Scorecard

#: First predictions that may wait for a batched call (:meth:`Experiment._on_features`).
#: Without labels (a fill phase) they are made 16 at a time, one call per learner instead
#: of 16, and the buffer never lacks more than 16 instances' first predictions.
MAX_DEFERRED = 16


@dataclass
class _Slot:
    """A learner, under its name, with everything measured about it."""

    name: str
    learner: Any
    card: Scorecard


class Experiment:
    """Evaluate several learners on one stream of input events.

    Call :meth:`process` with each event in schedule order; it returns the
    output events (predictions when ``emit_predictions``, drift alarms, metric
    snapshots). :meth:`results` gives the results document of ``DESIGN.md``.
    The object is picklable: a pickle is a complete checkpoint.

    ``learners`` maps each name of ``config.learners`` to a learner object: any
    River classifier or regressor, or a streameval learner
    (:func:`~streameval.pipeline.learners.as_learner`). Without it, each name is a
    learner spec and is built by :func:`~streameval.pipeline.learners.spec.build_learner`
    (the command line and the Kafka worker); ``allow_import`` lets those specs import
    any class (``import[path=m.C]``), a local decision of the process that builds the
    experiment, never part of the config, so an experiment arriving from Kafka cannot
    import code.

    >>> from streameval.pipeline.events import FeatureEvent, LabelEvent, EndOfStream
    >>> from streameval.pipeline.learners.baselines import Majority
    >>> exp = Experiment(ExperimentConfig("s", ["maj"]), learners={"maj": Majority()})
    >>> for i, y in enumerate("aab"):
    ...     _ = exp.process(FeatureEvent("s", str(i), float(i), {}, 2 * i))
    ...     _ = exp.process(LabelEvent("s", str(i), float(i), y, 2 * i + 1))
    >>> _ = exp.process(EndOfStream("s", 3.0, 6))
    >>> exp.results()["learners"]["maj"]["accuracy"]  # None, then 'a' twice: right once
    0.3333333333333333
    """

    def __init__(
        self,
        config: ExperimentConfig,
        *,
        learners: Mapping[str, Any] | None = None,
        emit_predictions: bool = False,
        allow_import: bool = False,
        scoring: bool = True,
    ) -> None:
        if not scoring and config.drift_reset:
            raise ValueError("an experiment without scoring cannot reset learners on drift")
        self.config = config
        self.emit_predictions = emit_predictions
        # Without scoring the experiment makes its learners' calls and learns, nothing
        # else: no reference, record, score, comparison or diagnostic (a split run's
        # helper, streameval.pipeline.split). Its calls are those of a scoring one.
        self.scoring = scoring
        self.classification = config.task == "classification"
        self.n_bins = config.bins
        self.context = StreamContext()
        self.protocol = protocol_of(config.protocol, config.classes)
        given = build_learners(config, learners, self.context, allow_import=allow_import)
        self.slots = [
            _Slot(name, learner, scorecard_for(config)) for name, learner in given.items()
        ]
        self.calls = LearnerCalls(self.protocol, self.classification, self.slots)
        self._lags = self.context.capacity
        self._updated: set[str] = set()
        self.buffer = PendingBuffer(
            k=config.reeval_k, cap=config.pending_cap, compact=self.protocol.compact
        )
        self.rounds = Rounds(
            self.buffer,
            config.bins,
            classification=self.classification,
            binner=self.protocol.middle_bins,
        )
        windows = {
            name: config.window if name == "window" else None for name in config.estimators()
        }
        self.references = References(self.protocol, windows)
        self.pairs = PairwiseComparisons(
            [s.name for s in self.slots], config.estimators(), classification=self.classification
        )
        self._first_scores: dict[str, list[float]] = {}
        # With re-evaluation and nothing that needs a first prediction at once (no
        # prediction events, no AUC scores), the learners' first predictions wait for
        # the next batched call: they are made before any learner learns, so they are
        # the same, at a fraction of the cost of one call per instance.
        self._defer_firsts = (
            bool(config.reeval)
            and self.classification
            and not emit_predictions
            and not any(slot.card.auc for slot in self.slots)
        )
        self._deferred: dict[Hashable, None] = {}  # ids whose first prediction waits
        self.diagnostics = (
            TemporalDependence(max_lag=config.max_lag) if self.classification else None
        )
        self._in_order = (
            InstanceOrder(self.diagnostics.update) if self.diagnostics is not None else None
        )
        self.n_instances = 0
        self.n_labelled = 0
        self.n_repredictions = 0
        self.max_pending = 0
        self.max_held = 0
        self.classes: list[str] = []
        self._class_set: set[Hashable] = set()
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
        self.curves = CurveRecorder()  # the periodic snapshots, for results()["curves"]

    # -- the protocol -----------------------------------------------------------------------

    def process(self, event: InputEvent, nbytes: int = 0) -> list[Output]:
        """Handle one input event; return what it produced.

        ``nbytes``, the bytes of a feature event, is counted in ``buffer.nbytes`` while
        its instance is pending (the Kafka runner's byte budget). Once
        ``config.stop_at_labels`` labels are scored, feature and label events are
        only counted (``counters["after_stop"]``).
        """
        if self.stopped and isinstance(event, (FeatureEvent, LabelEvent)):
            self.counters["after_stop"] += 1
            return []
        if isinstance(event, FeatureEvent):
            out = self._on_features(event, nbytes)
        elif isinstance(event, LabelEvent):
            out = self._on_label(event)
        elif isinstance(event, EndOfStream):
            out = self._on_end(event)
        else:
            raise TypeError(f"not an input event: {event!r}")
        return out

    @property
    def stopped(self) -> bool:
        """Whether ``config.stop_at_labels`` labels have been scored."""
        stop = self.config.stop_at_labels
        return stop is not None and self.n_labelled >= stop

    def run(self, events: Iterable[InputEvent]) -> list[Output]:
        """Process a whole sequence; return every output (mind the memory)."""
        out: list[Output] = []
        for event in events:
            out.extend(self.process(event))
        return out

    def _on_features(self, ev: FeatureEvent, nbytes: int = 0) -> list[Output]:
        self.last_ts = max(self.last_ts, ev.ts)
        if ev.id in self.buffer:
            if ev.id in self._deferred:  # its first prediction reads the old features
                self._flush_firsts()
            self.buffer.update_features(ev.id, ev.x, nbytes)
            self._updated.add(ev.id)
            self.counters["feature_updates"] += 1
            return []
        if self.buffer.was_evicted(ev.id):
            self.counters["features_after_eviction"] += 1
            return []
        at = self.context.arrive()
        self.n_instances += 1
        evicted = self.buffer.add(
            ev.id, at=at, ts=ev.ts, x=ev.x, labels_seen=self.n_labelled, nbytes=nbytes
        )
        if evicted is not None:  # its label may never come: drop what we kept beside it
            self._first_scores.pop(evicted.uid, None)
            self._deferred.pop(evicted.uid, None)
            self._updated.discard(evicted.uid)
        self.max_pending = max(self.max_pending, len(self.buffer))
        if self.classification and self.scoring:
            for key, y_ref in self.references.predict(ev.x).items():
                self.buffer.record(ev.id, key, ev.ts, y_ref)
        if self._defer_firsts:
            self._deferred[ev.id] = None
            if len(self._deferred) >= MAX_DEFERRED:  # no label for a while (a fill phase)
                self._flush_firsts()
            return []
        out: list[Output] = []
        positive = self.config.positive
        scores: list[float] = []
        for slot in self.slots:
            y_pred, proba = self.calls.predict(slot.learner, ev.x, at)
            if not self.scoring:
                continue
            self.buffer.record(ev.id, slot.name, ev.ts, y_pred)
            if slot.card.auc:
                scores.append(positive_score(proba, positive))
            if self.emit_predictions:
                out.append(
                    PredictionEvent(self.config.stream, slot.name, ev.id, ev.ts, "first", y_pred, 0)
                )
        if scores:
            self._first_scores[ev.id] = scores
        return out

    def _on_label(self, ev: LabelEvent) -> list[Output]:
        """Algorithm 1 at a label: score, re-evaluate the pending instances, then learn."""
        self.last_ts = max(self.last_ts, ev.ts)
        updated = ev.id in self._updated
        self._updated.discard(ev.id)
        if ev.id in self._deferred:  # labelled before any learner learned: predict now
            self._flush_firsts()
        scores = self._first_scores.pop(ev.id, None)
        inst = self.buffer.pop(ev.id)
        if inst is None:
            self.counters["unknown_labels"] += 1
            return []
        y = self._accept_label(ev.y)
        # No label was learned and the features did not change since the first
        # prediction: every learner would predict the same again (immediate labels).
        unchanged = inst.labels_seen == self.n_labelled - 1 and not updated
        self.rounds.start_label()
        refs = LabelReferences()
        if self.classification and self.scoring:
            rounds = self.rounds if self.config.reeval else None
            refs = self.references.at_label(inst, y, ev.ts, rounds, unchanged)
        due: list[Any] = []
        batched: list[list[Any]] = []
        if self.config.reeval:
            learners = [slot.learner for slot in self.slots]
            firsts = self._take_deferred()
            due, batched = self.rounds.predict(
                learners,
                self.calls.predict_many,
                self.n_labelled - self.protocol.repredict_lag,
                None if unchanged else inst,
                firsts,
            )
            if firsts:
                self._record_firsts(firsts, [p[len(due) : len(due) + len(firsts)] for p in batched])
        out: list[Output] = []
        if self.scoring:
            out = self._score(inst, y, ev, refs, scores, unchanged, batched)
            if self.config.reeval:
                out.extend(self._repredict(ev.ts, due, batched))
        self._learn(inst, y)
        if self.config.drift_reset:
            self._reset_alarmed()
        every = self.config.snapshot_every
        if every and self.n_labelled % every == 0:
            if self.scoring:
                snapshots = self.snapshots("periodic")
                self.curves.extend(snapshots)
                out.extend(snapshots)
            else:
                self._flush_firsts()  # where the snapshot would make them
        return out

    def _take_deferred(self) -> list[Any]:
        """The pending instances whose first prediction waits, in arrival order."""
        if not self._deferred:
            return []
        firsts = [self.buffer.get(uid) for uid in self._deferred]
        self._deferred.clear()
        return firsts

    def _flush_firsts(self) -> None:
        """Make the first predictions that wait (one batched call per learner)."""
        firsts = self._take_deferred()
        if not firsts:
            return
        xs = self.buffer.batch(firsts)
        ats = [m.at for m in firsts]
        self._record_firsts(
            firsts, [self.calls.predict_many(slot.learner, xs, ats) for slot in self.slots]
        )

    def _record_firsts(self, firsts: list[Any], predictions: list[list[Any]]) -> None:
        """Record each learner's first predictions of ``firsts``, at their arrival times."""
        if not self.scoring:
            return
        for slot, preds in zip(self.slots, predictions, strict=True):
            for inst, y_pred in zip(firsts, preds, strict=True):
                self.buffer.record(inst.uid, slot.name, inst.ts, y_pred)

    def _accept_label(self, y: Any) -> Any:
        """Count the label and return it as the learners get it: a class label as the
        stream gives it (``str`` in datasets and on the wire, any hashable from the
        library), a regression target as ``float``."""
        self.n_labelled += 1
        if not self.classification:
            return float(y)
        if y not in self._class_set:
            self._class_set.add(y)
            self.classes.append(str(y))
        return y

    def _score(
        self,
        inst: Any,
        y: Any,
        ev: LabelEvent,
        refs: LabelReferences,
        scores: list[float] | None,
        unchanged: bool,
        batched: list[list[Any]],
    ) -> list[Output]:
        """Score every learner on this label; feed its loss to its detectors and compare."""
        out: list[Output] = []
        reeval = self.config.reeval
        B = self.n_bins
        errors: list[float] = []
        for i, slot in enumerate(self.slots):
            history = inst.history[slot.name]
            first = history[0][1]
            if unchanged:
                final = first
            elif reeval:
                final = batched[i][-1]
            elif self.emit_predictions:
                final, _ = self.calls.predict(slot.learner, inst.x, inst.at)
            else:
                final = None  # the test-then-train prediction is only reported with bins
            bins = None
            if reeval:
                middle = (
                    self.rounds.dominant(history, inst.ts, ev.ts)
                    if self.classification
                    else average_per_bin(history, inst.ts, ev.ts, B)
                )
                bins = [first, *middle, final]
            error = slot.card.score(
                y,
                first,
                per=refs.per_first,
                maj=refs.maj_first,
                score=scores[i] if scores is not None else None,
                is_positive=str(y) == self.config.positive,
                bins=bins,
                per_bins=refs.per_bins,
                maj_bins=refs.maj_bins,
                maj_by=refs.maj_by,
            )
            errors.append(error)
            if self.emit_predictions:
                out.append(
                    PredictionEvent(
                        self.config.stream, slot.name, ev.id, ev.ts, "final", final, B + 1
                    )
                )
            for alarm in slot.card.detect(error):
                out.append(
                    DriftEvent(
                        self.config.stream,
                        slot.name,
                        alarm.detector,
                        alarm.n_scored,
                        ev.ts,
                        alarm.statistic,
                    )
                )
        self.pairs.update(errors)
        return out

    def _learn(self, inst: Any, y: Any) -> None:
        """Every learner and reference learns the label; the context releases it."""
        for slot in self.slots:
            try:
                slot.learner.learn_one(inst.x, y, at=inst.at)
            except Exception as exc:
                raise LearnerFailed(slot.name, inst.at, "learn", exc) from exc
        if self.classification and self.scoring:
            self.references.learn(inst.x, y)
        self.context.receive(inst.at, y)
        if self.n_labelled % 1024 == 0:
            oldest = self.buffer.oldest()
            self.context.forget_before((oldest.at if oldest else inst.at) - self._lags)
        if self._in_order is not None and self.scoring:  # the labels in instance order
            self._in_order.push(inst.at, str(y))

    def _reset_alarmed(self) -> None:
        """A learner whose detector alarmed on this label starts afresh: an untrained clone."""
        for slot in self.slots:
            if any(a and a[-1] == slot.card.n_scored for a in slot.card.alarms.values()):
                fresh = slot.learner.clone()
                bind_context(fresh, self.context)
                slot.learner = fresh
                slot.card.n_resets += 1

    def _repredict(self, ts: float, due: list[Any], batched: list[list[Any]]) -> list[Output]:
        """Record the round's predictions for the instances due, the references' too."""
        if not due:
            return []
        n = len(due)
        predictions: dict[str, list[Any]] = {}
        if self.classification:
            for key, y_ref in self.references.predict(due[0].x).items():
                predictions[key] = [y_ref] * n
        for slot, preds in zip(self.slots, batched, strict=True):
            predictions[slot.name] = preds[:n]
        self.rounds.record(ts, due, predictions)
        self.n_repredictions += n * len(self.slots)
        self.max_held = max(self.max_held, self.buffer.n_predictions_held)
        if not self.emit_predictions:
            return []
        stream = self.config.stream
        return [
            PredictionEvent(stream, slot.name, d.uid, ts, "repredict", y_pred)
            for slot in self.slots
            for d, y_pred in zip(due, predictions[slot.name], strict=True)
        ]

    def _on_end(self, ev: EndOfStream) -> list[Output]:
        self.last_ts = max(self.last_ts, ev.ts)
        if not self.scoring:
            self._flush_firsts()  # where the final snapshot would make them
            self.ended = True
            return []
        if self._in_order is not None:
            self._in_order.flush()
        self.counters["never_labelled"] = len(self.buffer)
        if self.classification:
            check_positive(
                self.config.positive, self.config.classes or self.classes, self.n_labelled
            )
        self.ended = True
        snapshots = self.snapshots("final")
        if self.config.snapshot_every:
            self.curves.extend(snapshots)
        return list(snapshots)

    # -- reporting --------------------------------------------------------------------------

    def snapshots(self, kind: str = "periodic") -> list[MetricSnapshot]:
        """A compact snapshot of every learner (what the ``metrics`` topic carries)."""
        self._flush_firsts()
        return reporting.snapshots(self, kind)

    def results(self) -> dict[str, Any]:
        """The results document (``DESIGN.md``, *Results JSON*), NaN as ``null``."""
        self._flush_firsts()
        return reporting.results(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_defer_firsts", False)  # a checkpoint from before deferral
        state.setdefault("_deferred", {})
        state.setdefault("scoring", True)
        self.__dict__.update(state)


def check_positive(positive: str | None, classes: list[str], n_labelled: int) -> None:
    """Refuse the positive class at the end of a stream whose ``classes`` lack it (the
    AUC of a class never seen is meaningless). ``classes`` are those known ahead where
    they are (``config.classes``: a dataset's, against which the positive class was
    checked before the run, so a prefix may lack it), else the labels the stream
    brought: a multi-class stream may bring its positive class at any label, so only
    the end shows it wrong.

    >>> check_positive("UP", ["DOWN"], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: positive class 'UP' is not one of the stream's classes: none of its 3 ...
    """
    if positive is None or not classes or str(positive) in classes:
        return
    raise ValueError(
        f"positive class {positive!r} is not one of the stream's classes: none of its "
        f"{n_labelled} labels was it (classes: {', '.join(classes)})"
    )
