"""The worker's live dashboard: ``/dashboard``, ``/api/metrics`` and ``/health``.

The worker keeps a bounded, in-memory :class:`DashboardHistory` of what it
publishes itself -- the metric snapshots of the ``metrics`` topic and the
alarms of the ``drift`` topic -- so the dashboard needs no consumer of its own
and shows every stream the worker owns. Nothing here feeds back into the
evaluation: the views are read-only (GET only; Faust answers other methods
with 405).

``/api/metrics`` is the JSON the page draws, per stream and learner:

* ``series``: columns over the snapshots, oldest first -- ``n_labelled``,
  ``wall`` (worker clock, seconds since the epoch), ``ts`` (event time),
  the metrics of :data:`SERIES_METRICS`, ``pending`` and ``throughput``
  (labels per wall second, see :func:`throughput`);
* ``binned``: the latest re-evaluation curve (accuracy per bin, ``B + 2`` bins:
  the first prediction, ``B`` bins of the waiting period, the test-then-train
  prediction) and the ``n_labelled`` it was taken at;
* ``drift``: the latest alarms (learner, detector, index, ts, statistic);
* ``settings``: the experiment's settings (:data:`SETTINGS`) and ``expected``, the
  labels a replay of known length will bring (see :func:`known_length`), for the
  progress and ETA the page shows.

``?since=V`` with the ``version`` of a previous answer returns only
``{"version": V, "unchanged": true, "generated": ..., "health": ...}`` when nothing was
recorded since, which is what the page's one-second polling costs when a stream is idle.

Every answer carries ``health`` (see :func:`health_summary`): ``healthy``, the
``reason`` when not, and the ``broker``'s state from :mod:`streameval.agents.health`
(``reachable``/``unreachable``, ``since`` -- wall time of the last change --,
the last error, the failed attempts and the timeout). ``/health`` answers 200
with the same fields while healthy, else 503.

The page (``agents/static/dashboard.html``) is plain HTML with hand-written
SVG charts and no external resources; it is served with a content security
policy that allows exactly its own inline script and style.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import DriftEvent, MetricSnapshot
from streameval.pipeline.spec import SpecError, parse_component
from streameval.pipeline.streams.files import is_file_spec
from streameval.pipeline.streams.real import REAL_DATASETS

#: Snapshot metrics kept as time series (``None`` where a snapshot lacks one, e.g. ``auc``
#: of a stream that is not binary).
SERIES_METRICS = (
    "accuracy",
    "kappa",
    "kappa_per",
    "kappa_plus",
    "kappa_m",
    "auc",
    "window.accuracy",
    "window.kappa_per",
    "fading.accuracy",
    "fading.kappa_per",
)
#: The experiment's settings the page lists (``settings`` of a stream, see :func:`settings_of`).
SETTINGS = (
    "dataset",
    "delay",
    "limit",
    "window",
    "fading",
    "reeval_k",
    "bins",
    "detectors",
    "drift_reset",
    "positive",
    "snapshot_every",
    "seed",
)
#: Snapshots kept per stream and learner, and drift alarms kept per stream and learner.
DEFAULT_MAXLEN = 2000
#: Wall seconds over which :func:`throughput` averages.
THROUGHPUT_WINDOW = 5.0


def _number(value: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits`` decimals, else ``None`` (JSON has no NaN).

    >>> _number(0.123456789), _number(float("nan")), _number(None), _number(True)
    (0.123457, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return round(value, digits) if math.isfinite(value) else None


def known_length(config: ExperimentConfig) -> int | None:
    """Instances of the stream, when its limit or its dataset spec says (else ``None``).

    Files are not opened: only the limit, a real dataset's registered size and a
    synthetic spec's ``n`` count.

    >>> known_length(ExperimentConfig("s", ["nb"], dataset="electricity"))
    45312
    >>> known_length(ExperimentConfig("s", ["nb"], dataset="sea[n=500]", limit=800))
    500
    >>> known_length(ExperimentConfig("s", ["nb"], dataset="csv:x.csv")) is None
    True
    """
    sizes = [config.limit] if config.limit is not None else []
    spec = config.dataset or ""
    if spec and not is_file_spec(spec):
        try:
            comp = parse_component(spec)
        except SpecError:
            comp = None
        if comp is not None and comp.name in REAL_DATASETS:
            sizes.append(REAL_DATASETS[comp.name].n_instances)
        n = comp.params.get("n") if comp is not None else None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            sizes.append(n)
    return min(sizes) if sizes else None


def settings_of(config: ExperimentConfig) -> dict[str, Any]:
    """What the page lists about an experiment: :data:`SETTINGS` and ``expected`` labels.

    >>> settings_of(ExperimentConfig("s", ["nb"], dataset="sea[n=500]", window=100))["window"]
    100
    """
    out = {name: getattr(config, name) for name in SETTINGS}
    out["expected"] = known_length(config)
    return out


def throughput(
    n_labelled: list[int], wall: list[float], window: float = THROUGHPUT_WINDOW
) -> list[float | None]:
    """Labels per wall second at each snapshot, averaged over the last ``window`` seconds.

    The rate at snapshot ``i`` is ``(n[i] - n[j]) / (wall[i] - wall[j])`` with ``j``
    the oldest earlier snapshot at most ``window`` seconds older (the previous one
    if none is that recent). The first snapshot, and snapshots taken in the same
    instant as their reference, have no rate (``None``).

    >>> throughput([100, 200, 300, 400], [0.0, 1.0, 2.0, 4.0], window=2.5)
    [None, 100.0, 100.0, 50.0]
    """
    out: list[float | None] = []
    j = 0
    for i in range(len(n_labelled)):
        while j < i - 1 and wall[i] - wall[j] > window:
            j += 1
        k = j if j < i else i - 1
        if k < 0 or wall[i] <= wall[k]:
            out.append(None)
            continue
        out.append(round((n_labelled[i] - n_labelled[k]) / (wall[i] - wall[k]), 1))
    return out


def mean_rate(points: Iterable[tuple[Any, ...]]) -> float | None:
    """Labels per wall second from the first kept point ``(n_labelled, wall, ...)`` to the
    last: the stream's average speed, also once it finished (``None`` without a span).

    >>> mean_rate([(100, 10.0), (300, 12.0), (1100, 20.0)]), mean_rate([(5, 1.0)])
    (100.0, None)
    """
    points = list(points)
    if len(points) < 2 or points[-1][1] <= points[0][1]:
        return None
    return round((points[-1][0] - points[0][0]) / (points[-1][1] - points[0][1]), 1)


@dataclass
class _Track:
    """What is kept of one learner of one stream."""

    points: deque[tuple[Any, ...]]
    alarms: deque[dict[str, Any]]
    binned: list[float | None] | None = None
    binned_at: int = 0
    kind: str = "periodic"


@dataclass
class _Stream:
    """The learners of one stream and its experiment's settings (once defined here)."""

    learners: dict[str, _Track] = field(default_factory=dict)
    settings: dict[str, Any] | None = None


