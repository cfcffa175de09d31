"""The in-process driver of the columnar core: when it applies, and its loops.

:func:`supports` says whether an experiment's results can come from
:class:`~streameval.pipeline.columnar.experiment.ColumnarExperiment`: a classification
stream without continuous re-evaluation under the ``papers`` protocol. Anything else
runs on the per-event path, the reference this one is tested against.

:func:`evaluate_columnar` is ``evaluate_config`` on this path, with one of two loops:

* :func:`drive_immediate`: test-then-train, each instance's features then its label;
* :func:`drive_steps`: the replay schedule as plain tuples
  (:func:`~streameval.pipeline.streams.schedule.schedule_steps`), each handed to the
  experiment's ``features`` or ``label``: the learners' calls and nothing more per
  event;
* :func:`drive_labels`: when every learner looks only at the labels (No-Change,
  whole-history Majority) and the delay does not read the features, the labels and
  event times alone (:class:`~streameval.pipeline.columnar.schedule.LabelSchedule`):
  the baselines' predictions come out as arrays and the scored labels go to the
  scoreboard a snapshot interval at a time.

:func:`drive_columnar` feeds a list of input events in blocks (the library's
iterables, the tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from typing import Any

import numpy as np
from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.columnar.callers import reference_of
from streameval.pipeline.columnar.experiment import ColumnarExperiment, unsupported
from streameval.pipeline.columnar.immediate import BLOCK as IMMEDIATE_BLOCK
from streameval.pipeline.columnar.labels import LabelBaselines
from streameval.pipeline.columnar.schedule import LabelSchedule, applies
from streameval.pipeline.columnar.segment import Segment
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import InputEvent, Output
from streameval.pipeline.labels_progress import LabelProgress
from streameval.pipeline.protocol import labels_first
from streameval.pipeline.streams.base import Dataset, Instance, RecordSource
from streameval.pipeline.streams.delay import DelayModel, InstanceDelay, parse_delay
from streameval.pipeline.streams.schedule import FEATURES, Step, decreasing, schedule_steps

#: Instances per block of the baselines' array predictions.
BLOCK = 8192
#: Events between two updates of the progress.
PROGRESS_EVERY = 1024
OnOutput = Callable[[Output], None] | None


def supports(
    config: ExperimentConfig,
    *,
    learners: Mapping[str, Any] | None = None,
    streaming_outputs: bool = False,
    n_instances: int | None = None,
) -> bool:
    """Whether the columnar path computes this experiment's results (any learners, any
    outputs; the keywords are those of the label-only arrays path, see
    :func:`label_schedule_applies`).

    >>> supports(ExperimentConfig("s", ["nochange", "nb"], window=100))
    True
    >>> supports(ExperimentConfig("s", ["nb"], reeval_k=10))
    False
    """
    return unsupported(config) is None


def label_schedule_applies(
    experiment: ColumnarExperiment, dataset: Dataset, delay: DelayModel, on_output: OnOutput
) -> bool:
    """Whether :func:`drive_labels` gives ``experiment``'s results: every learner a
    baseline of the labels, nothing asked per event (outputs, detectors, a stop), a
    delay that does not read the features, and no pending instance ever evicted."""
    config = experiment.config
    if on_output is not None or config.detectors or config.stop_at_labels is not None:
        return False
    if any(reference_of(slot.learner) is None for slot in experiment.slots):
        return False
    if not applies(delay) or type(dataset.source).ident is not RecordSource.ident:
        return False
    n = getattr(dataset, "n_instances", None)
    if config.limit is not None:
        n = config.limit if n is None else min(n, config.limit)
    return config.pending_cap is None or (n is not None and n <= config.pending_cap)


def evaluate_columnar(
    config: ExperimentConfig,
    dataset: Dataset,
    total: int | None,
    progress: bool,
    *,
    on_output: OnOutput = None,
    allow_import: bool = False,
) -> dict[str, Any]:
    """``evaluate_config`` on the columnar path (see the module docstring)."""
    experiment = ColumnarExperiment(
        config,
        emit_predictions=on_output is not None,
        allow_import=allow_import,
        complete=dataset.complete,
    )
    delay = parse_delay(config.delay, dataset)
    if label_schedule_applies(experiment, dataset, delay, on_output):
        return drive_labels(experiment, dataset, delay, total, progress)
    rows = dataset.iter_instances(config.limit)
    if delay == InstanceDelay(0) and on_output is None and config.stop_at_labels is None:
        return drive_immediate(experiment, rows, total, progress)
    steps = schedule_steps(rows, delay, labels_first=labels_first(config.protocol))
    return drive_steps(experiment, steps, total, progress, on_output)


def drive_steps(
    experiment: ColumnarExperiment,
    steps: Iterable[Step],
    total: int | None,
    progress: bool,
    on_output: OnOutput = None,
) -> dict[str, Any]:
    """Feed the schedule's steps to ``experiment``; its results with ``runtime`` added."""
    bar = LabelProgress(None if total is None else (total - 1) // 2, enabled=progress)
    start = time.perf_counter()
    features, label = experiment.features, experiment.label
    stop = experiment.config.stop_at_labels
    n_events, ts = 0, 0.0
    for step in steps:
        ts = step[2]
        n_events += 1
        if stop is not None and experiment.stopped:
            experiment.counters["after_stop"] += 1
            continue
        if step[0] == FEATURES:
            out = features(step[1].id, ts, step[1].x)
        else:
            out = label(step[1], ts, step[3])
        if out and on_output is not None:
            for o in out:
                on_output(o)
        if progress and not n_events % PROGRESS_EVERY:
            _follow(bar, experiment)
    for o in experiment.end(ts):
        if on_output is not None:
            on_output(o)
    _follow(bar, experiment)
    bar.close()
    return _with_runtime(experiment, start, n_events + 1)


def drive_immediate(
    experiment: ColumnarExperiment, instances: Iterable[Instance], total: int | None, progress: bool
) -> dict[str, Any]:
    """Test-then-train (delay 0): each instance's features, then its label, the schedule
    of :func:`~streameval.pipeline.streams.schedule.schedule_steps` under ``InstanceDelay(0)``
    without building its steps, a block at a time
    (:meth:`~streameval.pipeline.columnar.experiment.ColumnarExperiment.immediate`); the
    outputs are left out (the snapshots go to the curves)."""
    bar = LabelProgress(None if total is None else (total - 1) // 2, enabled=progress)
    start = time.perf_counter()
    n, last_ts = 0, None
    it = iter(instances)
    while True:
        block = InstanceBlock()  # columns: no object per instance for the collector
        ids, times, xs, ys = block.ids, block.ts, block.xs, block.ys
        for inst in it:  # a block in event-time order, cut short by a time that decreases
            uid, ts, x, y = inst
            if last_ts is not None and ts < last_ts:
                experiment.immediate(block)
                raise decreasing(inst, ts, last_ts)
            ids.append(uid)
            times.append(ts)
            xs.append(x)
            ys.append(y)
            last_ts = ts
            if len(ids) == IMMEDIATE_BLOCK:
                break
        if not block:
            break
        experiment.immediate(block)
        n += len(block)
        if progress:
            _follow(bar, experiment)
    experiment.end(0.0 if last_ts is None else last_ts)
    _follow(bar, experiment)
    bar.close()
    return _with_runtime(experiment, start, 2 * n + 1)


def drive_labels(
    experiment: ColumnarExperiment,
    dataset: Dataset,
    delay: DelayModel,
    total: int | None,
    progress: bool,
    block: int = BLOCK,
) -> dict[str, Any]:
    """Read only the labels and event times of ``dataset`` (positional ids) and score
    their :class:`LabelSchedule` a snapshot interval (or a block) of labels at a time."""
    bar = LabelProgress(None if total is None else (total - 1) // 2, enabled=progress)
    start = time.perf_counter()
    ts, y = _labels_and_times(dataset, experiment.config.limit)
    schedule = LabelSchedule.build(np.asarray(ts, dtype=float), delay)
    codes = experiment.code_labels(y, schedule.order)
    arrays = _baselines(experiment, schedule, codes, max(1, block))
    kinds = [reference_of(slot.learner) for slot in experiment.slots]
    every = experiment.config.snapshot_every
    n = len(y)
    for c0, c1 in _cuts(n, every or 0, block):
        at = schedule.order[c0:c1]
        experiment.score(_segment(arrays, kinds, at, codes[at], experiment.board.auc != {}))
        f, last_ts = schedule.at_label(c1)
        _advance(experiment, f, c1, last_ts)
        if every and c1 % every == 0:
            experiment.curves.extend(experiment.snapshots("periodic"))
        bar.update(c1, pending=f - c1)
    _advance(experiment, n, n, schedule.last_ts)
    experiment.max_pending = schedule.max_pending
    experiment.end(schedule.last_ts)
    bar.close()
    return _with_runtime(experiment, start, 2 * n + 1)


def _labels_and_times(dataset: Dataset, limit: int | None) -> tuple[list[float], list[Any]]:
    source = dataset.source
    records = source.records()
    if limit is not None:
        records = islice(records, limit)
    label = source.label
    ts: list[float] = []
    y: list[Any] = []
    for t, record in records:
        ts.append(t)
        y.append(label(record))
    return ts, y


def _baselines(
    experiment: ColumnarExperiment, schedule: LabelSchedule, codes: np.ndarray, block: int
) -> dict[str, np.ndarray]:
    """No-Change's and Majority's predictions and positive-class scores at every arrival."""
    n = len(schedule.seen)
    out = {
        "per": np.empty(n, dtype=np.int32),
        "maj": np.empty(n, dtype=np.int32),
        "per_score": np.empty(n),
        "maj_score": np.empty(n),
    }
    baselines = LabelBaselines()
    for part in schedule.blocks(block):
        p = baselines.predict(
            part.seen, codes[part.labels], experiment.codes, experiment.config.positive
        )
        stop = part.start + len(part.seen)
        out["per"][part.start : stop], out["maj"][part.start : stop] = p.per, p.maj
        out["per_score"][part.start : stop] = p.per_score
        out["maj_score"][part.start : stop] = p.maj_score
    return out


def _cuts(n: int, every: int, block: int) -> Iterable[tuple[int, int]]:
    """Label ranges ``[c0, c1)`` ending at every snapshot (every ``every`` labels) and at
    most ``block`` long."""
    c0 = 0
    while c0 < n:
        c1 = min(n, c0 + block)
        if every:
            c1 = min(c1, (c0 // every + 1) * every)
        yield c0, c1
        c0 = c1


def _segment(
    arrays: dict[str, np.ndarray], kinds: list[Any], at: np.ndarray, y: np.ndarray, auc: bool
) -> Segment:
    names = ["per", "maj"]
    pred = np.stack([arrays[names[k]][at] for k in kinds], axis=1)
    score = np.stack([arrays[f"{names[k]}_score"][at] for k in kinds], axis=1) if auc else None
    return Segment(y, at.astype(np.int64), arrays["per"][at], arrays["maj"][at], pred, score)


def _advance(experiment: ColumnarExperiment, n_features: int, n_labels: int, ts: float) -> None:
    """The experiment's counts as the per-event core would hold them right now."""
    experiment.n_instances, experiment.n_labelled = n_features, n_labels
    experiment.buffer.untracked = n_features - n_labels
    experiment.last_ts = ts


def drive_columnar(
    experiment: ColumnarExperiment,
    events: Iterable[InputEvent],
    total: int | None,
    progress: bool,
    block: int = BLOCK,
    on_output: OnOutput = None,
) -> dict[str, Any]:
    """Feed ``events`` to ``experiment`` in blocks of ``block`` events; its results
    document with ``runtime`` added (as :func:`~streameval.pipeline.evaluate.drive`)."""
    bar = LabelProgress(None if total is None else (total - 1) // 2, enabled=progress)
    start = time.perf_counter()
    n_events = 0
    it = iter(events)
    while chunk := list(islice(it, block)):
        out = experiment.process_block(chunk)
        if on_output is not None:
            for o in out:
                on_output(o)
        n_events += len(chunk)
        _follow(bar, experiment)
    bar.close()
    return _with_runtime(experiment, start, n_events)


def _follow(bar: LabelProgress, experiment: ColumnarExperiment) -> None:
    bar.update(experiment.n_labelled, pending=len(experiment.buffer))


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
