"""Metrics over time: the optional ``curves`` block of a results document.

An experiment run with ``--snapshot-every N`` emits a
:class:`~streameval.pipeline.experiment.MetricSnapshot` of every learner every ``N``
labels (and a ``final`` one at the end of the stream). :class:`CurveRecorder`
keeps those snapshots as compact series, one list per metric and learner, so
that a results document can carry its own learning curves::

    "curves": {
      "n_labelled": [1000, 2000, ..., 45312],
      "ts":         [...],              # event time of each point
      "pending":    [...],              # instances waiting for a label
      "stride":     1,                  # 1 = every snapshot kept, 2 = every other, ...
      "learners": {"nb": {"accuracy": [...], "kappa_per": [...],
                          "window.accuracy": [...], ...}}
    }

Every list has one value per point (``null`` where a metric was undefined).
Values are the snapshot values themselves, so a point of the curves equals the
``metrics`` message the Kafka worker published for it.

With continuous re-evaluation the block also holds ``binned``: the binned
accuracy and kappa family (regression: MAE, RMSE) of the whole history as it
stood at each of its points, one list of ``B + 2`` values per point, so the
binned table can be read at any kept label count (:func:`bins_at`)::

    "binned": {"n_labelled": [...], "ts": [...], "pending": [...], "stride": 4,
               "learners": {"nb": {"accuracy": [[b0, b1, ..., b_B+1], ...], ...}}}

It has its own budget (``max_binned_values``, counting every bin value) and so
its own stride: with many bins and learners it keeps fewer points than the
scalar curves. The final snapshot is always kept, so its last point equals the
final binned table of the results. When even two points do not fit (more than
half the budget per point, e.g. 10 learners and ``B = 100``), the block has no
``binned`` entry: the results message must stay under the 1 MB of a Kafka
message, and the final table is in the results anyway.

Size is bounded: beyond ``max_points`` points, or ``max_values`` values in
all, the recorder keeps every other periodic snapshot (and doubles
``stride``), deterministically, so both drivers keep the same points. The
final snapshot is always kept.

The recorder is plain data and pickles with the experiment, so a Kafka
worker restored from a checkpoint continues its curves where they were.

>>> rec = CurveRecorder(max_points=4)
>>> for n in range(1, 7):
...     rec.add({"learner": "nb", "n_labelled": 10 * n, "ts": float(n), "kind": "periodic",
...              "metrics": {"accuracy": n / 10, "pending": 3, "kappa_z": 1.0}})
>>> block = rec.block()
>>> block["n_labelled"], block["stride"], block["learners"]["nb"]["accuracy"]
([20, 40, 60], 2, [0.2, 0.4, 0.6])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The metrics a curve keeps (each also with its ``window.`` / ``fading.`` prefix).
CURVE_METRICS: tuple[str, ...] = (
    "accuracy",
    "kappa",
    "kappa_per",
    "kappa_plus",
    "auc",
    "mae",
    "rmse",
)
#: Estimator prefixes of the flat snapshot metrics (``""`` is the whole history).
ESTIMATORS: tuple[str, ...] = ("", "window.", "fading.")
#: Most points kept before thinning.
MAX_POINTS = 500
#: Most values (points x learners x series) kept before thinning: the curves travel inside
#: the results message of the Kafka metrics topic, whose messages stay under 1 MB.
MAX_VALUES = 20_000
#: The binned metrics a curve keeps: the accuracy and kappa family, or MAE and RMSE.
BINNED_METRICS: tuple[str, ...] = (
    "accuracy",
    "kappa",
    "kappa_per",
    "kappa_m",
    "kappa_plus",
    "mae",
    "rmse",
)
#: Most bin values (points x learners x metrics x bins) of the ``binned`` curves.
MAX_BINNED_VALUES = 10_000  # ~200 kB of JSON

Values = dict[str, Any]


def curve_keys(metrics: Mapping[str, Any]) -> list[str]:
    """The keys of a flat snapshot ``metrics`` dict that belong in a curve.

    >>> curve_keys({"accuracy": 1, "window.kappa": 0, "kappa_m": 0.1, "pending": 2})
    ['accuracy', 'window.kappa']
    """
    out = []
    for key in metrics:
        prefix, _, base = key.rpartition(".")
        if base in CURVE_METRICS and (prefix + "." if prefix else "") in ESTIMATORS:
            out.append(key)
    return out


def curve_values(snap: Mapping[str, Any]) -> Values:
    """The scalar values of a snapshot (its ``to_dict()``) that a curve keeps."""
    metrics = snap.get("metrics") or {}
    return {k: metrics[k] for k in curve_keys(metrics)}


def binned_values(snap: Mapping[str, Any]) -> Values:
    """The whole-history binned lists of a snapshot that a curve keeps (``{}`` without any).

    >>> binned_values({"binned": {"n": [2, 2], "accuracy": [0.5, 1.0], "window": {}}})
    {'accuracy': [0.5, 1.0]}
    """
    binned = snap.get("binned") or {}
    return {k: list(binned[k]) for k in BINNED_METRICS if isinstance(binned.get(k), list)}


def _width(values: Mapping[str, Values]) -> int:
    """How many values one point holds (a list counts its length)."""
    return sum(len(x) if isinstance(x, list) else 1 for v in values.values() for x in v.values())


@dataclass
class _Point:
    """All learners' values after ``n_labelled`` labels."""

    n_labelled: int
    ts: float | None
    pending: float | None
    index: int  # position among the periodic snapshots (-1: the final one)
    values: dict[str, Values] = field(default_factory=dict)