@dataclass
class DashboardHistory:
    """Bounded history of the snapshots and drift alarms a worker published.

    A point is ``(n_labelled, wall, ts, *SERIES_METRICS, pending)``. Points of a
    learner keep strictly increasing ``n_labelled``: a snapshot at or before the
    last kept one (the final snapshot at the count of the last periodic one, or
    outputs produced again after a restore) replaces the points it overlaps.
    """

    maxlen: int = DEFAULT_MAXLEN
    clock: Callable[[], float] = time.time
    changes: int = 0
    epoch: str = field(default_factory=lambda: secrets.token_hex(4))
    streams: dict[str, _Stream] = field(default_factory=dict)

    @property
    def version(self) -> str:
        """Changes whenever something is recorded (and differs between worker processes)."""
        return f"{self.epoch}.{self.changes}"

    def define(self, config: ExperimentConfig) -> None:
        """Keep the settings of an experiment this worker runs (see :func:`settings_of`)."""
        self.streams.setdefault(config.stream, _Stream()).settings = settings_of(config)
        self.changes += 1

    def _track(self, stream: str, learner: str) -> _Track:
        learners = self.streams.setdefault(stream, _Stream()).learners
        track = learners.get(learner)
        if track is None:
            track = learners[learner] = _Track(deque(maxlen=self.maxlen), deque(maxlen=self.maxlen))
        return track

    def record(self, outputs: Iterable[Any]) -> None:
        """Keep the snapshots and drift alarms among ``outputs`` (others are ignored)."""
        for out in outputs:
            if isinstance(out, MetricSnapshot):
                self.add_snapshot(out)
            elif isinstance(out, DriftEvent):
                self.add_drift(out)

    def add_snapshot(self, snap: MetricSnapshot) -> None:
        track = self._track(snap.stream, snap.learner)
        metrics = snap.metrics or {}
        pending = metrics.get("pending")
        point = (
            int(snap.n_labelled),
            self.clock(),
            _number(snap.ts),
            *(_number(metrics.get(name)) for name in SERIES_METRICS),
            int(pending) if isinstance(pending, (int, float)) and math.isfinite(pending) else None,
        )
        while track.points and track.points[-1][0] >= point[0]:
            track.points.pop()
        track.points.append(point)
        track.kind = snap.kind
        accuracy = (snap.binned or {}).get("accuracy")
        if accuracy:
            track.binned = [_number(v) for v in accuracy]
            track.binned_at = int(snap.n_labelled)
        self.changes += 1

    def add_drift(self, event: DriftEvent) -> None:
        track = self._track(event.stream, event.learner)
        track.alarms.append(
            {
                "learner": event.learner,
                "detector": event.detector,
                "index": int(event.index),
                "ts": _number(event.ts),
                "statistic": _number(event.statistic),
                "wall": round(self.clock(), 3),
            }
        )
        self.changes += 1

    def to_json(self, stream: str | None = None) -> dict[str, Any]:
        """The ``streams`` part of ``/api/metrics`` (one stream with ``stream``)."""
        names = sorted(self.streams) if stream is None else [stream]
        return {s: self._stream_json(self.streams[s]) for s in names if s in self.streams}

    def _stream_json(self, stream: _Stream) -> dict[str, Any]:
        learners = stream.learners
        series: dict[str, Any] = {}
        binned: dict[str, Any] = {}
        drift: list[dict[str, Any]] = []
        n_labelled = 0
        last_wall: float | None = None
        finished = bool(learners)
        for learner, track in learners.items():
            columns = list(zip(*track.points, strict=True)) if track.points else []
            n = [int(v) for v in columns[0]] if columns else []
            wall = [float(v) for v in columns[1]] if columns else []
            entry: dict[str, Any] = {
                "n_labelled": n,
                "wall": [round(w, 3) for w in wall],
                "ts": list(columns[2]) if columns else [],
            }
            for offset, name in enumerate(SERIES_METRICS, start=3):
                entry[name] = list(columns[offset]) if columns else []
            entry["pending"] = list(columns[-1]) if columns else []
            entry["throughput"] = throughput(n, wall)
            series[learner] = entry
            if track.binned is not None:
                binned[learner] = {"n_labelled": track.binned_at, "accuracy": track.binned}
            drift.extend(track.alarms)
            if n:
                n_labelled = max(n_labelled, n[-1])
                last_wall = wall[-1] if last_wall is None else max(last_wall, wall[-1])
            finished = finished and track.kind == "final"
        drift.sort(key=lambda a: (a["index"], a["learner"], a["detector"]))
        first = next(iter(learners.values()), None)
        return {
            "learners": list(learners),
            "settings": stream.settings,
            "n_labelled": n_labelled,
            "last_update": None if last_wall is None else round(last_wall, 3),
            "final": finished,
            "rate": mean_rate(first.points) if first is not None else None,
            "series": series,
            "binned": binned,
            "drift": drift,
        }


