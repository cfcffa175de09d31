"""The Faust application: one agent over the experiment, feature and label topics.

The three input topics are co-partitioned and keyed by stream id, so the
worker that owns a partition sees a stream's definition, features and labels
together. The agent does no evaluation itself: it hands each message to the
:class:`~streameval.agents.worker.StreamWorker`, and acknowledges messages only after a
checkpoint containing them has been written (manual acks, ``noack``), which is
what lets a restarted worker end with the results of an uninterrupted run.

With a :class:`~streameval.agents.health.BrokerHealth` the agent also waits while the
broker is lost: it takes no new message until the broker answers again, and a
checkpoint runs in a thread (so the web views keep answering ``/health``
during an outage) and is retried until the broker has confirmed every part of
it. One lock keeps the agent, the housekeeping timer and a checkpoint in
progress from touching the runners at the same time.

Time the worker could not read does not count as silence of the input topics
(:class:`~streameval.agents.idle.IdleClock`): the idle clock of the worker (``--idle-timeout``,
after which a stream's queued events pass its other, silent, topic) stops while
the broker is lost and while the consumer group rebalances (a consumer whose
session expired during an outage rejoins its group), starts again at the first
message read afterwards, and does not run while a
checkpoint is written. Otherwise a pause of the broker longer than the idle
timeout releases the merger's queue out of order, and the labels of the events
released ahead of their features are rejected as orphans: a results document
then misses thousands of labels although every message was delivered.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from typing import Any, NoReturn

from streameval.agents import service_log
from streameval.agents.config import KafkaSettings
from streameval.agents.dashboard import register_views
from streameval.agents.health import EXIT_BROKER_LOST, BrokerHealth
from streameval.agents.prometheus import register_metrics_view
from streameval.agents.topics import INPUT_KINDS, TopicNames
from streameval.agents.worker import StreamWorker
from streameval.schemas import MAX_MESSAGE_BYTES

log = logging.getLogger(__name__)


def read_ahead(budget: int | None) -> dict[str, Any]:
    """Faust's read-ahead, sized to the worker's byte budget.

    Messages fetched but not yet handled are in no budget, and a message may be up to
    :data:`~streameval.schemas.MAX_MESSAGE_BYTES`: the agent's buffer holds at most an
    eighth of the budget in such messages (8 at least), and each partition's fetch at most
    a sixty-fourth (1 MiB at least), so the worker's memory exceeds its budget by at most
    about half of it plus the interpreter's own (``docs/reliability.md``, *Memory*).

    >>> read_ahead(512 << 20)
    {'stream_buffer_maxsize': 64, 'consumer_max_fetch_size': 8388608}
    """
    if budget is None:
        return {}
    return {
        "stream_buffer_maxsize": max(8, budget // 8 // MAX_MESSAGE_BYTES),
        "consumer_max_fetch_size": max(MAX_MESSAGE_BYTES, budget // 64),
    }


def create_app(
    settings: KafkaSettings,
    worker: StreamWorker,
    *,
    web_host: str = "127.0.0.1",
    web_port: int = 6066,
    web: bool = False,
    web_bind: str = "127.0.0.1",
    app_id: str = "streameval-worker",
    health: BrokerHealth | None = None,
) -> Any:
    """Build the Faust app around ``worker``; run it with :func:`run_app`.

    The web views listen on ``web_bind`` (loopback unless told otherwise); ``web_host`` is
    only the host name Faust advertises. ``health`` (see :mod:`streameval.agents.health`)
    pauses the agent while the broker is lost.
    """
    import faust

    names = TopicNames.for_prefix(settings.topic_prefix)
    app = faust.App(
        app_id,
        **settings.faust_app_kwargs(
            web_enabled=web,
            web_host=web_host,
            web_port=web_port,
            web_bind=web_bind,
            datadir=tempfile.mkdtemp(prefix="streameval-faust-"),
            Worker=service_worker_class(),
            **read_ahead(worker.pool.limit),
        ),
    )
    kind_of = names.kinds(INPUT_KINDS)
    inputs = app.topic(*kind_of, key_serializer="raw", value_serializer="raw")
    unacked: list[Any] = []
    read: dict[tuple[str, int], int] = {}  # last offset read per input partition (its lag)
    busy = asyncio.Lock()  # the runners: one of agent, timer, checkpoint at a time

    async def broker_back() -> None:
        while health is not None and not health.ok:
            await asyncio.sleep(0.2)

    outages_seen = [health.outages if health is not None else 0]
    rebalances_seen = [0]

    async def save_and_ack() -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        first_failure: float | None = None
        while True:
            await broker_back()
            try:  # in a thread: flushing waits for the broker, the web views must not
                await loop.run_in_executor(None, worker.checkpoint)
                break
            except RuntimeError as exc:
                if worker.publisher.delivery_errors or worker.publisher.fatal or health is None:
                    _give_up(f"outputs could not be delivered: {exc}")
                now = loop.time()
                first_failure = now if first_failure is None else first_failure
                if now - first_failure >= health.timeout:
                    _give_up(
                        f"no checkpoint confirmed by the Kafka broker at {health.bootstrap} "
                        f"for {now - first_failure:.0f} s (broker timeout {health.timeout:.0f} s)",
                        EXIT_BROKER_LOST,
                    )
                health.lost(f"checkpoint not confirmed: {exc}")
                log.warning("checkpoint not confirmed (%s); retrying when the broker answers", exc)
        worker.release.clock.discount(time.monotonic() - started)
        held = worker.parking.held()  # parked events are in no checkpoint: not yet
        keep = []
        for event in unacked:
            msg = event.message
            if (kind_of[msg.topic], msg.partition, msg.offset) in held:
                keep.append(event)
            else:
                event.ack()
        unacked[:] = keep

    @app.agent(inputs)
    async def ingest(stream: Any) -> None:
        async for event in stream.noack().events():
            if health is not None and not health.ok:
                await broker_back()
            async with busy:
                msg = event.message
                read[msg.topic, msg.partition] = msg.offset
                worker.handle(kind_of[msg.topic], event.value, msg.key, msg.partition, msg.offset)
                # acknowledged after the next checkpoint, which needs only its position: its
                # bytes (up to 1 MiB) go now, not with thousands of others at the checkpoint
                msg.value = event.value = None
                unacked.append(event)
                if worker.checkpoint_due():
                    await save_and_ack()

    @app.timer(1.0)
    async def housekeeping() -> None:
        if health is not None and not health.ok:
            worker.release.clock.suspend()  # until the first message read after the broker is back
            return
        if health is not None and health.outages != outages_seen[0]:
            outages_seen[0] = health.outages  # an outage shorter than this timer's period
            worker.release.clock.suspend()
        if app.rebalancing or app.rebalancing_count != rebalances_seen[0]:
            rebalances_seen[0] = app.rebalancing_count  # no fetching while the group rebalances
            worker.release.clock.suspend()
        async with busy:
            worker.tick()
            ackable = len(unacked) > worker.parking.n  # more than the parked ones wait
            if (ackable or worker.checkpoints.dirty) and worker.idle_seconds() > 1.0:
                await save_and_ack()

    worker.release.unread = lambda: unread_kinds(consumer_lag(app, read), kind_of)
    register_views(app, worker, health)  # /dashboard, /api/metrics, /health (GET only)
    register_metrics_view(app, worker, lambda: consumer_lag(app, read))  # /metrics
    app.streameval_worker = worker  # for the dashboard views
    return app


def unread_kinds(lag: dict[tuple[str, int], int], kind_of: dict[str, str]) -> set[str]:
    """The input kinds (features, labels) with messages not yet read on some partition.

    >>> sorted(unread_kinds({("t.labels", 0): 3, ("t.features", 1): 0},
    ...                     {"t.labels": "labels", "t.features": "features"}))
    ['labels']
    """
    return {kind_of[topic] for (topic, _), n in lag.items() if n > 0 and topic in kind_of}


def consumer_lag(app: Any, read: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Messages not yet read on each assigned input partition this worker has read from:
    the partition's high watermark (as last fetched) past the last offset read."""
    from faust.types import TP

    try:
        assigned = app.consumer.assignment()
    except Exception:  # not started, or stopping: no partition to speak of
        return {}
    lag = {}
    for (topic, partition), offset in list(read.items()):
        tp = TP(topic, partition)
        if tp not in assigned:
            read.pop((topic, partition), None)  # given to another worker
            continue
        try:
            high = app.consumer.highwater(tp)
        except Exception:  # not fetched yet
            continue
        if isinstance(high, int):
            lag[topic, partition] = max(0, high - offset - 1)
    return lag


