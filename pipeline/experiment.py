"""One stream, many learners: input events in, predictions, metrics and drift alarms out.

:class:`Experiment` is the deterministic core both drivers call: ``streameval
evaluate`` feeds it the replay schedule in-process, the Kafka agents feed it
the same events merged from the feature and label topics. It implements the
protocol of continuous re-evaluation
(``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1):

* features of a new instance arrive: the instance joins the pending buffer
  and every learner makes its *first* prediction (bin 0);
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
are exactly 0 under any label delay and in every bin.

The details the papers leave open (cold start, order at equal times, the
re-prediction schedule, the bin mapping, the ``kappa_m`` reference) come from
``config.protocol`` (:mod:`streameval.pipeline.protocol`): the above is the
default, ``papers``; ``moa`` follows the authors' MOA code.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    clean,
)
from streameval.pipeline.failure import LearnerFailed
from streameval.pipeline.learners import as_learner, bind_context
from streameval.pipeline.learners.base import StreamContext, argmax
from streameval.pipeline.learners.baselines import Majority, NoChange
from streameval.pipeline.learners.spec import build_learner
from streameval.pipeline.pairs import PairwiseComparisons
from streameval.pipeline.protocol import protocol_of
from streameval.pipeline.reeval.bins import average_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer
from streameval.pipeline.reeval.rounds import Rounds, label_of
from streameval.pipeline.reeval.summary import weights_preset
from streameval.pipeline.report.curves import CurveRecorder
from streameval.pipeline.scorecard import Scorecard

PER = "__per__"
MAJ = "__maj__"


@dataclass
class _Slot:
    """A learner, under its name, with everything measured about it."""

    name: str
    learner: Any
    card: Scorecard


@dataclass
class _References:
    """What No-Change and Majority predicted for the instance being labelled."""

    per_first: Any = None
    maj_first: Any = None
    per_bins: list[Any] = field(default_factory=list)
    maj_bins: list[Any] = field(default_factory=list)
    maj_by: dict[str, Any] | None = None  # per estimator, when the protocol says so


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
    ) -> None:
        self.config = config
        self.emit_predictions = emit_predictions
        self.classification = config.task == "classification"
        self.n_bins = config.bins
        self.context = StreamContext()
        self.protocol = protocol_of(config.protocol, config.classes)
        self.slots = [
            _Slot(name, learner, self._scorecard())
            for name, learner in self._learners(learners, allow_import).items()
        ]
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
        self._per = NoChange()
        self._maj = Majority()
        windows = {
            name: config.window if name == "window" else None for name in config.estimators()
        }
        self._maj_refs = self.protocol.majority_references(windows)
        self.pairs = PairwiseComparisons(
            [s.name for s in self.slots], config.estimators(), classification=self.classification
        )
        self._first_scores: dict[str, list[float]] = {}
        self.diagnostics = (
            TemporalDependence(max_lag=config.max_lag) if self.classification else None
        )
        self._in_order = (
            InstanceOrder(self.diagnostics.update) if self.diagnostics is not None else None
        )
        self._weights = weights_preset(config.weights, self.n_bins + 2) if config.reeval else None
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

    # -- construction -----------------------------------------------------------------------

    def _learners(self, given: Mapping[str, Any] | None, allow_import: bool) -> dict[str, Any]:
        """The learners by name, bound to this stream's label context."""
        config = self.config
        if given is None:
            return {
                spec: build_learner(
                    spec,
                    context=self.context,
                    task=config.task,
                    seed=config.seed,
                    allow_import=allow_import,
                )
                for spec in config.learners
            }
        if list(given) != list(config.learners):
            raise ValueError(
                f"learner names {list(given)} differ from the config's {config.learners}"
            )
        out = {}
        for name, model in given.items():
            learner = as_learner(model, config.task)
            if config.drift_reset and not hasattr(learner, "clone"):
                raise ValueError(
                    f"learner {name!r} has no clone(): a drift reset restarts a learner as its "
                    "untrained clone (a River estimator has one)"
                )
            bind_context(learner, self.context)
            out[name] = learner
        return out

    def _scorecard(self) -> Scorecard:
        config = self.config
        with_auc = self.classification and config.positive is not None
        return Scorecard.build(
            config.task,
            config.estimators(),
            n_bins=self.n_bins + 2 if config.reeval else None,
            auc_window=(config.window or config.auc_window) if with_auc else None,
            detectors=config.detectors,
            seed=config.seed,
        )

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

    def _predict(self, learner: Any, x: Any, at: int) -> tuple[Any, dict | None]:
        try:
            if self.classification:
                proba = learner.predict_proba_one(x, at=at)
                return self.protocol.cold_start(argmax(proba)), proba
            return learner.predict_one(x, at=at), None
        except Exception as exc:
            raise self._failed(learner, at, "predict", exc) from exc

    def _predict_many(self, learner: Any, xs: list, ats: list[int]) -> list[Any]:
        """One batched call: the label (or value) predicted for each instance."""
        try:
            if self.classification:
                labels = getattr(learner, "predict_labels_many", None)
                if labels is not None:
                    out = list(labels(xs, at=ats))
                else:
                    out = [argmax(p) for p in learner.predict_proba_many(xs, at=ats)]
                return list(map(self.protocol.cold_start, out))
            return list(learner.predict_many(xs, at=ats))
        except Exception as exc:
            raise self._failed(learner, ats[0] if ats else -1, "re-predict", exc) from exc

    def _failed(self, learner: Any, at: int, step: str, exc: Exception) -> Exception:
        """``exc`` of one of the slots' learners as :class:`LearnerFailed` (others as is)."""
        if isinstance(exc, LearnerFailed):
            return exc
        name = next((s.name for s in self.slots if s.learner is learner), None)
        return exc if name is None else LearnerFailed(name, at, step, exc)

    def _ref(self, model: Any, x: Any) -> Any:
        """A reference baseline's prediction, cold start as the protocol says."""
        return self.protocol.cold_start(label_of(model, x))

    def _on_features(self, ev: FeatureEvent, nbytes: int = 0) -> list[Output]:
        self.last_ts = max(self.last_ts, ev.ts)
        if ev.id in self.buffer:
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
            self._updated.discard(evicted.uid)
        self.max_pending = max(self.max_pending, len(self.buffer))
        if self.classification:
            self.buffer.record(ev.id, PER, ev.ts, self._ref(self._per, ev.x))
            self.buffer.record(ev.id, MAJ, ev.ts, self._ref(self._maj, ev.x))
        out: list[Output] = []
        positive = self.config.positive
        scores: list[float] = []
        for slot in self.slots:
            y_pred, proba = self._predict(slot.learner, ev.x, at)
            self.buffer.record(ev.id, slot.name, ev.ts, y_pred)
            if slot.card.auc:
                scores.append(_score(proba, positive))
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
        refs = self._references(inst, y, ev.ts, unchanged)
        due: list[Any] = []
        batched: list[list[Any]] = []
        if self.config.reeval:
            learners = [slot.learner for slot in self.slots]
            due, batched = self.rounds.predict(
                learners,
                self._predict_many,
                self.n_labelled - self.protocol.repredict_lag,
                None if unchanged else inst,
            )
        out = self._score(inst, y, ev, refs, scores, unchanged, batched)
        if self.config.reeval:
            out.extend(self._repredict(ev.ts, due, batched))
        self._learn(inst, y)
        if self.config.drift_reset:
            self._reset_alarmed()
        every = self.config.snapshot_every
        if every and self.n_labelled % every == 0:
            snapshots = self.snapshots("periodic")
            self.curves.extend(snapshots)
            out.extend(snapshots)
        return out

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

    def _check_positive(self) -> None:
        """A stream whose classes were not known ahead: refuse the positive class at the end
        of a stream none of whose labels was it (the AUC of a class never seen is
        meaningless). A multi-class stream may bring its positive class at any label, so
        only the end shows it wrong."""
        positive = self.config.positive
        if positive is None or not self.classes or str(positive) in self.classes:
            return
        raise ValueError(
            f"positive class {positive!r} is not one of the stream's classes: none of its "
            f"{self.n_labelled} labels was it (classes: {', '.join(self.classes)})"
        )

    def _references(self, inst: Any, y: Any, ts: float, unchanged: bool) -> _References:
        """No-Change's and Majority's first prediction, and their bins when re-evaluating."""
        refs = _References()
        if not self.classification:
            return refs
        if self._maj_refs is not None:  # the label's majority (including it), per estimator
            refs.maj_by = {name: m.update(y) for name, m in self._maj_refs.items()}
        refs.per_first = inst.history[PER][0][1]
        refs.maj_first = inst.history[MAJ][0][1]
        if not self.config.reeval:
            return refs
        if unchanged:
            per_final, maj_final = refs.per_first, refs.maj_first
        else:
            per_final, maj_final = self._ref(self._per, inst.x), self._ref(self._maj, inst.x)
        refs.per_bins = self.rounds.reference_bins(inst, PER, ts, per_final)
        refs.maj_bins = self.rounds.reference_bins(inst, MAJ, ts, maj_final)
        return refs

    def _score(
        self,
        inst: Any,
        y: Any,
        ev: LabelEvent,
        refs: _References,
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
                final, _ = self._predict(slot.learner, inst.x, inst.at)
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
        if self.classification:
            self._per.learn_one(inst.x, y)
            self._maj.learn_one(inst.x, y)
        self.context.receive(inst.at, y)
        if self.n_labelled % 1024 == 0:
            oldest = self.buffer.oldest()
            self.context.forget_before((oldest.at if oldest else inst.at) - self._lags)
        if self._in_order is not None:  # the diagnostics read the labels in instance order
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
            predictions[PER] = [self._ref(self._per, due[0].x)] * n
            predictions[MAJ] = [self._ref(self._maj, due[0].x)] * n
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
        if self._in_order is not None:
            self._in_order.flush()
        self.counters["never_labelled"] = len(self.buffer)
        if self.classification:
            self._check_positive()
        self.ended = True
        snapshots = self.snapshots("final")
        if self.config.snapshot_every:
            self.curves.extend(snapshots)
        return list(snapshots)

    # -- reporting --------------------------------------------------------------------------

    def snapshots(self, kind: str = "periodic") -> list[MetricSnapshot]:
        """A compact snapshot of every learner (what the ``metrics`` topic carries)."""
        out = []
        for slot in self.slots:
            flat = slot.card.flat()
            flat["pending"] = len(self.buffer)
            flat["n_repredictions"] = self.n_repredictions
            binned = slot.card.binned_block()
            out.append(
                MetricSnapshot(
                    self.config.stream,
                    slot.name,
                    self.n_labelled,
                    self.last_ts,
                    kind,
                    clean(flat),
                    clean(binned) if binned else None,
                )
            )
        return out

    def results(self) -> dict[str, Any]:
        """The results document (``DESIGN.md``, *Results JSON*), NaN as ``null``."""
        config = self.config
        learners = {
            slot.name: slot.card.entry(self._weights, config.drift_points, self.n_labelled)
            for slot in self.slots
        }
        doc = {
            "stream": config.stream,
            "task": config.task,
            "n_instances": self.n_instances,
            "n_labelled": self.n_labelled,
            "classes": list(self.classes),
            "config": config.to_dict(),
            "learners": learners,
            "comparisons": self.pairs.get(),
            "overhead": self._overhead(),
            "counters": dict(self.counters),
        }
        if self.diagnostics is not None:
            doc["diagnostics"] = self.diagnostics.get()
        if config.snapshot_every:
            doc["curves"] = self.curves.block()
        return clean(doc)

    def _overhead(self) -> dict[str, Any]:
        """The cost of continuous re-evaluation and the pending buffer's high-water marks."""
        buffer = self.buffer
        return {
            "n_repredictions": buffer.n_repredictions_total,
            "n_predictions_made": self.n_repredictions,
            "N_R": buffer.n_repredictions_total / self.n_labelled if self.n_labelled else 0.0,
            "pending": len(buffer),
            "max_pending": self.max_pending,
            "predictions_held": buffer.n_predictions_held,
            "max_predictions_held": self.max_held,
            "evicted": buffer.n_evicted,
            "labels_of_evicted": buffer.n_evicted_labels,
        }


def _score(proba: dict | None, positive: str | None) -> float:
    """The score of the positive class (named by its ``str``), for the prequential AUC."""
    if not proba or positive is None:
        return 0.0
    total = sum(proba.values())
    if total <= 0:
        return 0.0
    p = proba.get(positive)
    if p is None:  # labels that are not strings (the library's streams): match by str
        p = next((v for k, v in proba.items() if str(k) == positive), 0.0)
    return p / total
