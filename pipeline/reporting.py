"""What an experiment reports: metric snapshots of its learners and its results document.

A snapshot is the compact view of one learner the ``metrics`` topic carries,
periodic or final; the results document is the one ``DESIGN.md`` describes
(*Results JSON*), with the cost of continuous re-evaluation under ``overhead``.
Both read an :class:`~streameval.pipeline.experiment.Experiment` and change
nothing in it, so they can be taken at any point of the stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streameval.pipeline.events import MetricSnapshot, clean
from streameval.pipeline.reeval.summary import weights_preset

if TYPE_CHECKING:
    from streameval.pipeline.experiment import Experiment


def snapshots(exp: Experiment, kind: str = "periodic") -> list[MetricSnapshot]:
    """A compact snapshot of every learner of ``exp``."""
    out = []
    for slot in exp.slots:
        flat = slot.card.flat()
        flat["pending"] = len(exp.buffer)
        flat["n_repredictions"] = exp.n_repredictions
        binned = slot.card.binned_block()
        out.append(
            MetricSnapshot(
                exp.config.stream,
                slot.name,
                exp.n_labelled,
                exp.last_ts,
                kind,
                clean(flat),
                clean(binned) if binned else None,
            )
        )
    return out


def results(exp: Experiment) -> dict[str, Any]:
    """The results document of ``exp``, NaN as ``null``."""
    config = exp.config
    weights = weights_preset(config.weights, config.bins + 2) if config.reeval else None
    learners = {
        slot.name: slot.card.entry(weights, config.drift_points, exp.n_labelled)
        for slot in exp.slots
    }
    doc = {
        "stream": config.stream,
        "task": config.task,
        "n_instances": exp.n_instances,
        "n_labelled": exp.n_labelled,
        "classes": list(exp.classes),
        "config": config.to_dict(),
        "learners": learners,
        "comparisons": exp.pairs.get(),
        "overhead": overhead(exp),
        "counters": dict(exp.counters),
    }
    if exp.diagnostics is not None:
        doc["diagnostics"] = exp.diagnostics.get()
    if config.snapshot_every:
        doc["curves"] = exp.curves.block()
    return clean(doc)


def overhead(exp: Experiment) -> dict[str, Any]:
    """The cost of continuous re-evaluation and the pending buffer's high-water marks."""
    buffer = exp.buffer
    n_labelled = exp.n_labelled
    return {
        "n_repredictions": buffer.n_repredictions_total,
        "n_predictions_made": exp.n_repredictions,
        "N_R": buffer.n_repredictions_total / n_labelled if n_labelled else 0.0,
        "pending": len(buffer),
        "max_pending": exp.max_pending,
        "predictions_held": buffer.n_predictions_held,
        "max_predictions_held": exp.max_held,
        "evicted": buffer.n_evicted,
        "labels_of_evicted": buffer.n_evicted_labels,
    }
