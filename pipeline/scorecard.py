"""Everything measured about one learner of an experiment.

A :class:`Scorecard` holds one learner's prequential metrics (one set per
estimator: whole history, sliding window, fading factor), its prequential AUC,
its binned metrics of continuous re-evaluation, and its drift detectors with
their alarms. The :class:`~streameval.pipeline.experiment.Experiment` decides
*what* is scored (the first prediction, the bins, the references' predictions);
the scorecard only records it and reports it.

The references No-Change (``y_per``) and Majority (``y_maj``) go into every
update beside the learner's own prediction: they define ``p_per`` and ``p_maj``
of the kappa family (``temporal-dependence-evaluation-journal.txt`` eq. 13,
sect. 4.6).

>>> from streameval.pipeline.metrics.forgetting import Forgetting
>>> card = Scorecard.build(
...     "classification", {"whole": Forgetting.whole()}, n_bins=None, auc_window=None,
...     detectors=["ph[estimator=raw,lambda=1]"], seed=0)
>>> for y, p in [("a", "a"), ("b", "a"), ("b", "b"), ("a", "a")]:
...     _ = card.score(y, p, per=y, maj="a")
>>> card.n_scored, card.summary()["estimators"]["whole"]["accuracy"]
(4, 0.75)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from streameval.pipeline.drift.evaluation import score_detections
from streameval.pipeline.drift.spec import build_detector
from streameval.pipeline.metrics.auc import PrequentialAUC
from streameval.pipeline.metrics.binned import (
    BinnedClassificationMetrics,
    BinnedRegressionMetrics,
)
from streameval.pipeline.metrics.classification import ClassificationMetrics
from streameval.pipeline.metrics.forgetting import Forgetting
from streameval.pipeline.metrics.regression import RegressionMetrics


@dataclass
class Alarm:
    """A detector's alarm: which detector, after how many scored labels, its statistic."""

    detector: str
    n_scored: int
    statistic: float


