"""When the in-process driver takes the columnar path, and its block loop.

:func:`supports` says whether an experiment's results can come from
:class:`~streameval.pipeline.columnar.experiment.ColumnarExperiment`: a classification
stream, learners that are all label-only (No-Change, whole-history Majority), and
nothing that needs a per-event state the arrays do not keep -- continuous
re-evaluation, drift detectors, periodic snapshots, output events, or a pending
buffer that could evict. Anything else runs on the per-event path, which is the
reference this one is tested against.

:func:`evaluate_columnar` is ``evaluate_config`` on this path; when the delay does not
read the features (a count or a fixed time) it reads only the labels and event times
(:func:`drive_labels`), else the replay schedule's events (:func:`drive_columnar`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

import numpy as np
from streameval.pipeline.columnar.experiment import ColumnarExperiment, label_only
from streameval.pipeline.columnar.schedule import LabelSchedule, applies
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import InputEvent
from streameval.pipeline.progress import Progress
from streameval.pipeline.streams.base import Dataset, RecordSource
from streameval.pipeline.streams.delay import DelayModel, parse_delay
from streameval.pipeline.streams.schedule import replay_schedule

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
    if config.protocol != "papers" or config.stop_at_labels is not None:
        return False
    cap = config.pending_cap
    if cap is not None and (n_instances is None or n_instances > cap):
        return False
    if learners is None:
        return bool(config.learners) and set(config.learners) <= LABEL_ONLY_SPECS
    return bool(learners) and all(label_only(m) is not None for m in learners.values())


def evaluate_columnar(
    config: ExperimentConfig,
    dataset: Dataset,
    total: int | None,
    progress: bool,
    *,
    allow_import: bool = False,
    block: int = BLOCK,
) -> dict[str, Any]:
    """``evaluate_config`` on the columnar path: from the labels and event times alone
    when the delay allows it (:mod:`~streameval.pipeline.columnar.schedule`), else from
    the replay schedule's events."""
    experiment = ColumnarExperiment(config, allow_import=allow_import)
    delay = parse_delay(config.delay, dataset)
    if applies(delay) and type(dataset.source).ident is RecordSource.ident:
        return drive_labels(experiment, dataset, delay, total, progress, block)
    events = replay_schedule(config.stream, dataset.iter_instances(config.limit), delay)
    return drive_columnar(experiment, events, total, progress, block)


def drive_labels(
    experiment: ColumnarExperiment,
    dataset: Dataset,
    delay: DelayModel,
    total: int | None,
    progress: bool,
    block: int = BLOCK,
) -> dict[str, Any]:
    """Read only the labels and event times of ``dataset`` (positional ids) and feed
    ``experiment`` blocks of ``block`` instances of their :class:`LabelSchedule`."""
    bar = Progress(total, "events", enabled=progress)
    start = time.perf_counter()
    source = dataset.source
    records = source.records()
    if experiment.config.limit is not None:
        records = islice(records, experiment.config.limit)
    label = source.label
    ts: list[float] = []
    y: list[Any] = []
    for t, record in records:
        ts.append(t)
        y.append(label(record))
    schedule = LabelSchedule.build(np.asarray(ts, dtype=float), delay)
    codes = experiment.code_labels(y, schedule.order)
    for part in schedule.blocks(max(1, block // 2)):  # two events per instance
        experiment.process_arrays(part, codes)
        bar.advance(len(part.seen) + len(part.labels))
    experiment.max_pending, experiment.last_ts = schedule.max_pending, schedule.last_ts
    experiment.end()
    bar.close()
    return _with_runtime(experiment, start, 2 * len(y) + 1)


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
    return _with_runtime(experiment, start, n_events)


def _with_runtime(experiment: ColumnarExperiment, start: float, n_events: int) -> dict[str, Any]:
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
