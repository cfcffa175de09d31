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

from collections.abc import Iterable, Mapping
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


@dataclass
class _Point:
    """All learners' values after ``n_labelled`` labels."""

    n_labelled: int
    ts: float | None
    pending: float | None
    index: int  # position among the periodic snapshots (-1: the final one)
    values: dict[str, dict[str, float | None]] = field(default_factory=dict)


class CurveRecorder:
    """Collect metric snapshots into the ``curves`` block of a results document.

    Feed it every snapshot the experiment emits (:meth:`add` or
    :meth:`extend`), in emission order; :meth:`block` gives the block, or
    ``None`` when no snapshot was seen.
    """

    def __init__(self, max_points: int = MAX_POINTS, max_values: int = MAX_VALUES) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be >= 2, got {max_points}")
        self.max_points = max_points
        self.max_values = max_values
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
        point.values[str(snap["learner"])] = {k: metrics[k] for k in curve_keys(metrics)}
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
        width = sum(len(v) for v in self._points[-1].values.values()) + 3
        return len(self._points) * width > self.max_values

    def _thin(self) -> None:
        """Keep every other periodic point while there are too many values."""
        while len(self._points) > 2 and self._too_big():
            self.stride *= 2
            self._points = [p for p in self._points if self._keeps(p.index)]

    def block(self) -> dict[str, Any] | None:
        """The ``curves`` block, or ``None`` without any snapshot."""
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
        return {
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


def curves_from_snapshots(
    snapshots: Iterable[Any], max_points: int = MAX_POINTS, max_values: int = MAX_VALUES
) -> dict[str, Any] | None:
    """The ``curves`` block of a sequence of snapshots (objects or ``metrics`` messages).

    Use it on the messages read from the ``metrics`` topic of a stream, or on
    the outputs of :func:`streameval.pipeline.evaluate.evaluate`'s ``on_output``.
    """
    rec = CurveRecorder(max_points, max_values)
    rec.extend(snapshots)
    return rec.block()