class CurveRecorder:
    """Collect metric snapshots into the ``curves`` block of a results document.

    Feed it every snapshot the experiment emits (:meth:`add` or
    :meth:`extend`), in emission order; :meth:`block` gives the block, or
    ``None`` when no snapshot was seen. ``select`` picks a snapshot's values;
    the binned curves are a second recorder inside, selecting
    :func:`binned_values` under ``max_binned_values`` (``0``: no binned curves).
    """

    select: Callable[[Mapping[str, Any]], Values] = staticmethod(curve_values)
    _binned: CurveRecorder | None = None  # absent from recorders pickled before binned curves

    def __init__(
        self,
        max_points: int = MAX_POINTS,
        max_values: int = MAX_VALUES,
        max_binned_values: int = MAX_BINNED_VALUES,
        select: Callable[[Mapping[str, Any]], Values] = curve_values,
    ) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be >= 2, got {max_points}")
        self.max_points = max_points
        self.max_values = max_values
        self.select = select
        if max_binned_values > 0:
            self._binned = CurveRecorder(max_points, max_binned_values, 0, binned_values)
        self.stride = 1
        self._points: list[_Point] = []
        self._n_periodic = 0
        self._last_n = -1  # n_labelled of the newest emission seen (kept or not)
        self._last_index = -1  # its position among the periodic emissions (-1: final)

    def __len__(self) -> int:
        return len(self._points)

    def add(self, snapshot: Any) -> None:
        """One snapshot: a :class:`~streameval.pipeline.experiment.MetricSnapshot` or its
        ``to_dict()``.

        The snapshots of one emission (one per learner, same ``n_labelled``)
        form one point. A snapshot older than the last point is ignored (a
        redelivered message), and so is any message that is not a snapshot
        (the ``results`` message of the metrics topic).
        """
        snap = snapshot.to_dict() if hasattr(snapshot, "to_dict") else dict(snapshot)
        kind = snap.get("kind")
        if kind not in ("periodic", "final") or "learner" not in snap:
            return
        if self._binned is not None:
            self._binned.add(snap)
        n = int(snap["n_labelled"])
        if n < self._last_n:
            return
        if n > self._last_n:  # a new emission
            self._last_n = n
            if kind == "periodic":
                self._last_index = self._n_periodic
                self._n_periodic += 1
            else:
                self._last_index = -1
        elif kind == "final":
            self._last_index = -1  # a final snapshot is kept even where a periodic one was not
        if not self._keeps(self._last_index):
            return
        metrics = snap.get("metrics") or {}
        point = self._points[-1] if self._points else None
        if point is None or point.n_labelled != n:
            point = _Point(n, snap.get("ts"), metrics.get("pending"), self._last_index)
            self._points.append(point)
        else:
            point.index = min(point.index, self._last_index)
        point.values[str(snap["learner"])] = self.select(snap)
        self._thin()

    def _keeps(self, index: int) -> bool:
        """Whether the ``index``-th periodic snapshot (0-based) is kept at the current stride."""
        return index < 0 or (index + 1) % self.stride == 0

    def extend(self, snapshots: Iterable[Any]) -> None:
        """:meth:`add` each snapshot; other objects (predictions, drift events) are skipped."""
        for snap in snapshots:
            if hasattr(snap, "to_dict") and not hasattr(snap, "metrics"):
                continue
            self.add(snap)

    def _too_big(self) -> bool:
        if len(self._points) > self.max_points:
            return True
        width = _width(self._points[-1].values) + 3
        return len(self._points) * width > self.max_values

    def _binned_fits(self) -> bool:
        """Whether the binned curves keep within their budget (two points always stay,
        so a point wider than half the budget cannot)."""
        rec = self._binned
        assert rec is not None
        return sum(_width(p.values) + 3 for p in rec._points) <= rec.max_values

    def _thin(self) -> None:
        """Keep every other periodic point while there are too many values."""
        while len(self._points) > 2 and self._too_big():
            self.stride *= 2
            self._points = [p for p in self._points if self._keeps(p.index)]

    def block(self) -> dict[str, Any] | None:
        """The ``curves`` block, or ``None`` without any snapshot.

        Its ``binned`` entry is there when some snapshot carried binned values.
        """
        if not self._points:
            return None
        learners: list[str] = []
        keys: dict[str, list[str]] = {}
        for p in self._points:
            for learner, values in p.values.items():
                if learner not in keys:
                    learners.append(learner)
                    keys[learner] = []
                for k in values:
                    if k not in keys[learner]:
                        keys[learner].append(k)
        block: dict[str, Any] = {
            "n_labelled": [p.n_labelled for p in self._points],
            "ts": [p.ts for p in self._points],
            "pending": [p.pending for p in self._points],
            "stride": self.stride,
            "learners": {
                learner: {
                    k: [p.values.get(learner, {}).get(k) for p in self._points]
                    for k in keys[learner]
                }
                for learner in learners
            },
        }
        binned = self._binned.block() if self._binned is not None else None
        if binned is not None and any(binned["learners"].values()) and self._binned_fits():
            block["binned"] = binned
        return block


