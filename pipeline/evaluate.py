"""The in-process driver: a stream's replay schedule straight into an :class:`Experiment`.

:func:`evaluate` is the library's entry point (``streameval.evaluate``): any iterable of
``(x, y)`` or ``(x, y, ts)``, or a built-in dataset, and any River models.
:func:`evaluate_config` runs an :class:`ExperimentConfig` of spec strings, as the command
line does. Both are the reference the Kafka pipeline must reproduce number for number.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from streameval.pipeline import columnar, split
from streameval.pipeline.config import ExperimentConfig, Task, auto_snapshot_every
from streameval.pipeline.events import InputEvent, Output
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.labels_progress import LabelProgress
from streameval.pipeline.protocol import labels_first
from streameval.pipeline.results import Results
from streameval.pipeline.streams.datasets import Dataset, load
from streameval.pipeline.streams.delay import CallableDelay, DelayModel, parse_delay
from streameval.pipeline.streams.iterable import instances
from streameval.pipeline.streams.schedule import replay_schedule, schedule_steps


def prepare(
    config: ExperimentConfig,
    data_dir: str | Path | None = None,
    *,
    dataset: Dataset | None = None,
) -> tuple[Dataset, ExperimentConfig]:
    """Load ``config.dataset`` (unless ``dataset`` is given) and fill what the dataset
    knows (positive class, drift points, the snapshot interval left to choose).

    The returned config is the one both drivers use, so that they agree.
    """
    if dataset is None:
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
    if config.task == "classification" and config.classes is None and dataset.classes:
        # known ahead: MOA's class indices, and what a positive class is checked against
        # by a worker that sees only the labels of a prefix
        changes["classes"] = [str(c) for c in dataset.classes]
    drift_points = list(getattr(dataset, "drift_points", None) or [])
    if not config.drift_points and drift_points:
        changes["drift_points"] = drift_points
    if config.snapshot_every is None:
        changes["snapshot_every"] = auto_snapshot_every(_known_length(config, dataset))
    _check_positive(config, dataset)  # named by the dataset, before the config says it
    if changes:
        config = ExperimentConfig.from_dict({**config.to_dict(), **changes})
    return dataset, config


def _check_positive(config: ExperimentConfig, dataset: Dataset) -> None:
    """Refuse a positive class the dataset does not have (its AUC would be meaningless)."""
    classes = [str(c) for c in getattr(dataset, "classes", None) or []]
    if config.task != "classification" or config.positive is None or not classes:
        return
    if str(config.positive) not in classes:
        raise ValueError(
            f"positive class {config.positive!r} is not one of the classes of "
            f"{config.dataset}: {', '.join(classes)}"
        )


def _known_length(config: ExperimentConfig, dataset: Dataset) -> int | None:
    """Instances the replay will hold, when the dataset or the limit says."""
    n = getattr(dataset, "n_instances", None)
    if config.limit is not None:
        return config.limit if n is None else min(n, config.limit)
    return n


def schedule(config: ExperimentConfig, dataset: Dataset) -> Iterator[InputEvent]:
    """The ordered feature/label events of the configured replay (the protocol's order
    at equal event times)."""
    delay = parse_delay(config.delay, dataset)
    rows = dataset.iter_instances(config.limit)
    return replay_schedule(config.stream, rows, delay, labels_first=labels_first(config.protocol))


def expected_events(config: ExperimentConfig, dataset: Dataset) -> int | None:
    """How many events the schedule holds (2 per instance + the end marker), if known."""
    n = _known_length(config, dataset)
    return None if n is None else 2 * n + 1


def evaluate_config(
    config: ExperimentConfig,
    *,
    data_dir: str | Path | None = None,
    progress: bool = False,
    on_output: Callable[[Output], None] | None = None,
    allow_import: bool = False,
    jobs: int | None = None,
) -> dict[str, Any]:
    """Run ``config`` (a dataset spec and learner specs) in-process; its results document.

    ``on_output`` receives every output event (predictions only if the
    callback is given). ``runtime`` (wall time, rate) is added to the document
    under its own key; it is the only part that differs between two runs.
    ``jobs=2`` runs a re-evaluation on two processes (:mod:`streameval.pipeline.split`:
    the same results), ``1`` on one; ``None`` splits when the machine has two CPUs
    and the run can.
    """
    dataset, config = prepare(config, data_dir)
    total = expected_events(config, dataset)
    splits = _splits(config, jobs)
    if not splits and columnar.supports(config):
        return columnar.evaluate_columnar(
            config, dataset, total, progress, on_output=on_output, allow_import=allow_import
        )
    emit = on_output is not None
    if not splits:
        experiment = Experiment(config, emit_predictions=emit, allow_import=allow_import)
        return drive(experiment, schedule(config, dataset), total, progress, on_output)
    with split.helper_process(
        config, dataset, emit_predictions=emit, allow_import=allow_import
    ) as answers:
        experiment = Experiment(config, emit_predictions=emit, allow_import=allow_import)
        split.offload(experiment, answers)
        results = drive(experiment, schedule(config, dataset), total, progress, on_output)
        helper = answers.close()
    results["runtime"]["processes"] = 2
    results["runtime"]["helper"] = helper
    return results


def _splits(config: ExperimentConfig, jobs: int | None) -> bool:
    """Whether to run ``config`` on two processes (``jobs`` as :func:`evaluate_config`)."""
    if jobs not in (None, 1, 2):
        raise ValueError(f"jobs must be 1 or 2 (or None: as the machine allows), not {jobs!r}")
    if jobs == 1 or (jobs is None and split.cores() < 2):
        return False
    why = split.why_not_split(config)
    if why is not None and jobs == 2:
        raise ValueError(f"jobs=2: {why}")
    return why is None


#: Events between two updates of the progress (each reads the experiment's counts).
PROGRESS_EVERY = 256


def _follow(bar: LabelProgress, experiment: Experiment) -> None:
    bar.update(
        experiment.n_labelled,
        pending=len(experiment.buffer),
        repredictions=experiment.n_repredictions,
    )


def drive(
    experiment: Experiment,
    events: Iterable[InputEvent],
    total: int | None,
    progress: bool,
    on_output: Callable[[Output], None] | None,
) -> dict[str, Any]:
    """Feed ``events`` to ``experiment``; its results document with ``runtime`` added.

    The progress counts labels evaluated (and pending, and re-predictions when
    re-evaluating), of the ``(total - 1) // 2`` the schedule holds.
    """
    labels = None if total is None else (total - 1) // 2  # 2 events per instance + the end
    bar = LabelProgress(labels, enabled=progress)
    start = time.perf_counter()
    n_events = 0
    for event in events:
        outputs = experiment.process(event)
        if on_output is not None:
            for out in outputs:
                on_output(out)
        n_events += 1
        if progress and not n_events % PROGRESS_EVERY:
            _follow(bar, experiment)
    _follow(bar, experiment)
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


Delay = int | str | Callable[..., float]


def evaluate(
    stream: Iterable[Any] | str | Dataset,
    models: Mapping[str, Any] | Any,
    *,
    delay: Delay = 0,
    window: int | None = None,
    fading: float | None = None,
    reeval_k: int | None = None,
    bins: int | None = None,
    weights: str = "uniform",
    detectors: Sequence[Any] = (),
    drift_reset: bool = False,
    positive: Any = None,
    task: Task | None = None,
    limit: int | None = None,
    snapshot_every: int = 0,
    auc_window: int = 1000,
    pending_cap: int | None = 1_000_000,
    max_lag: int = 5,
    seed: int = 0,
    protocol: str = "papers",
    classes: Sequence[str] | None = None,
    stop_at_labels: int | None = None,
    stream_id: str | None = None,
    data_dir: str | Path | None = None,
    progress: bool = False,
    on_output: Callable[[Output], None] | None = None,
) -> Results:
    """Evaluate ``models`` on ``stream`` prequentially, beside No-Change and Majority.

    ``stream`` is any iterable of ``(x, y)`` or ``(x, y, ts)`` (River's dataset
    convention; ``ts`` in seconds or a ``datetime``, else the position), a
    :class:`Dataset` or a built-in dataset spec (``"electricity"``,
    ``"sea[n=20000]"``). ``models`` maps names to River classifiers or regressors
    or streameval learners; a bare model (or a list of them) is named by its class.

    Labels arrive ``delay`` later: ``N`` instances, ``"time:S"`` seconds of event
    time, ``"natural"`` (a built-in dataset's own), or a function ``(x, y, ts)``
    (or ``(x, y)``) giving each label's delay in the stream's time unit. Every
    metric is estimated over the whole stream, and also over a sliding ``window``
    and with a ``fading`` factor when given (``prequential-error-fading-factors.txt``
    Alg. 2, 3). With ``reeval_k`` the pending instances are re-predicted every K
    labels and scored in ``bins`` (default 50) bins of their waiting time
    (``delayed-labelling-continuous-reevaluation.txt`` Alg. 1). ``detectors`` are
    drift detector specs or objects (``"ph"``, ``"adwin"``, a
    :class:`~streameval.pipeline.drift.page_hinkley.PrequentialPageHinkley`) on
    every learner's loss; ``drift_reset`` restarts a learner (an untrained clone) on
    each alarm. The prequential AUC needs the ``positive`` class of a binary stream
    (a built-in dataset knows its own). ``protocol="moa"`` follows the authors' MOA code
    where the papers leave details open (:mod:`streameval.pipeline.protocol`; ``classes``
    is the class order, a built-in dataset gives its own); ``stop_at_labels`` ends the
    experiment once that many labels are scored.

    On alternating labels No-Change is always wrong, so Kappa-Temporal equals accuracy:

    >>> from river import naive_bayes
    >>> stream = [({"x": i % 2 + (i % 7) / 10}, "ab"[i % 2]) for i in range(100)]
    >>> results = evaluate(stream, {"nb": naive_bayes.GaussianNB()})
    >>> results.metric("accuracy")["nb"], results.metric("kappa_per")["nb"]
    (0.97, 0.97)
    """
    models = _named(models)
    if isinstance(stream, os.PathLike):
        raise TypeError(
            f"stream {os.fspath(stream)!r} is a path: name the file with its format, "
            f"'csv:{os.fspath(stream)}' or 'arff:{os.fspath(stream)}' (see "
            "streameval.pipeline.streams.files), or pass its rows as (x, y[, ts]) pairs"
        )
    dataset = stream if isinstance(stream, Dataset) else None
    if isinstance(stream, str):
        dataset = load(stream, data_dir=data_dir)
    task = task or (dataset.task if dataset is not None else _task_of(models))
    if reeval_k is None and bins:
        raise ValueError("bins need reeval_k (the re-evaluation period)")
    delay_model = _delay_model(delay, dataset)
    name = stream_id or (dataset.spec if dataset is not None else "stream")
    config = ExperimentConfig(
        stream=name,
        learners=list(models),
        task=task,
        window=window,
        fading=fading,
        reeval_k=reeval_k,
        bins=(50 if bins is None else bins) if reeval_k is not None else 0,
        weights=weights,
        detectors=[
            _detector_spec(d) for d in ([detectors] if isinstance(detectors, str) else detectors)
        ],
        drift_reset=drift_reset,
        positive=None if positive is None else str(positive),
        auc_window=auc_window,
        pending_cap=pending_cap,
        snapshot_every=snapshot_every,
        max_lag=max_lag,
        seed=seed,
        dataset=dataset.spec if dataset is not None else None,
        delay=str(delay_model),
        limit=limit,
        protocol=protocol,
        classes=None if classes is None else [str(c) for c in classes],
        stop_at_labels=stop_at_labels,
    )
    if dataset is not None:
        dataset, config = prepare(config, data_dir, dataset=dataset)
        rows = dataset.iter_instances(limit)
        total = expected_events(config, dataset)
    else:
        rows = instances(stream, limit, task=task)
        total = _expected(stream, limit)
    first = labels_first(config.protocol)
    if columnar.supports(config):
        exp = columnar.ColumnarExperiment(
            config,
            learners=models,
            emit_predictions=on_output is not None,
            complete=dataset is not None and dataset.complete,
        )
        steps = schedule_steps(rows, delay_model, labels_first=first)
        return Results(columnar.drive_steps(exp, steps, total, progress, on_output))
    events = replay_schedule(config.stream, rows, delay_model, labels_first=first)
    experiment = Experiment(config, learners=models, emit_predictions=on_output is not None)
    return Results(drive(experiment, events, total, progress, on_output))


def _named(models: Mapping[str, Any] | Any) -> dict[str, Any]:
    """``{name: model}``; bare models are named by their class."""
    if isinstance(models, Mapping):
        named = dict(models)
    else:
        items = list(models) if isinstance(models, (list, tuple)) else [models]
        named = {}
        for model in items:
            name = (model if isinstance(model, type) else type(model)).__name__
            if name in named:
                raise ValueError(f"two models named {name!r}: pass a dict of names to models")
            named[name] = model
    if not named:
        raise ValueError("no model to evaluate")
    for name, model in named.items():
        if isinstance(model, str):
            raise TypeError(
                f"model {name!r} is the string {model!r}: pass a model object "
                "(spec strings are for the command line)"
            )
        if isinstance(model, type):
            raise TypeError(
                f"model {name!r} is the class {model.__name__}: pass an instance, "
                f"e.g. {model.__name__}()"
            )
        if not hasattr(model, "learn_one"):
            raise TypeError(
                f"model {name!r} is {model!r:.40}, not a model: a model has learn_one, "
                "and predict_proba_one (a classifier) or predict_one (a regressor)"
            )
    return named


def _task_of(models: Mapping[str, Any]) -> Task:
    """Classification when every model predicts probabilities, regression when none does."""
    kinds = {name: _is_classifier(model) for name, model in models.items()}
    if all(kinds.values()):
        return "classification"
    if not any(kinds.values()):
        return "regression"
    raise ValueError(f"mixed classifiers and regressors: {kinds}; evaluate them apart")


def _is_classifier(model: Any) -> bool:
    """River's own test (a pipeline answers for its last step), else the protocol."""
    from river import base

    if isinstance(model, base.Classifier):
        return True
    if isinstance(model, base.Regressor):
        return False
    return hasattr(model, "predict_proba_one")


def _delay_model(delay: Delay, dataset: Dataset | None) -> DelayModel:
    if callable(delay):
        return CallableDelay(delay)
    if isinstance(delay, bool) or not isinstance(delay, (int, str)):
        raise TypeError(f"delay must be an int, a spec string or a function, got {delay!r}")
    return parse_delay(delay, dataset)


def _detector_spec(detector: Any) -> str:
    """A detector's spec: the string itself, or the ``name`` of a streameval detector."""
    if isinstance(detector, str):
        return detector
    name = getattr(detector, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(
        f"detector {detector!r} is not a spec string nor a streameval detector "
        "(river's ADWIN and DDM are 'adwin[delta=...]' and 'ddm')"
    )


def _n(total: int | None) -> int | None:
    """Instances of a schedule of ``total`` events (2 per instance + the end marker)."""
    return None if total is None else (total - 1) // 2


def _expected(stream: Any, limit: int | None) -> int | None:
    """Events of the schedule (2 per instance + the end marker) when the length is known."""
    try:
        n = len(stream)
    except TypeError:
        return None if limit is None else 2 * limit + 1
    return 2 * (n if limit is None else min(n, limit)) + 1