def health_summary(
    status: dict[str, Any] | None, broker: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Healthy or not, and why: the worker's own state and the broker's.

    ``status`` is :meth:`~streameval.agents.worker.StreamWorker.status` (``healthy`` is False
    once an output was not delivered, and while outputs wait undelivered: its
    ``undelivered`` says how many and for how long); ``broker`` is
    :meth:`~streameval.agents.health.BrokerHealth.to_json`.

    >>> health_summary({"healthy": True}, {"state": "unreachable", "address": "k:9092",
    ...                 "reason": "timed out", "down_seconds": 4.0})["reason"]
    'Kafka broker at k:9092 unreachable for 4 s: timed out'
    """
    reasons = []
    if broker is not None and broker.get("state") != "reachable":
        reasons.append(
            f"Kafka broker at {broker.get('address')} unreachable for "
            f"{broker.get('down_seconds', 0):.0f} s: {broker.get('reason')}"
        )
    if status is not None and not status.get("healthy", True):
        errors = (status.get("counts") or {}).get("delivery_errors", 0)
        refused = list((status.get("refused") or {}).values())
        waiting = status.get("undelivered")
        if errors:
            reasons.append(f"{errors} output(s) not delivered")
        if waiting:
            reasons.append(waiting)
        if not (errors or waiting or refused):
            reasons.append("outputs not delivered")
        reasons += refused
    out: dict[str, Any] = {"healthy": not reasons, "reason": "; ".join(reasons) or None}
    if broker is not None:
        out["broker"] = broker
    return out


def metrics_payload(
    history: DashboardHistory,
    status: dict[str, Any] | None = None,
    *,
    since: str | None = None,
    stream: str | None = None,
    broker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of ``/api/metrics`` (see the module docstring)."""
    now = round(history.clock(), 3)
    health = health_summary(status, broker)
    if since is not None and since == history.version:
        return {"version": history.version, "unchanged": True, "generated": now, "health": health}
    payload: dict[str, Any] = {
        "version": history.version,
        "generated": now,
        "health": health,
        "streams": history.to_json(stream),
    }
    if status is not None:
        payload["worker"] = {
            "healthy": health["healthy"],
            "streams": status.get("streams", {}),
            "counts": status.get("counts", {}),
        }
    return payload


# -- the page ---------------------------------------------------------------------------------

_page_cache: dict[str, tuple[str, str]] = {}


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def dashboard_page() -> tuple[str, str]:
    """The dashboard HTML and its Content-Security-Policy (hashes of its inline parts)."""
    if "page" not in _page_cache:
        html = resources.files(__package__).joinpath("static/dashboard.html").read_text("utf-8")
        scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.DOTALL)
        styles = re.findall(r"<style>(.*?)</style>", html, flags=re.DOTALL)
        csp = "; ".join(
            [
                "default-src 'none'",
                "script-src " + " ".join(_csp_hash(s) for s in scripts),
                "style-src " + " ".join(_csp_hash(s) for s in styles),
                "connect-src 'self'",
                "img-src 'self' data:",
                "base-uri 'none'",
                "form-action 'none'",
                "frame-ancestors 'none'",
            ]
        )
        _page_cache["page"] = (html, csp)
    return _page_cache["page"]


