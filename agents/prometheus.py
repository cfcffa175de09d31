"""The worker's ``/metrics``: its streams and its own counters for Prometheus.

:class:`WorkerCollector` is a ``prometheus_client`` collector that reads a
:class:`~streameval.agents.worker.StreamWorker` when scraped, so nothing is counted twice
and the hot path does no extra work: every series is read (or computed) from what the
worker holds when scraped.

Per stream and learner (labels ``stream``, ``learner``), gauges of the headline metrics
as they are now (the prequential values of the stream's snapshot, computed at the scrape):

* ``streameval_accuracy``, ``streameval_kappa_per``, ``streameval_kappa_plus``,
  ``streameval_auc`` (binary streams only),
* ``streameval_pending``: instances predicted, their label not yet come.

Per stream: ``streameval_labels_total`` (labels evaluated) and
``streameval_repredictions_total`` (re-predictions of continuous re-evaluation).
Per worker: ``streameval_events_total`` (input events handled),
``streameval_deadletters_total{kind}``, ``streameval_checkpoints_total``,
``streameval_healthy`` (1, or 0 when ``/health`` answers 503) and
``streameval_consumer_lag{topic, partition}`` (messages on an input partition not yet
read). The names are documented in ``docs/operations.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

#: The headline metrics exported per stream and learner: snapshot key -> help text.
HEADLINE = {
    "accuracy": "prequential accuracy of the learner",
    "kappa_per": "kappa against the no-change classifier (temporal kappa)",
    "kappa_plus": "kappa against the majority-class classifier of the whole stream",
    "auc": "prequential AUC (binary streams)",
}
#: Lag of each input partition read so far: ``(topic, partition) -> messages not yet read``.
Lag = Callable[[], Mapping[tuple[str, int], int]]


class WorkerCollector:
    """Series of a worker's streams and counters, read at each scrape.

    >>> from collections import Counter
    >>> class W:  # a worker with no stream yet
    ...     runners, counts, healthy = {}, Counter(events=5, deadletter_schema=2), True
    >>> registry = CollectorRegistry()
    >>> registry.register(WorkerCollector(W(), lag=lambda: {("features", 0): 7}))
    >>> from prometheus_client import generate_latest
    >>> text = generate_latest(registry).decode()
    >>> "streameval_events_total 5.0" in text
    True
    >>> 'streameval_deadletters_total{kind="schema"} 2.0' in text
    True
    >>> 'streameval_consumer_lag{partition="0",topic="features"} 7.0' in text
    True
    """

    def __init__(self, worker: Any, lag: Lag | None = None) -> None:
        self.worker = worker
        self.lag = lag

    def collect(self) -> Iterator[Metric]:
        yield from self._streams()
        yield from self._counters()
        lag = GaugeMetricFamily(
            "streameval_consumer_lag",
            "messages on an input partition this worker has not read yet",
            labels=["topic", "partition"],
        )
        for (topic, partition), n in sorted((self.lag() if self.lag else {}).items()):
            lag.add_metric([topic, str(partition)], n)
        yield lag

    def _streams(self) -> Iterator[Metric]:
        labels = ["stream", "learner"]
        gauges = {
            key: GaugeMetricFamily(f"streameval_{key}", text, labels=labels)
            for key, text in HEADLINE.items()
        }
        pending = GaugeMetricFamily(
            "streameval_pending", "instances predicted whose label has not come", labels=labels
        )
        labelled = CounterMetricFamily("streameval_labels", "labels evaluated", labels=["stream"])
        repredictions = CounterMetricFamily(
            "streameval_repredictions",
            "re-predictions of pending instances (continuous re-evaluation)",
            labels=["stream"],
        )
        for stream, runner in sorted(self.worker.runners.items()):
            experiment = runner.experiment
            labelled.add_metric([stream], experiment.n_labelled)
            repredictions.add_metric([stream], experiment.n_repredictions)
            for learner, flat in _headline(runner):
                for key, gauge in gauges.items():
                    value = flat.get(key)
                    if isinstance(value, (int, float)) and value == value:  # not None/NaN
                        gauge.add_metric([stream, learner], value)
                pending.add_metric([stream, learner], len(experiment.buffer))
        yield from gauges.values()
        yield from (pending, labelled, repredictions)

    def _counters(self) -> Iterator[Metric]:
        counts = self.worker.counts
        yield CounterMetricFamily(
            "streameval_events", "input events handled", value=counts.get("events", 0)
        )
        letters = CounterMetricFamily(
            "streameval_deadletters", "records written to the deadletter topic", labels=["kind"]
        )
        for name, n in sorted(counts.items()):
            if name.startswith("deadletter_"):
                letters.add_metric([name.removeprefix("deadletter_")], n)
        yield letters
        yield CounterMetricFamily(
            "streameval_checkpoints",
            "checkpoints written and confirmed by the broker",
            value=counts.get("checkpoints", 0),
        )
        yield GaugeMetricFamily(
            "streameval_healthy",
            "1 while /health answers 200, else 0",
            value=1 if self.worker.healthy else 0,
        )


def _headline(runner: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each learner's metrics as they are now: its snapshot, which both cores compute on
    demand (the columnar core brings its scorecards up to date only then). A stream that
    failed keeps the values its scorecards last had: its experiment stopped half-way
    through an event, nothing is computed from it any more."""
    if runner.failed is None:
        return [(s.learner, s.metrics) for s in runner.experiment.snapshots("periodic")]
    return [(slot.name, slot.card.flat()) for slot in runner.experiment.slots]


def registry_for(worker: Any, lag: Lag | None = None) -> CollectorRegistry:
    """A registry of ``worker``'s series only (not the process's default collectors)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(worker, lag))
    return registry


def register_metrics_view(app: Any, worker: Any, lag: Lag | None = None) -> None:
    """Serve ``/metrics`` (Prometheus text format) on the Faust ``app``'s web server."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry = registry_for(worker, lag)

    @app.page("/metrics")
    async def metrics(view: Any, request: Any) -> Any:
        return view.bytes(
            generate_latest(registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"},
        )