def service_worker_class() -> type:
    """Faust's worker as a service runs it: the logging of ``streameval worker``
    (:mod:`streameval.agents.service_log`) kept as configured, no spinner (its escape
    sequences) unless on a terminal, and a ``ready`` event once it has started."""
    import faust

    class ServiceWorker(faust.Worker):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["override_logging"] = False
            super().__init__(*args, **kwargs)
            if not _is_tty(self.spinner.file if self.spinner else None):
                self.spinner = None

        async def on_startup_finished(self) -> None:
            await super().on_startup_finished()
            conf = self.app.conf
            web = f"{conf.web_bind}:{conf.web_port}" if conf.web_enabled else None
            service_log.event("ready", web=web, message="streameval worker ready")

    return ServiceWorker


def _is_tty(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def _give_up(message: str, code: int = 1) -> NoReturn:
    """Exit now, without acknowledging anything: a restart resumes from the last checkpoint.

    ``code`` is :data:`~streameval.agents.health.EXIT_BROKER_LOST` when the broker timeout ran out,
    as when the broker monitor gives up.
    """
    print(f"streameval worker: {message}; exiting", file=sys.stderr, flush=True)
    os._exit(code)


def run_app(
    app: Any,
    *,
    web: bool,
    web_host: str,
    web_port: int,
    web_bind: str = "127.0.0.1",
    loglevel: str = "warning",
) -> None:
    """Start the Faust worker in this process (blocks until it stops)."""
    import sys

    level = {"warning": "warn", "critical": "crit"}.get(loglevel.lower(), loglevel.lower())
    quiet = [] if _is_tty(sys.stderr) else ["--quiet"]  # no banner in a log
    argv = [*quiet, "worker", "--loglevel", level]
    web_args = ["--web-host", web_host, "--web-port", str(web_port), "--web-bind", web_bind]
    argv += web_args if web else ["--without-web"]
    sys.argv = ["streameval-worker", *argv]  # faust's command line reads sys.argv
    app.main()
