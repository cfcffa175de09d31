"""What an experiment will cost, estimated from its configuration alone.

:func:`estimate` reads an :class:`~streameval.pipeline.config.ExperimentConfig` (its
learners, ensemble sizes, windows, bins, detectors, pairs of learners) and returns a
:class:`Cost`: the memory the experiment's state reaches once every window is full, and
the work one labelled instance costs. It allocates nothing and builds no learner, so it
answers in microseconds for any message: a Kafka worker asks it before defining a stream
and refuses (to the deadletter) an experiment over its budget
(:mod:`streameval.agents.admission`), instead of finding out by running out of memory.
Each parameter has its own limit (:data:`~streameval.pipeline.config.LIMITS`), but the
cost is their product: 32 learners with a window of a million labels and 1000 bins are
each within limits and together need terabytes.

Memory terms, each sized by the structure it counts (CPython, 64-bit; the per-slot
sizes were measured with ``tracemalloc`` on full windows, ``tests/test_admission.py`` checks
the estimate bounds real experiments):

* ``stream``: the experiment, its runner, merger, guard and the two reference learners;
* ``learners``: each learner spec's model (:func:`learner_cost`); an ensemble counts
  ``n_models`` trees, a ``knn`` its window of stored instances, a wrapper its own state;
* ``metrics``: per learner and estimator, a confusion matrix, plus one window slot per
  label of ``window`` (a 4-tuple, :data:`SLOT_METRIC` bytes);
* ``binned``: per learner and estimator, ``B + 2`` bins of counts, plus per window slot
  the encoded bins of one label (``27 (B + 2) + 520`` bytes: label codes and agreement
  flags as numpy arrays);
* ``auc``: per learner, a sliding window of scores and the whole history's sorted scores;
* ``detectors``: per learner and detector, its windows (``ph[estimator=window,w=...]``,
  ``ratio_window[w1=...,w2=...]``);
* ``pairs``: per pair of learners and estimator, the Q and McNemar statistics and their
  windows (``n (n - 1) / 2`` pairs);
* ``pending``: the instances waiting for their labels, each with its features and one
  prediction history per learner and reference.

Two things grow with the data, not the configuration, and are counted at a planned
size: the pending buffer at ``min(pending_cap, PLANNED_PENDING)`` instances (it follows
the label delay of the stream, bounded by ``pending_cap``) and the whole-history AUC at
``min(limit, PLANNED_LABELS)`` scores; a tree at the size it reaches on a few tens of
thousands of instances (river bounds it by its own ``max_size``).

Work is counted in elementary updates per labelled instance: a metric, bin, pair or
detector update, a model's predict-and-learn (an ensemble's ``n_models``, a ``knn``'s
window of distances), and the re-predictions of continuous re-evaluation.

>>> from streameval.pipeline.config import ExperimentConfig
>>> small = estimate(ExperimentConfig("s", ["nochange", "ht"], window=1000))
>>> small.memory_bytes < 64 * MiB, small.work_per_event < 100
(True, True)
>>> bomb = estimate(ExperimentConfig("s", [f"majority[window={i}]" for i in range(1, 33)],
...                                  window=1_000_000, reeval_k=1, bins=1000))
>>> bomb.describe()
'898.4 GiB (binned 821.8 GiB, pairs 73.9 GiB, metrics 2.6 GiB)'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.spec import Component, SpecError, parse_component, split_wrappers

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: Per stream: the experiment, runner, merger, guard, diagnostics and reference learners.
STREAM_BASE = 1 * MiB
#: One slot of a classification metric's window: a 4-tuple and its deque pointer.
SLOT_METRIC = 88
#: One slot of a regression metric's window: a 2-tuple of two fresh floats.
SLOT_REGRESSION = 128
#: One slot of a pair's window (Q statistic or McNemar): a 2-tuple.
SLOT_PAIR = 80
#: One slot of a scalar mean's window (a drift detector's estimator).
SLOT_MEAN = 72
#: One score in an AUC window or sorted history (a float, its tuple, two list slots).
SLOT_AUC = 104
#: A confusion matrix, a pair statistic, a detector: the state besides their windows.
SMALL_STATE = 4 * KiB
#: A pending instance besides its features and histories: record, id, dicts, row.
PENDING_INSTANCE = 768
#: One prediction history of a pending instance (two one-entry lists and their object).
PENDING_HISTORY = 232
#: One more entry of a history that keeps every prediction (two list slots).
HISTORY_ENTRY = 16
#: Labels an instance is assumed to wait when the delay is not a count of instances.
PLANNED_WAIT = 1_000
#: One feature of a pending instance (dict entry, float, matrix cell).
PENDING_FEATURE = 112
#: Features assumed when the experiment does not name them.
ASSUMED_FEATURES = 16
#: Pending instances counted when ``pending_cap`` is larger (see the module docstring).
PLANNED_PENDING = 10_000
#: Labels counted for the whole-history AUC when ``limit`` is larger or unset.
PLANNED_LABELS = 100_000


@dataclass(frozen=True)
class ModelCost:
    """A model's memory (``bytes`` plus ``per_unit`` times its size parameter) and work."""

    bytes: int
    work: int = 1
    size_param: str | None = None  # the parameter that multiplies the cost
    size_default: int = 0
    per_unit: int = 0  # bytes per unit of size_param
    work_per_unit: int = 0


