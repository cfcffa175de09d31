"""What an experiment is: one stream, several learners, how to score them.

An :class:`ExperimentConfig` is all that is needed to rebuild an experiment:
``streameval evaluate`` builds it from command-line options, the Kafka
pipeline ships it as a message on the ``experiments`` topic. Both drivers then
feed the same :class:`~streameval.pipeline.experiment.Experiment`, so equal configs and
equal event sequences give equal results, number for number.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from streameval.pipeline.metrics.forgetting import Forgetting

Task = Literal["classification", "regression"]

#: Bounds on the sizes an experiment may ask for. Experiments also arrive as Kafka
#: messages; these structures are allocated up front, so one oversized message must be
#: refused (dead-lettered), not crash or swamp the worker that reads it.
LIMITS = {
    "window": 1_000_000,
    "auc_window": 1_000_000,
    "bins": 1_000,
    "max_lag": 1_000,
    "pending_cap": 10_000_000,
    "learners": 32,
    "detectors": 16,
    "classes": 100_000,
}
#: Periodic snapshots of a stream of known length when none is asked for (1 % apart).
AUTO_SNAPSHOTS = 100
#: Labels between periodic snapshots of a stream of unknown length when none is asked for.
AUTO_SNAPSHOT_EVERY = 1000


def auto_snapshot_every(n_instances: int | None) -> int:
    """Labels between two periodic snapshots when the experiment does not say.

    A stream of known length gets :data:`AUTO_SNAPSHOTS` of them (every 1 %, at least
    every label); one of unknown length one every :data:`AUTO_SNAPSHOT_EVERY` labels.
    Either way a curve over time has many points, not just the final one.

    >>> auto_snapshot_every(45_312), auto_snapshot_every(50), auto_snapshot_every(None)
    (453, 1, 1000)
    """
    if not n_instances:
        return AUTO_SNAPSHOT_EVERY
    return max(1, n_instances // AUTO_SNAPSHOTS)


@dataclass
class ExperimentConfig:
    """One stream evaluated with several learners.

    Parameters
    ----------
    stream
        Stream id (the dataset spec for replays).
    learners
        Learner specs (``nochange``, ``ta:ht``, ...); see :mod:`streameval.pipeline.learners`.
    task
        ``classification`` or ``regression``.
    window, fading
        Extra prequential estimators besides the whole history: a sliding window
        of ``window`` labels and/or a fading factor ``fading``
        (``prequential-error-fading-factors.txt``, Alg. 2 and 3).
    reeval_k, bins
        Continuous re-evaluation: re-predict every pending instance every
        ``reeval_k`` labels and report ``bins`` + 2 bins
        (``delayed-labelling-continuous-reevaluation.txt``, Alg. 1). ``None``
        switches re-evaluation off.
    weights
        Weight preset (``first-time``, ``test-then-train``, ``uniform``,
        ``exponential``) or an explicit comma-separated vector for the summary
        ``Psi_W`` (sect. 7.3).
    detectors, drift_reset
        Drift detector specs attached to every learner's error stream; with
        ``drift_reset`` a learner is rebuilt from its spec on each alarm.
    positive, auc_window
        Positive class of a binary stream for the prequential AUC and its
        sliding window (``prequential-auc.txt``).
    pending_cap
        Most instances kept waiting for their labels; beyond it the oldest is
        evicted and counted, never silently kept.
    snapshot_every
        Emit a metric snapshot every this many labels (0: only at the end).
        ``None`` leaves the choice to :func:`~streameval.pipeline.evaluate.prepare`,
        which sets :func:`auto_snapshot_every` of the stream's known length, so that
        curves over time exist without asking; a config that skips ``prepare``
        keeps ``None``, which snapshots only at the end.
    max_lag
        Longest label history kept for the temporal-dependence diagnostics.
    drift_points
        Known drift positions (instance indices) of a synthetic stream, to
        score detection delay, false alarms and misses.
    dataset, delay, limit
        Where the events come from (a dataset spec, a delay spec, at most
        ``limit`` instances): descriptive for the core, used by the drivers
        and the replay producer.
    features
        The stream's feature names; the Kafka pipeline rejects feature vectors
        with other names (``streameval.pipeline.ingest``).
    protocol, classes
        ``papers`` (default) or ``moa``: the details the papers leave open, decided
        as documented or as the authors' MOA code does (:mod:`streameval.pipeline.protocol`);
        ``moa`` needs the class order ``classes`` (class index 0 first; a dataset gives
        its own). ``classes`` known, the positive class is one of them, and a stream
        whose labels never bring it (a short prefix) is not refused for that.
    stop_at_labels
        End the experiment once this many labels are scored; the stream runs on until
        then, so the instances scored keep their full waits.

    >>> ExperimentConfig("s", ["nb"], positive="c", classes=["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: positive class 'c' is not one of the classes: a, b
    """

    stream: str
    learners: list[str]
    task: Task = "classification"
    window: int | None = None
    fading: float | None = None
    reeval_k: int | None = None
    bins: int = 0
    weights: str = "uniform"
    detectors: list[str] = field(default_factory=list)
    drift_reset: bool = False
    positive: str | None = None
    auc_window: int = 1000
    pending_cap: int | None = 1_000_000
    snapshot_every: int | None = None
    max_lag: int = 5
    seed: int = 0
    drift_points: list[int] = field(default_factory=list)
    dataset: str | None = None
    delay: str = "0"
    limit: int | None = None
    features: list[str] | None = None
    protocol: str = "papers"
    classes: list[str] | None = None
    stop_at_labels: int | None = None

    def __post_init__(self) -> None:
        if not self.learners:
            raise ValueError("an experiment needs at least one learner")
        if len(set(self.learners)) != len(self.learners):
            raise ValueError(f"learner specs must be distinct, got {self.learners}")
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be classification or regression, got {self.task!r}")
        if self.window is not None and self.window < 1:
            raise ValueError(f"--window must be >= 1, got {self.window}")
        if self.fading is not None and not 0.0 < self.fading <= 1.0:
            raise ValueError(f"--fading must be in (0, 1], got {self.fading}")
        if self.reeval_k is not None and self.reeval_k < 1:
            raise ValueError(f"--reeval-k must be >= 1, got {self.reeval_k}")
        if self.bins < 0:
            raise ValueError(f"--bins must be >= 0, got {self.bins}")
        if self.pending_cap is not None and self.pending_cap < 1:
            raise ValueError(f"pending cap must be >= 1, got {self.pending_cap}")
        if self.auc_window < 1:
            raise ValueError(f"AUC window must be >= 1, got {self.auc_window}")
        if self.protocol not in ("papers", "moa"):
            raise ValueError(f"protocol must be papers or moa, got {self.protocol!r}")
        if self.stop_at_labels is not None and self.stop_at_labels < 1:
            raise ValueError(f"--stop-at-labels must be >= 1, got {self.stop_at_labels}")
        if self.positive is not None and self.classes and str(self.positive) not in self.classes:
            raise ValueError(
                f"positive class {self.positive!r} is not one of the classes: "
                f"{', '.join(self.classes)}"
            )
        if self.max_lag < 0:
            raise ValueError(f"max_lag must be >= 0, got {self.max_lag}")
        for name in ("limit", "snapshot_every", "seed"):
            value = getattr(self, name)
            if value is not None and not (_is_int(value) and (value >= 0 or name == "seed")):
                bound = "" if name == "seed" else " >= 0"
                raise ValueError(f"{name} must be an integer{bound}, got {value!r}")
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            size = len(value) if isinstance(value, list) else value
            if size is not None and size > limit:
                raise ValueError(f"{name} = {size:,} exceeds the limit of {limit:,}")

    @property
    def reeval(self) -> bool:
        return self.reeval_k is not None

    def estimators(self) -> dict[str, Forgetting]:
        """The prequential estimators every metric is computed with, by name."""
        out = {"whole": Forgetting.whole()}
        if self.window is not None:
            out["window"] = Forgetting.sliding(self.window)
        if self.fading is not None:
            out["fading"] = Forgetting.fading(self.fading)
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperimentConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown experiment fields: {sorted(unknown)}")
        return cls(**d)


def _is_int(value: Any) -> bool:
    """An integer, numpy's included; not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