@dataclass
class Scorecard:
    """One learner's metrics, AUC, binned metrics and drift detectors."""

    classification: bool
    metrics: dict[str, Any]
    auc: dict[str, PrequentialAUC]
    binned: dict[str, Any]
    detectors: list[tuple[str, Any]]
    alarms: dict[str, list[int]] = field(default_factory=dict)
    n_scored: int = 0
    n_resets: int = 0

    @classmethod
    def build(
        cls,
        task: str,
        estimators: Mapping[str, Forgetting],
        *,
        n_bins: int | None,
        auc_window: int | None,
        detectors: Sequence[str],
        seed: int,
    ) -> Scorecard:
        """A fresh scorecard: ``n_bins`` (B + 2) bins when re-evaluating, AUC when
        ``auc_window`` is given (a binary stream with a positive class)."""
        classification = task == "classification"
        metric = ClassificationMetrics if classification else RegressionMetrics
        binned_metric = BinnedClassificationMetrics if classification else BinnedRegressionMetrics
        auc: dict[str, PrequentialAUC] = {}
        if classification and auc_window is not None:
            auc = {"whole": PrequentialAUC(window=None), "window": PrequentialAUC(auc_window)}
        return cls(
            classification=classification,
            metrics={n: metric(f) for n, f in estimators.items()},
            auc=auc,
            binned={}
            if n_bins is None
            else {n: binned_metric(n_bins, f) for n, f in estimators.items()},
            detectors=[(d, build_detector(d, seed=seed)) for d in detectors],
            alarms={d: [] for d in detectors},
        )

    # -- recording --------------------------------------------------------------------------

    def score(
        self,
        y: Any,
        first: Any,
        *,
        per: Any = None,
        maj: Any = None,
        score: float | None = None,
        is_positive: bool = False,
        bins: list[Any] | None = None,
        per_bins: list[Any] | None = None,
        maj_bins: list[Any] | None = None,
        maj_by: Mapping[str, Any] | None = None,
    ) -> float:
        """Score one label: the first prediction, the AUC score, the bins. Returns the
        loss that the drift detectors watch (0/1 error, or absolute error; NaN when the
        regressor made no prediction). ``maj_by`` gives each estimator its own Majority
        reference (MOA's ``kappa_m``), for the first prediction and every bin."""
        self.n_scored += 1
        if self.classification:
            for name, m in self.metrics.items():
                m.update(y, first, per, maj if maj_by is None else maj_by[name])
            if score is not None:
                for a in self.auc.values():
                    a.update(score, is_positive)
            if bins is not None:
                for name, b in self.binned.items():
                    refs = maj_bins if maj_by is None else [maj_by[name]] * len(bins)
                    b.update(y, bins, per_bins, refs)
            return 0.0 if first == y else 1.0
        for m in self.metrics.values():
            m.update(y, first)
        if bins is not None:
            for b in self.binned.values():
                b.update(y, bins)
        return abs(y - first) if first is not None else math.nan

    def detect(self, error: float) -> list[Alarm]:
        """Feed ``error`` to every detector; the alarms it raised."""
        alarms = []
        if math.isnan(error):
            return alarms
        for name, detector in self.detectors:
            if detector.update(error):
                self.alarms[name].append(self.n_scored)
                alarms.append(Alarm(name, self.n_scored, float(detector.statistic)))
        return alarms

    # -- reporting --------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """``{"estimators": {name: metrics}, "auc": ..., "binned": ...}`` (what is present)."""
        out: dict[str, Any] = {"estimators": {n: m.get() for n, m in self.metrics.items()}}
        if self.auc:
            out["auc"] = {n: a.get() for n, a in self.auc.items()}
        if self.binned:
            out["binned"] = {n: b.get() for n, b in self.binned.items()}
        return out

    def flat(self) -> dict[str, float | None]:
        """The numeric metrics as one flat dict (``window.accuracy``, ``auc``, ...)."""
        summary = self.summary()
        flat: dict[str, float | None] = {}
        for name, values in summary["estimators"].items():
            for metric, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    flat[metric if name == "whole" else f"{name}.{metric}"] = value
        for name, value in summary.get("auc", {}).items():
            flat["auc" if name == "whole" else f"{name}.auc"] = value
        return flat

    def binned_block(self, summary: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The binned metrics as the results entry and the snapshots carry them: the whole
        history's lists at the top, the other estimators' nested under their names
        (``{"accuracy": [...], "window": {"accuracy": [...]}}``); ``None`` without
        re-evaluation."""
        if not self.binned:
            return None
        binned = (summary or self.summary())["binned"]
        block: dict[str, Any] = {k: v for k, v in binned["whole"].items() if isinstance(v, list)}
        for name, values in binned.items():
            if name != "whole":
                block[name] = {k: v for k, v in values.items() if isinstance(v, list)}
        return block

    def entry(
        self,
        weights: list[float] | None,
        drift_points: list[int],
        n_labelled: int,
    ) -> dict[str, Any]:
        """The learner's entry of the results document."""
        from streameval.pipeline.reeval.summary import weighted_summary

        summary = self.summary()
        entry: dict[str, Any] = dict(summary["estimators"]["whole"])
        for name, values in summary["estimators"].items():
            if name != "whole":
                entry[name] = dict(values)
        for name, value in summary.get("auc", {}).items():
            if name == "whole":
                entry["auc"] = value
            else:
                entry.setdefault("window", {})["auc"] = value
        block = self.binned_block(summary)
        if block is not None:
            entry["binned"] = block
            assert weights is not None
            entry["psi_w"] = {
                k: weighted_summary(v, weights)
                for k, v in block.items()
                if isinstance(v, list) and k != "n"
            }
        if self.detectors:
            entry["drift"] = {
                name: _drift_block(alarms, drift_points, n_labelled)
                for name, alarms in self.alarms.items()
            }
            entry["drift_resets"] = self.n_resets
        entry["n_scored"] = self.n_scored
        return entry


def _drift_block(alarms: list[int], drift_points: list[int], n_labelled: int) -> dict[str, Any]:
    block: dict[str, Any] = {"alarms": list(alarms), "n_alarms": len(alarms)}
    if drift_points:
        block["detection"] = asdict(score_detections(alarms, drift_points, n_labelled))
    return block