_TREE = ModelCost(2 * MiB, work=4)
#: Models by name. Trees are counted at a planned 2 MiB; an ARF tree carries two ADWIN
#: detectors besides; a kNN stores ``window_size`` instances and compares each.
MODELS: dict[str, ModelCost] = {
    "nochange": ModelCost(1 * KiB),
    "majority": ModelCost(1 * KiB, size_param="window", per_unit=16),
    "mean": ModelCost(1 * KiB, size_param="window", per_unit=40),
    "nb": ModelCost(64 * KiB, work=2),
    "linreg": ModelCost(64 * KiB, work=2),
    "ht": _TREE,
    "hat": _TREE,
    "htr": _TREE,
    "knn": ModelCost(
        64 * KiB, size_param="window_size", size_default=1000, per_unit=1 * KiB, work_per_unit=1
    ),
    "arf": ModelCost(
        64 * KiB, size_param="n_models", size_default=10, per_unit=3 * MiB, work_per_unit=6
    ),
}
_MOA_FOREST = ModelCost(
    64 * KiB, size_param="s", size_default=100, per_unit=3 * MiB, work_per_unit=6
)
#: MOA's classifiers (``moa:NAME``) as their river kin; ensembles by MOA's own sizes
#: (``-s``: 100 trees for ARF and SRP, 10 for the bagging ensembles), kNN by its window
#: (``-w``). The JVM itself (~100 MiB, once per process) is not a per-experiment cost.
MOA_MODELS: dict[str, ModelCost] = {
    "NaiveBayes": MODELS["nb"],
    "HoeffdingTree": _TREE,
    "HoeffdingAdaptiveTree": _TREE,
    "EFDT": _TREE,
    "AdaptiveRandomForest": _MOA_FOREST,
    "StreamingRandomPatches": _MOA_FOREST,
    "OzaBag": ModelCost(
        64 * KiB, size_param="s", size_default=10, per_unit=2 * MiB, work_per_unit=4
    ),
    "LeveragingBag": ModelCost(
        64 * KiB, size_param="s", size_default=10, per_unit=3 * MiB, work_per_unit=6
    ),
    "kNN": ModelCost(
        64 * KiB, size_param="w", size_default=1000, per_unit=1 * KiB, work_per_unit=1
    ),
    "MajorityClass": MODELS["nochange"],
    "NoChange": MODELS["nochange"],
}
#: A model this table does not know (registered by the operator, or imported).
UNKNOWN_MODEL = ModelCost(8 * MiB, work=16)


@dataclass(frozen=True)
class Cost:
    """The estimated memory (bytes) and work (updates per labelled instance) of an
    experiment; ``terms`` splits the memory by what holds it."""

    memory_bytes: int
    work_per_event: int
    terms: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """``1.2 GiB (binned 1.1 GiB, pairs 80.0 MiB)``: the total and its largest terms."""
        top = sorted(self.terms.items(), key=lambda kv: -kv[1])[:3]
        parts = ", ".join(f"{name} {size_text(size)}" for name, size in top if size)
        return f"{size_text(self.memory_bytes)} ({parts})"


