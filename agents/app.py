"""The Faust application: one agent over the experiment, feature and label topics.

The three input topics are co-partitioned and keyed by stream id, so the
worker that owns a partition sees a stream's definition, features and labels
together. The agent does no evaluation itself: it hands each message to the
:class:`~agents.worker.StreamWorker`, and acknowledges messages only after a
checkpoint containing them has been written (manual acks, ``noack``), which is
what lets a restarted worker end with the results of an uninterrupted run.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from agents.config import KafkaSettings
from agents.dashboard import register_views
from agents.topics import TopicNames
from agents.worker import StreamWorker

log = logging.getLogger(__name__)


def create_app(
    settings: KafkaSettings,
    worker: StreamWorker,
    *,
    web_host: str = "127.0.0.1",
    web_port: int = 6066,
    web: bool = False,
    app_id: str = "streameval-worker",
) -> Any:
    """Build the Faust app around ``worker``; run it with :func:`run_app`."""
    import faust

    names = TopicNames.for_prefix(settings.topic_prefix)
    app = faust.App(
        app_id,
        **settings.faust_app_kwargs(
            web_enabled=web,
            web_host=web_host,
            web_port=web_port,
            datadir=tempfile.mkdtemp(prefix="streameval-faust-"),
        ),
    )
    inputs = app.topic(
        names.features,
        names.labels,
        names.experiments,
        key_serializer="raw",
        value_serializer="raw",
    )
    kind_of = {names.features: "features", names.labels: "labels", names.experiments: "experiments"}
    unacked: list[Any] = []

    def save_and_ack() -> None:
        worker.checkpoint()
        if worker.can_ack:
            for event in unacked:
                event.ack()
            unacked.clear()

    @app.agent(inputs)
    async def ingest(stream: Any) -> None:
        async for event in stream.noack().events():
            msg = event.message
            worker.handle(kind_of[msg.topic], event.value, msg.key, msg.partition, msg.offset)
            unacked.append(event)
            if worker.checkpoint_due():
                save_and_ack()

    @app.timer(1.0)
    async def housekeeping() -> None:
        worker.tick()
        if (unacked or worker.dirty) and worker.idle_seconds() > 1.0:
            save_and_ack()

    register_views(app, worker)  # /dashboard, /api/metrics, /health (GET only)
    app.streameval_worker = worker  # for the dashboard views
    return app


def run_app(
    app: Any, *, web: bool, web_host: str, web_port: int, loglevel: str = "warning"
) -> None:
    """Start the Faust worker in this process (blocks until it stops)."""
    import sys

    level = {"warning": "warn", "critical": "crit"}.get(loglevel.lower(), loglevel.lower())
    argv = ["worker", "--loglevel", level]
    argv += ["--web-host", web_host, "--web-port", str(web_port)] if web else ["--without-web"]
    sys.argv = ["streameval-worker", *argv]  # faust's command line reads sys.argv
    app.main()
