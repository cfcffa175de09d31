"""The in-process driver: a dataset's replay schedule straight into an :class:`Experiment`.

This is the reference the Kafka pipeline must reproduce number for number.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import InputEvent
from streameval.pipeline.experiment import Experiment, Output
from streameval.pipeline.progress import Progress
from streameval.pipeline.streams.datasets import Dataset, load
from streameval.pipeline.streams.delay import parse_delay
from streameval.pipeline.streams.schedule import replay_schedule


def prepare(
    config: ExperimentConfig, data_dir: str | Path | None = None
) -> tuple[Dataset, ExperimentConfig]:
    """Load ``config.dataset`` and fill what the dataset knows (positive class, drift points).

    The returned config is the one both drivers use, so that they agree.
    """
    if not config.dataset:
        raise ValueError("the experiment names no dataset")
    dataset = load(config.dataset, data_dir=data_dir)
    if dataset.task != config.task:
        config = ExperimentConfig.from_dict({**config.to_dict(), "task": dataset.task})
    changes: dict[str, Any] = {}
    if config.positive is None and getattr(dataset, "positive", None) is not None:
        changes["positive"] = dataset.positive
    if config.features is None and getattr(dataset, "features", None):
        changes["features"] = list(dataset.features)
    drift_points = list(getattr(dataset, "drift_points", None) or [])
    if not config.drift_points and drift_points:
        changes["drift_points"] = drift_points
    if changes:
        config = ExperimentConfig.from_dict({**config.to_dict(), **changes})
    return dataset, config


def schedule(config: ExperimentConfig, dataset: Dataset) -> Iterator[InputEvent]:
    """The ordered feature/label events of the configured replay."""
    delay = parse_delay(config.delay, dataset)
    return replay_schedule(config.stream, dataset.iter_instances(config.limit), delay)


def expected_events(config: ExperimentConfig, dataset: Dataset) -> int | None:
    """How many events the schedule holds (2 per instance + the end marker), if known."""
    n = getattr(dataset, "n_instances", None)
    if config.limit is not None:
        n = config.limit if n is None else min(n, config.limit)
    return None if n is None else 2 * n + 1


def evaluate(
    config: ExperimentConfig,
    *,
    data_dir: str | Path | None = None,
    progress: bool = False,
    on_output: Callable[[Output], None] | None = None,
    allow_import: bool = False,
) -> dict[str, Any]:
    """Run ``config`` in-process and return its results document.

    ``on_output`` receives every output event (predictions only if the
    callback is given). ``runtime`` (wall time, rate) is added to the document
    under its own key; it is the only part that differs between two runs.
    """
    dataset, config = prepare(config, data_dir)
    experiment = Experiment(
        config, emit_predictions=on_output is not None, allow_import=allow_import
    )
    bar = Progress(expected_events(config, dataset), "events", enabled=progress)
    start = time.perf_counter()
    n_events = 0
    for event in schedule(config, dataset):
        outputs = experiment.process(event)
        if on_output is not None:
            for out in outputs:
                on_output(out)
        n_events += 1
        bar.advance()
    bar.close()
    elapsed = time.perf_counter() - start
    results = experiment.results()
    results["runtime"] = {
        "driver": "evaluate",
        "seconds": round(elapsed, 3),
        "events": n_events,
        "events_per_s": round(n_events / elapsed, 1) if elapsed > 0 else None,
    }
    return results