def size_text(n: float) -> str:
    """Bytes for people.

    >>> size_text(512), size_text(3 * MiB), size_text(5 * 2**50)
    ('512 B', '3.0 MiB', '5,120.0 TiB')
    """
    for unit, scale in (("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


def _int(params: dict[str, Any], name: str | None, default: int) -> int:
    """A size parameter as a count (its default when absent or not an integer)."""
    value = params.get(name) if name else None
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    return default


def learner_cost(spec: str) -> tuple[int, int]:
    """``(bytes, work)`` of one learner spec: its model times its size, plus its wrappers.

    Parsing only: no learner is built. A spec that does not parse costs as an unknown
    model (building it will refuse it anyway).

    >>> learner_cost("arf[n_models=100]")[0] // MiB, learner_cost("ta3:ht")[0] // KiB
    (300, 2049)
    >>> learner_cost("moa:AdaptiveRandomForest[s=10]") == learner_cost("arf")
    True
    """
    try:
        *wrappers, model = split_wrappers(spec)
    except SpecError:
        return UNKNOWN_MODEL.bytes, UNKNOWN_MODEL.work
    table = MODELS
    if wrappers and wrappers[-1].name == "moa":  # moa:NAME[options]: one model
        wrappers, table = wrappers[:-1], MOA_MODELS
    entry = table.get(model.name, UNKNOWN_MODEL)
    size = _int(model.params, entry.size_param, entry.size_default)
    memory = entry.bytes + size * entry.per_unit
    work = entry.work + size * entry.work_per_unit
    for wrapper in wrappers:  # ta<l>: a history of l labels, augmented features; tc: counts
        memory += 1 * KiB + _lags(wrapper) * 128
        work += 1
    return memory, work


def _lags(wrapper: Component) -> int:
    digits = wrapper.name[2:] if wrapper.name.startswith("ta") else ""
    return int(digits) if digits.isdigit() else 1


def detector_cost(spec: str) -> int:
    """Bytes of one drift detector: its state and its windows.

    >>> detector_cost("ph") == SMALL_STATE, detector_cost("ratio_window") // KiB
    (True, 425)
    """
    try:
        c = parse_component(spec)
    except SpecError:
        return SMALL_STATE
    slots = 0
    if c.name == "ph" and c.params.get("estimator") == "window":
        slots = _int(c.params, "w", 1000)
    elif c.name == "ratio_window":
        slots = _int(c.params, "w1", 5000) + _int(c.params, "w2", 1000)
    elif c.name == "adwin":
        slots = 256  # buckets of exponentially growing size: logarithmic in the stream
    return SMALL_STATE + slots * SLOT_MEAN


def estimate(config: ExperimentConfig) -> Cost:
    """The memory and per-event work of ``config``'s experiment (see the module docstring)."""
    classification = config.task == "classification"
    n = len(config.learners)
    window = config.window or 0
    n_estimators = 1 + (config.window is not None) + (config.fading is not None)
    models = [learner_cost(spec) for spec in config.learners]
    terms = {"stream": STREAM_BASE, "learners": sum(m for m, _ in models)}
    slot = SLOT_METRIC if classification else SLOT_REGRESSION
    terms["metrics"] = n * (n_estimators * SMALL_STATE + window * slot)
    nb = config.bins + 2 if config.reeval else 0
    if nb:
        per_label = 27 * nb + 520 if classification else 24 * nb + 240
        terms["binned"] = n * (n_estimators * (SMALL_STATE + 88 * nb) + window * per_label)
    if classification and config.positive is not None:
        scores = min(config.limit or PLANNED_LABELS, PLANNED_LABELS)
        auc_window = config.window or config.auc_window
        terms["auc"] = n * (2 * SMALL_STATE + (auc_window + scores) * SLOT_AUC)
    terms["detectors"] = n * sum(detector_cost(d) for d in config.detectors)
    pairs = n * (n - 1) // 2
    statistics = 2 if classification else 1
    terms["pairs"] = pairs * statistics * (n_estimators * SMALL_STATE + window * SLOT_PAIR)
    pending = min(config.pending_cap or PLANNED_PENDING, PLANNED_PENDING)
    features = len(config.features) if config.features else ASSUMED_FEATURES
    per_instance = PENDING_INSTANCE + (n + 2) * PENDING_HISTORY + features * PENDING_FEATURE
    if config.protocol == "moa" and config.reeval_k is not None:
        # MOA's bin mapping keeps every re-prediction: about wait / K per history
        wait = int(config.delay) if str(config.delay).isdigit() else PLANNED_WAIT
        per_instance += (n + 2) * (wait // config.reeval_k) * HISTORY_ENTRY
    terms["pending"] = pending * per_instance
    terms["diagnostics"] = 16 * (config.max_lag + 1) * 2 * 8  # two counts per lag, 16 classes
    work = sum(w for _, w in models) + n * n_estimators * (1 + nb) + len(config.detectors) * n
    work += pairs * n_estimators * statistics
    if config.reeval_k is not None:  # each label re-predicts the pending instances due
        work += pending // config.reeval_k * sum(w for _, w in models)
    return Cost(sum(terms.values()), work, terms)