def curves_from_snapshots(
    snapshots: Iterable[Any],
    max_points: int = MAX_POINTS,
    max_values: int = MAX_VALUES,
    max_binned_values: int = MAX_BINNED_VALUES,
) -> dict[str, Any] | None:
    """The ``curves`` block of a sequence of snapshots (objects or ``metrics`` messages).

    Use it on the messages read from the ``metrics`` topic of a stream, or on
    the outputs of :func:`streameval.pipeline.evaluate.evaluate`'s ``on_output``.
    """
    rec = CurveRecorder(max_points, max_values, max_binned_values)
    rec.extend(snapshots)
    return rec.block()


def bins_at(curves: Mapping[str, Any], n_labelled: int) -> tuple[int, dict[str, Values]]:
    """The binned values as they stood after ``n_labelled`` labels: the last kept point
    of ``curves["binned"]`` at or before ``n_labelled``, as ``(its label count,
    {learner: {metric: B + 2 values}})``.

    Raises ``ValueError`` when the curves have no binned values or none that early.

    >>> curves = {"binned": {"n_labelled": [10, 20], "learners": {"nb": {"accuracy": [
    ...     [0.5, 0.6, 0.7], [0.55, 0.65, 0.75]]}}}}
    >>> bins_at(curves, 15)
    (10, {'nb': {'accuracy': [0.5, 0.6, 0.7]}})
    """
    binned = curves.get("binned")
    if not binned or not binned.get("n_labelled"):
        raise ValueError(
            "these results have no binned curves: run with --reeval-k K and --snapshot-every N"
        )
    counts = binned["n_labelled"]
    kept = [i for i, n in enumerate(counts) if n <= n_labelled]
    if not kept:
        raise ValueError(f"no binned point at or before {n_labelled} labels (first: {counts[0]})")
    i = kept[-1]
    learners = {
        learner: {k: series[i] for k, series in values.items() if series[i] is not None}
        for learner, values in binned["learners"].items()
    }
    return counts[i], learners
