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
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.diagnostics.temporal import TemporalDependence
from streameval.pipeline.drift.evaluation import score_detections
from streameval.pipeline.drift.spec import build_detector
from streameval.pipeline.events import (
    DriftEvent,
    EndOfStream,
    FeatureEvent,
    InputEvent,
    LabelEvent,
    PredictionEvent,
)
from streameval.pipeline.learners.base import StreamContext, argmax
from streameval.pipeline.learners.baselines import Majority, NoChange
from streameval.pipeline.learners.spec import build_learner, learner_lags
from streameval.pipeline.metrics.auc import PrequentialAUC
from streameval.pipeline.metrics.binned import BinnedClassificationMetrics, BinnedRegressionMetrics
from streameval.pipeline.metrics.classification import ClassificationMetrics
from streameval.pipeline.metrics.comparison import QStatistic, SignedMcNemar
from streameval.pipeline.metrics.regression import RegressionMetrics
from streameval.pipeline.reeval.bins import average_per_bin, dominant_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer
from streameval.pipeline.reeval.summary import weighted_summary, weights_preset
from streameval.pipeline.report.curves import CurveRecorder

PER = "__per__"
MAJ = "__maj__"

SNAPSHOT_METRICS = ("accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus", "gmean")
BINNED_METRICS = ("accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus")
REGRESSION_METRICS = ("mae", "rmse")


@dataclass(frozen=True, slots=True)
class MetricSnapshot:
    """Every metric of one learner after ``n_labelled`` labels (``kind`` periodic or final)."""

    stream: str
    learner: str
    n_labelled: int
    ts: float
    kind: str
    metrics: dict[str, float | None]
    binned: dict[str, list[float | None]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "learner": self.learner,
            "n_labelled": self.n_labelled,
            "ts": self.ts,
            "kind": self.kind,
            "metrics": self.metrics,
            "binned": self.binned,
        }


Output = PredictionEvent | DriftEvent | MetricSnapshot