def register_views(app: Any, worker: Any, broker_health: Any = None) -> None:
    """Add ``/dashboard``, ``/api/metrics`` and ``/health`` to the Faust ``app``.

    ``worker`` is the :class:`~streameval.agents.worker.StreamWorker` (its ``history`` and
    ``status()``), ``broker_health`` its :class:`~streameval.agents.health.BrokerHealth` (if any).
    ``/health`` answers 200 while both are healthy, else 503 with the reason.
    """

    def broker() -> dict[str, Any] | None:
        return broker_health.to_json() if broker_health is not None else None

    @app.page("/dashboard")
    async def dashboard(view: Any, request: Any) -> Any:
        html, csp = dashboard_page()
        return view.html(
            html,
            headers={
                "Content-Security-Policy": csp,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
            },
        )

    @app.page("/api/metrics")
    async def api_metrics(view: Any, request: Any) -> Any:
        query = request.query
        payload = metrics_payload(
            worker.history,
            worker.status(),
            since=query.get("since"),
            stream=query.get("stream"),
            broker=broker(),
        )
        return view.json(
            payload, headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        )

    @app.page("/health")
    async def health(view: Any, request: Any) -> Any:
        status = worker.status()
        summary = health_summary(status, broker())
        ok = summary["healthy"]
        return view.json(
            {"status": "ok" if ok else "failing", **status, **summary},
            status=200 if ok else 503,
            headers={"Cache-Control": "no-store"},
        )
