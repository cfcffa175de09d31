"""When the in-process driver takes the columnar path, and its block loop.

:func:`supports` says whether an experiment's results can come from
:class:`~streameval.pipeline.columnar.experiment.ColumnarExperiment`: a classification
stream, learners that are all label-only (No-Change, whole-history Majority), and
nothing that needs a per-event state the arrays do not keep -- continuous
re-evaluation, drift detectors, periodic snapshots, output events, or a pending
buffer that could evict. Anything else runs on the per-event path, which is the
reference this one is tested against.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

from streameval.pipeline.columnar.experiment import ColumnarExperiment, label_only
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import InputEvent
from streameval.pipeline.progress import Progress

#: Events per block: enough to amortise the array calls, small enough to stay in cache.
BLOCK = 8192
LABEL_ONLY_SPECS = {"nochange", "majority"}


def supports(
    config: ExperimentConfig,
    *,
    learners: Mapping[str, Any] | None = None,
    streaming_outputs: bool = False,
    n_instances: int | None = None,
) -> bool:
    """Whether the columnar path computes this experiment's results.

    ``learners`` are the model objects (``None``: ``config.learners`` are specs);
    ``streaming_outputs`` whether the caller wants output events; ``n_instances``
    the stream's length when known (the pending buffer must not be able to evict).

    >>> supports(ExperimentConfig("s", ["nochange", "majority"], window=100), n_instances=10)
    True
    >>> supports(ExperimentConfig("s", ["nochange", "nb"]), n_instances=10)
    False
    """
    if config.task != "classification" or config.reeval or config.detectors:
        return False
    if config.drift_reset or config.snapshot_every or streaming_outputs:
        return False
    cap = config.pending_cap
    if cap is not None and (n_instances is None or n_instances > cap):
        return False
    if learners is None:
        return bool(config.learners) and set(config.learners) <= LABEL_ONLY_SPECS
    return bool(learners) and all(label_only(m) is not None for m in learners.values())


def drive_columnar(
    experiment: ColumnarExperiment,
    events: Iterable[InputEvent],
    total: int | None,
    progress: bool,
    block: int = BLOCK,
) -> dict[str, Any]:
    """Feed ``events`` to ``experiment`` in blocks of ``block`` events; its results
    document with ``runtime`` added (as :func:`~streameval.pipeline.evaluate.drive`)."""
    bar = Progress(total, "events", enabled=progress)
    start = time.perf_counter()
    n_events = 0
    it = iter(events)
    while chunk := list(islice(it, block)):
        experiment.process_block(chunk)
        n_events += len(chunk)
        bar.advance(len(chunk))
    bar.close()
    results = experiment.results()  # the metrics are computed here: part of the time
    elapsed = time.perf_counter() - start
    results["runtime"] = {
        "driver": "evaluate",
        "path": "columnar",
        "seconds": round(elapsed, 3),
        "events": n_events,
        "events_per_s": round(n_events / elapsed, 1) if elapsed > 0 else None,
    }
    return results