def clean(value: Any) -> Any:
    """NaN and infinities become ``None`` (JSON ``null``), recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


@dataclass
class _Slot:
    """A learner with everything measured about it."""

    spec: str
    learner: Any
    metrics: dict[str, Any]
    auc: dict[str, PrequentialAUC]
    binned: dict[str, Any]
    detectors: list[tuple[str, Any]]
    alarms: dict[str, list[int]] = field(default_factory=dict)
    n_scored: int = 0
    n_resets: int = 0


class Experiment:
    """Evaluate ``config.learners`` on one stream of input events.

    Call :meth:`process` with each event in schedule order; it returns the
    output events (predictions when ``emit_predictions``, drift alarms, metric
    snapshots). :meth:`results` gives the results document of ``DESIGN.md``.
    The object is picklable: a pickle is a complete checkpoint.

    ``allow_import`` lets learner specs import any class (``import[path=m.C]``);
    it is a local decision of the process that builds the experiment, never
    part of the config, so an experiment arriving from Kafka cannot import code.
    """

    def __init__(
        self,
        config: ExperimentConfig,
        *,
        emit_predictions: bool = False,
        allow_import: bool = False,
    ) -> None:
        self.config = config
        self.allow_import = allow_import
        self.emit_predictions = emit_predictions
        self.classification = config.task == "classification"
        self.n_bins = config.bins
        lags = max((learner_lags(s) for s in config.learners), default=1)
        self._lags = max(1, lags)
        self.context = StreamContext(max_recent=self._lags)
        self._updated: set[str] = set()
        self.buffer = PendingBuffer(k=config.reeval_k, cap=config.pending_cap)
        self.estimators = config.estimators()
        self.slots = [self._make_slot(spec) for spec in config.learners]
        self._per = NoChange()
        self._maj = Majority()
        self._pairs = list(combinations(range(len(self.slots)), 2))
        self._q = {p: {n: QStatistic(f) for n, f in self.estimators.items()} for p in self._pairs}
        self._mcnemar = {
            p: {n: SignedMcNemar(f) for n, f in self.estimators.items()} for p in self._pairs
        }
        self._first_scores: dict[str, list[float]] = {}
        self.diagnostics = (
            TemporalDependence(max_lag=config.max_lag) if self.classification else None
        )
        self._diag_next = 0
        self._diag_waiting: dict[int, Hashable] = {}
        self._weights = weights_preset(config.weights, self.n_bins + 2) if config.reeval else None
        self.n_instances = 0
        self.n_labelled = 0
        self.n_repredictions = 0
        self.max_pending = 0
        self.max_held = 0
        self.classes: list[str] = []
        self._class_set: set[str] = set()
        self.counters = {
            "unknown_labels": 0,
            "feature_updates": 0,
            "features_after_eviction": 0,
            "never_labelled": 0,
        }
        self.last_ts = 0.0
        self.ended = False
        self.curves = CurveRecorder()  # the periodic snapshots, for results()["curves"]
        # d_D of the histories met at the current label: equal histories (No-Change the
        # learner and the reference, Majority likewise) are binned once
        self._seen_bins: list[tuple[list, list]] = []

    # -- construction -----------------------------------------------------------------------

    def _build_learner(self, spec: str) -> Any:
        return build_learner(
            spec,
            context=self.context,
            task=self.config.task,
            seed=self.config.seed,
            allow_import=self.allow_import,
        )

    def _make_slot(self, spec: str) -> _Slot:
        if self.classification:
            metrics = {n: ClassificationMetrics(f) for n, f in self.estimators.items()}
            binned = (
                {
                    n: BinnedClassificationMetrics(self.n_bins + 2, f)
                    for n, f in self.estimators.items()
                }
                if self.config.reeval
                else {}
            )
        else:
            metrics = {n: RegressionMetrics(f) for n, f in self.estimators.items()}
            binned = (
                {n: BinnedRegressionMetrics(self.n_bins + 2, f) for n, f in self.estimators.items()}
                if self.config.reeval
                else {}
            )
        auc: dict[str, PrequentialAUC] = {}
        if self.classification and self.config.positive is not None:
            auc["whole"] = PrequentialAUC(window=None)
            auc["window"] = PrequentialAUC(window=self.config.window or self.config.auc_window)
        detectors = [(d, build_detector(d, seed=self.config.seed)) for d in self.config.detectors]
        return _Slot(
            spec=spec,
            learner=self._build_learner(spec),
            metrics=metrics,
            auc=auc,
            binned=binned,
            detectors=detectors,
            alarms={d: [] for d in self.config.detectors},
        )

    # -- the protocol -----------------------------------------------------------------------

    def process(self, event: InputEvent) -> list[Output]:
        """Handle one input event; return what it produced."""
        if isinstance(event, FeatureEvent):
            out = self._on_features(event)
        elif isinstance(event, LabelEvent):
            out = self._on_label(event)
        elif isinstance(event, EndOfStream):
            out = self._on_end(event)
        else:
            raise TypeError(f"not an input event: {event!r}")
        return out

    def run(self, events: Iterable[InputEvent]) -> list[Output]:
        """Process a whole sequence; return every output (mind the memory)."""
        out: list[Output] = []
        for event in events:
            out.extend(self.process(event))
        return out

    def _predict(self, learner: Any, x: Any, at: int) -> tuple[Any, dict | None]:
        if self.classification:
            proba = learner.predict_proba_one(x, at=at)
            return argmax(proba), proba
        return learner.predict_one(x, at=at), None

    def _predict_many(self, learner: Any, xs: list, ats: list[int]) -> list[Any]:
        """One batched call: the label (or value) predicted for each instance."""
        if self.classification:
            labels = getattr(learner, "predict_labels_many", None)
            if labels is not None:
                return list(labels(xs, at=ats))
            return [argmax(p) for p in learner.predict_proba_many(xs, at=ats)]
        return list(learner.predict_many(xs, at=ats))

    def _round(self, inst: Any | None) -> tuple[list[Any], list[list[Any]]]:
        """The re-evaluation round of this label, and the labelled instance's final
        prediction, in **one** batched call per learner.

        Returns the instances due (:meth:`PendingBuffer.due`) and, per slot, the
        predictions for them followed, when ``inst`` is given, by the
        test-then-train prediction of ``inst``. Both are made by the model
        that has not yet learned this label, so one call serves both; the
        instances' features come as rows of the buffer's matrix.
        """
        due = self.buffer.due(self.n_labelled) if self.config.reeval else []
        members = [*due, inst] if inst is not None else due
        if not members:
            return due, [[] for _ in self.slots]
        xs = self.buffer.batch(members)
        ats = [m.at for m in members]
        return due, [self._predict_many(slot.learner, xs, ats) for slot in self.slots]

    def _on_features(self, ev: FeatureEvent) -> list[Output]:
        self.last_ts = max(self.last_ts, ev.ts)
        if ev.id in self.buffer:
            self.buffer.update_features(ev.id, ev.x)
            self._updated.add(ev.id)
            self.counters["feature_updates"] += 1
            return []
        if self.buffer.was_evicted(ev.id):
            self.counters["features_after_eviction"] += 1
            return []
        at = self.context.arrive()
        self.n_instances += 1
        evicted = self.buffer.add(ev.id, at=at, ts=ev.ts, x=ev.x, labels_seen=self.n_labelled)
        if evicted is not None:  # its label may never come: drop what we kept beside it
            self._first_scores.pop(evicted.uid, None)
            self._updated.discard(evicted.uid)
        self.max_pending = max(self.max_pending, len(self.buffer))
        if self.classification:
            self.buffer.record(ev.id, PER, ev.ts, argmax(self._per.predict_proba_one(ev.x)))
            self.buffer.record(ev.id, MAJ, ev.ts, argmax(self._maj.predict_proba_one(ev.x)))
        out: list[Output] = []
        positive = self.config.positive
        scores: list[float] = []
        for slot in self.slots:
            y_pred, proba = self._predict(slot.learner, ev.x, at)
            self.buffer.record(ev.id, slot.spec, ev.ts, y_pred)
            if slot.auc:
                scores.append(_score(proba, positive))
            if self.emit_predictions:
                out.append(
                    PredictionEvent(self.config.stream, slot.spec, ev.id, ev.ts, "first", y_pred, 0)
                )
        if scores:
            self._first_scores[ev.id] = scores
        return out

    def _on_label(self, ev: LabelEvent) -> list[Output]:
        self.last_ts = max(self.last_ts, ev.ts)
        inst = self.buffer.pop(ev.id)
        scores = self._first_scores.pop(ev.id, None)
        updated = ev.id in self._updated
        self._updated.discard(ev.id)
        if inst is None:
            self.counters["unknown_labels"] += 1
            return []
        self.n_labelled += 1
        y: Any = str(ev.y) if self.classification else float(ev.y)
        if self.classification and y not in self._class_set:
            self._class_set.add(y)
            self.classes.append(y)
        out: list[Output] = []
        stream = self.config.stream
        reeval = self.config.reeval
        B = self.n_bins
        # No label was learned and the features did not change since the first
        # prediction: every learner would predict the same again (immediate labels).
        unchanged = inst.labels_seen == self.n_labelled - 1 and not updated

        self.__dict__.setdefault("_seen_bins", []).clear()
        per_bins: list[Any] = []
        maj_bins: list[Any] = []
        if self.classification:
            per_first = inst.history[PER][0][1]
            maj_first = inst.history[MAJ][0][1]
            if unchanged:
                per_final, maj_final = per_first, maj_first
            else:
                per_final = argmax(self._per.predict_proba_one(inst.x))
                maj_final = argmax(self._maj.predict_proba_one(inst.x))
            if reeval:
                per_bins = [
                    per_first,
                    *self._dominant(inst.history[PER], inst.ts, ev.ts, B),
                    per_final,
                ]
                maj_bins = [
                    maj_first,
                    *self._dominant(inst.history[MAJ], inst.ts, ev.ts, B),
                    maj_final,
                ]

        due: list[Any] = []
        batched: list[list[Any]] = []
        if reeval:
            due, batched = self._round(None if unchanged else inst)
        errors: list[float] = []
        for i, slot in enumerate(self.slots):
            history = inst.history[slot.spec]
            first = history[0][1]
            if unchanged:
                final = first
            elif reeval:
                final = batched[i][-1]
            elif self.emit_predictions:
                final, _ = self._predict(slot.learner, inst.x, inst.at)
            else:
                final = None  # the test-then-train prediction is only reported with bins
            if self.classification:
                for m in slot.metrics.values():
                    m.update(y, first, per_first, maj_first)
                if scores is not None and slot.auc:
                    for a in slot.auc.values():
                        a.update(scores[i], y == self.config.positive)
                if reeval:
                    preds = [first, *self._dominant(history, inst.ts, ev.ts, B), final]
                    for b in slot.binned.values():
                        b.update(y, preds, per_bins, maj_bins)
                error = 0.0 if first == y else 1.0
            else:
                for m in slot.metrics.values():
                    m.update(y, first)
                if reeval:
                    preds = [first, *average_per_bin(history, inst.ts, ev.ts, B), final]
                    for b in slot.binned.values():
                        b.update(y, preds)
                error = abs(y - first) if first is not None else math.nan
            errors.append(error)
            slot.n_scored += 1
            if self.emit_predictions:
                out.append(PredictionEvent(stream, slot.spec, ev.id, ev.ts, "final", final, B + 1))
            for name, detector in slot.detectors:
                if not math.isnan(error) and detector.update(error):
                    slot.alarms[name].append(slot.n_scored)
                    out.append(
                        DriftEvent(
                            stream, slot.spec, name, slot.n_scored, ev.ts, float(detector.statistic)
                        )
                    )
        self._compare(errors)

        if reeval:
            out.extend(self._repredict(ev.ts, due, batched))

        for slot in self.slots:
            slot.learner.learn_one(inst.x, y, at=inst.at)
        if self.classification:
            self._per.learn_one(inst.x, y)
            self._maj.learn_one(inst.x, y)
        self.context.receive(inst.at, y)
        if self.n_labelled % 1024 == 0:
            oldest = self.buffer.oldest()
            self.context.forget_before((oldest.at if oldest else inst.at) - self._lags)
        self._diagnose(inst.at, y)

        if self.config.drift_reset:
            for slot in self.slots:
                if any(a and a[-1] == slot.n_scored for a in slot.alarms.values()):
                    slot.learner = self._build_learner(slot.spec)
                    slot.n_resets += 1

        every = self.config.snapshot_every
        if every and self.n_labelled % every == 0:
            snapshots = self.snapshots("periodic")
            self._curves().extend(snapshots)
            out.extend(snapshots)
        return out

    def _repredict(self, ts: float, due: list[Any], batched: list[list[Any]]) -> list[Output]:
        """Record the round's predictions (made by :meth:`_round`) for the instances due."""
        if not due:
            return []
        n = len(due)
        if self.classification:
            rows = self.buffer.rows_of(due)

            def record(due: list[Any], key: str, ts: float, preds: list[Any]) -> int:
                return self.buffer.record_many(due, key, ts, preds, rows)

            per = argmax(self._per.predict_proba_one(due[0].x))
            maj = argmax(self._maj.predict_proba_one(due[0].x))
            record(due, PER, ts, [per] * n)
            record(due, MAJ, ts, [maj] * n)
        else:
            record = self._record_each
        out: list[Output] = []
        for slot, preds in zip(self.slots, batched, strict=True):
            preds = preds[:n]
            record(due, slot.spec, ts, preds)
            if self.emit_predictions:
                out.extend(
                    PredictionEvent(self.config.stream, slot.spec, d.uid, ts, "repredict", y_pred)
                    for d, y_pred in zip(due, preds, strict=True)
                )
        self.n_repredictions += n * len(self.slots)
        self.max_held = max(self.max_held, self.buffer.n_predictions_held)
        return out

    def _record_each(self, due: list[Any], key: str, ts: float, preds: list[Any]) -> int:
        """Regression values are recorded one by one (compaction compares floats)."""
        return sum(self.buffer.record(d.uid, key, ts, y) for d, y in zip(due, preds, strict=True))

    def _dominant(self, history: list, t_start: float, t_end: float, n_bins: int) -> list[Any]:
        """``dominant_per_bin`` of ``history``, reused for an equal history of the same
        instance (the callers all pass this label's waiting period)."""
        seen = self.__dict__.setdefault("_seen_bins", [])
        for other, bins in seen:
            if other == history:
                return bins
        bins = dominant_per_bin(history, t_start, t_end, n_bins)
        seen.append((history, bins))
        return bins

    def _compare(self, errors: list[float]) -> None:
        for pair in self._pairs:
            a, b = errors[pair[0]], errors[pair[1]]
            if math.isnan(a) or math.isnan(b):
                continue
            for q in self._q[pair].values():
                q.update(a, b)
            if self.classification:
                for m in self._mcnemar[pair].values():
                    m.update(a > 0, b > 0)

    def _diagnose(self, at: int, y: Hashable) -> None:
        """Feed the diagnostics with labels in *instance* order, whatever the arrival order."""
        if self.diagnostics is None:
            return
        self._diag_waiting[at] = y
        if len(self._diag_waiting) > 100_000:  # a gap that never fills (evicted instance)
            self._diag_next = min(self._diag_waiting)
        while self._diag_next in self._diag_waiting:
            self.diagnostics.update(self._diag_waiting.pop(self._diag_next))
            self._diag_next += 1

    def _on_end(self, ev: EndOfStream) -> list[Output]:
        self.last_ts = max(self.last_ts, ev.ts)
        if self.diagnostics is not None:
            for at in sorted(self._diag_waiting):
                self.diagnostics.update(self._diag_waiting[at])
            self._diag_waiting.clear()
        self.counters["never_labelled"] = len(self.buffer)
        self.ended = True
        snapshots = self.snapshots("final")
        if self.config.snapshot_every:
            self._curves().extend(snapshots)
        return list(snapshots)

    # -- reporting --------------------------------------------------------------------------

    def snapshots(self, kind: str = "periodic") -> list[MetricSnapshot]:
        """A compact snapshot of every learner (what the ``metrics`` topic carries)."""
        out = []
        for slot in self.slots:
            summary = self._learner_summary(slot)
            flat: dict[str, float | None] = {}
            for name, values in summary["estimators"].items():
                for metric, value in values.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        flat[metric if name == "whole" else f"{name}.{metric}"] = value
            for name, value in summary.get("auc", {}).items():
                flat["auc" if name == "whole" else f"{name}.auc"] = value
            flat["pending"] = len(self.buffer)
            flat["n_repredictions"] = self.n_repredictions
            binned = summary.get("binned", {}).get("whole")
            out.append(
                MetricSnapshot(
                    self.config.stream,
                    slot.spec,
                    self.n_labelled,
                    self.last_ts,
                    kind,
                    clean(flat),
                    clean(binned) if binned else None,
                )
            )
        return out

    def _learner_summary(self, slot: _Slot) -> dict[str, Any]:
        estimators = {name: m.get() for name, m in slot.metrics.items()}
        summary: dict[str, Any] = {"estimators": estimators}
        if slot.auc:
            summary["auc"] = {name: a.get() for name, a in slot.auc.items()}
        if slot.binned:
            summary["binned"] = {name: b.get() for name, b in slot.binned.items()}
        return summary

    def results(self) -> dict[str, Any]:
        """The results document (``DESIGN.md``, *Results JSON*), NaN as ``null``."""
        learners: dict[str, Any] = {}
        for slot in self.slots:
            summary = self._learner_summary(slot)
            entry: dict[str, Any] = dict(summary["estimators"]["whole"])
            for name, values in summary["estimators"].items():
                if name != "whole":
                    entry[name] = dict(values)
            for name, value in summary.get("auc", {}).items():
                if name == "whole":
                    entry["auc"] = value
                else:
                    entry.setdefault("window", {})["auc"] = value
            if slot.binned:
                binned = summary["binned"]
                block: dict[str, Any] = {
                    k: v for k, v in binned["whole"].items() if isinstance(v, list)
                }
                for name, values in binned.items():
                    if name != "whole":
                        block[name] = {k: v for k, v in values.items() if isinstance(v, list)}
                entry["binned"] = block
                assert self._weights is not None
                entry["psi_w"] = {
                    k: weighted_summary(v, self._weights)
                    for k, v in block.items()
                    if isinstance(v, list) and k != "n"
                }
            if slot.detectors:
                entry["drift"] = {
                    name: self._drift_block(alarms) for name, alarms in slot.alarms.items()
                }
                entry["drift_resets"] = slot.n_resets
            entry["n_scored"] = slot.n_scored
            learners[slot.spec] = entry
        comparisons = {}
        for i, j in self._pairs:
            key = f"{self.slots[i].spec} vs {self.slots[j].spec}"
            comparisons[key] = {"q": {n: q.get() for n, q in self._q[(i, j)].items()}}
            if self.classification:
                comparisons[key]["mcnemar"] = {n: m.get() for n, m in self._mcnemar[(i, j)].items()}
        doc = {
            "stream": self.config.stream,
            "task": self.config.task,
            "n_instances": self.n_instances,
            "n_labelled": self.n_labelled,
            "classes": list(self.classes),
            "config": self.config.to_dict(),
            "learners": learners,
            "comparisons": comparisons,
            "overhead": {
                "n_repredictions": self.buffer.n_repredictions_total,
                "n_predictions_made": self.n_repredictions,
                "N_R": (
                    self.buffer.n_repredictions_total / self.n_labelled if self.n_labelled else 0.0
                ),
                "pending": len(self.buffer),
                "max_pending": self.max_pending,
                "predictions_held": self.buffer.n_predictions_held,
                "max_predictions_held": self.max_held,
                "evicted": self.buffer.n_evicted,
                "labels_of_evicted": self.buffer.n_evicted_labels,
            },
            "counters": dict(self.counters),
        }
        if self.diagnostics is not None:
            doc["diagnostics"] = self.diagnostics.get()
        curves = self._curves().block() if self.config.snapshot_every else None
        if curves is not None:
            doc["curves"] = curves
        return clean(doc)

    def _curves(self) -> CurveRecorder:
        """The curve recorder (created here for experiments pickled before it existed)."""
        recorder = self.__dict__.get("curves")
        if recorder is None:
            recorder = self.curves = CurveRecorder()
        return recorder

    def _drift_block(self, alarms: list[int]) -> dict[str, Any]:
        block: dict[str, Any] = {"alarms": list(alarms), "n_alarms": len(alarms)}
        if self.config.drift_points:
            report = score_detections(alarms, self.config.drift_points, self.n_labelled)
            block["detection"] = asdict(report)
        return block


def _score(proba: dict | None, positive: str | None) -> float:
    """The score of the positive class, for the prequential AUC."""
    if not proba or positive is None:
        return 0.0
    total = sum(proba.values())
    return proba.get(positive, 0.0) / total if total > 0 else 0.0
