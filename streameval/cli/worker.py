"""The ``streameval worker`` subcommand: its options and the long-running worker.

A worker consumes the experiments, features and labels topics and publishes
predictions, metrics, drift alarms and the deadletter
(:class:`~streameval.agents.worker.StreamWorker` in a Faust app). Its options
bound what it holds (input bytes, the admission budgets of an experiment's
estimated cost) and say how it checkpoints, waits and serves its web views.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streameval.agents.config import KafkaSettings
from streameval.agents.health import EXIT_BROKER_LOST
from streameval.cli.connection import add_broker_timeout, add_kafka_options, kafka_settings
from streameval.cli.source import add_source_options, mapping_from_args, start_source
from streameval.pipeline.memory import MAX_STRING, STREAM_BYTES, WORKER_BYTES


def cmd_worker(args: argparse.Namespace) -> int:
    from streameval.agents.admission import Budget, parse_size
    from streameval.agents.app import create_app, run_app
    from streameval.agents.checkpoint import checkpoint_key
    from streameval.agents.publish import watched_producer
    from streameval.agents.worker import StreamWorker

    settings = kafka_settings(args)
    if settings.embedded:
        raise ValueError(
            "streameval worker needs a broker: set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
            "`streameval run` starts an embedded one for you"
        )
    mapping = mapping_from_args(args)  # the user's own topics, if configured
    key = checkpoint_key(ephemeral=args.ephemeral)  # refused before anything starts
    given = {
        "worker_memory": args.memory_budget,
        "stream_memory": args.stream_memory_budget,
        "stream_work": args.stream_work_budget,
    }
    budget = Budget(**{k: parse_size(v) for k, v in given.items() if v is not None})
    from streameval.agents import service_log

    service_log.configure(args.log_format, args.loglevel)  # one structured line per record
    # broker lost mid-run: unhealthy, retries with backoff, exits after --broker-timeout
    from streameval.agents.health import broker_timeout, watch_broker
    from streameval.agents.topics import TopicNames

    checkpoints: dict[str, int] = {}
    health, monitor = watch_broker(
        settings.confluent_config(),
        broker_timeout(args.broker_timeout),
        describe=lambda: f"last checkpoints {checkpoints}" if checkpoints else "no checkpoint yet",
        topic=TopicNames.for_prefix(settings.topic_prefix).metrics,
    )
    try:
        producer = watched_producer(settings, health)
        worker = StreamWorker(
            settings,
            key=key,
            checkpoint_every=args.checkpoint_every,
            orphan_ttl=args.orphan_ttl,
            idle_timeout=args.idle_timeout,
            park_timeout=args.park_timeout,
            worker_bytes=_size(WORKER_BYTES if args.input_budget is None else args.input_budget),
            stream_bytes=_size(
                STREAM_BYTES if args.stream_input_budget is None else args.stream_input_budget
            ),
            max_string=args.max_string,
            predictions=not args.no_predictions,
            producer=producer,
            budget=budget,
        )
        checkpoints = worker.checkpoints.ids
        restored = _restore(worker, settings)
        if restored is None:
            return EXIT_BROKER_LOST
        print(
            f"streameval worker: {settings.redacted().get('KAFKA_BOOTSTRAP_SERVERS')}, "
            f"checkpoints of {restored} stream(s) found",
            file=sys.stderr,
            flush=True,
        )
        if mapping is not None:
            start_source(settings, mapping)
        app = create_app(
            settings, worker, web=args.web, web_host=args.web_host, web_port=args.web_port,
            web_bind=args.web_bind, health=health,
        )  # fmt: skip
        # the default collector thresholds (not streameval.agents.collection's): a service
        # that runs for days keeps full collections frequent
        run_app(
            app,
            web=args.web,
            web_host=args.web_host,
            web_port=args.web_port,
            web_bind=args.web_bind,
            loglevel=args.loglevel,
        )
    finally:  # a worker that stops (or fails to start) stops watching its broker
        monitor.stop()
    return 0


def _restore(worker: Any, settings: KafkaSettings) -> int | None:
    """Read the checkpoints topic (see ``StreamWorker.restore``); ``None``, said in one
    line, when it cannot be read: a worker that cannot know its streams' state cannot
    serve at all."""
    from confluent_kafka import KafkaException

    from streameval.agents.checkpoint import CheckpointError

    try:
        return worker.restore()
    except (KafkaException, CheckpointError) as exc:
        where = settings.redacted().get("KAFKA_BOOTSTRAP_SERVERS")
        print(
            f"streameval worker: cannot read the checkpoints topic {worker.names.checkpoints} "
            f"at {where}: {exc}; exiting with {EXIT_BROKER_LOST} (try again later)",
            file=sys.stderr,
            flush=True,
        )
        return None


def _size(value: Any) -> int:
    """A byte count from ``512MiB``, ``1.5 GiB`` or a plain number of bytes."""
    from streameval.agents.admission import parse_size

    return parse_size(value)


def _add_budget_options(p: argparse.ArgumentParser) -> None:
    from streameval.agents.admission import STREAM_MEMORY, STREAM_WORK, WORKER_MEMORY, parse_size
    from streameval.pipeline.cost import size_text

    g = p.add_argument_group(
        "admission",
        "an experiment whose estimated cost is over a budget is refused to the deadletter "
        "(kind over_budget, with the estimate and the limit) and its stream is not defined",
    )
    g.add_argument(
        "--memory-budget",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="estimated memory all the worker's streams may hold together (e.g. 4GiB; "
        f"default: $STREAMEVAL_MEMORY_BUDGET, else {size_text(WORKER_MEMORY)})",
    )
    g.add_argument(
        "--stream-memory-budget",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="estimated memory one stream may hold (default: "
        f"$STREAMEVAL_STREAM_MEMORY_BUDGET, else {size_text(STREAM_MEMORY)})",
    )
    g.add_argument(
        "--stream-work-budget",
        type=int,
        default=None,
        metavar="UPDATES",
        help="estimated updates one labelled instance may cost a stream (default: "
        f"$STREAMEVAL_STREAM_WORK_BUDGET, else {STREAM_WORK:,})",
    )


def add_worker_parser(sub: Any) -> None:
    """Add the ``worker`` subcommand to the ``streameval`` parser."""
    p = sub.add_parser(
        "worker",
        help="run a worker: consume experiments, features, labels",
        description="Consume experiments, features and labels; publish predictions, metrics, "
        "drift and deadletter. With a source mapping ([source] or --source-*) it also reads "
        "the user's own two topics and repartitions them into the pipeline's (run it on one "
        "worker per source).",
    )
    add_kafka_options(p)
    add_source_options(p)
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=20_000,
        help="checkpoint a stream's state every N input events (default 20000)",
    )
    p.add_argument(
        "--orphan-ttl",
        type=float,
        default=3600.0,
        help="event-time seconds a label waits for its features (default 3600)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help=(
            "seconds a stream's queued events wait for its other topic: they pass once they "
            "waited that long and the other topic brought nothing of the stream for as "
            "long (counted only while the worker can read; default 30)"
        ),
    )
    p.add_argument(
        "--park-timeout",
        type=float,
        default=60.0,
        help="wall seconds events of an undefined stream wait before the deadletter",
    )
    p.add_argument(
        "--input-budget",
        type=_size,
        default=None,
        metavar="SIZE",
        help="bytes of input events the worker holds in all (parked, queued, orphan labels, "
        "pending features; e.g. 1GiB); an event beyond goes to the deadletter as over_budget "
        f"(default: $STREAMEVAL_INPUT_BUDGET, else {WORKER_BYTES >> 20} MiB)",
    )
    p.add_argument(
        "--stream-input-budget",
        type=_size,
        default=None,
        metavar="SIZE",
        help="bytes of input events one stream holds (its parked events apart) "
        f"(default: $STREAMEVAL_STREAM_INPUT_BUDGET, else {STREAM_BYTES >> 20} MiB)",
    )
    p.add_argument(
        "--max-string",
        type=int,
        default=MAX_STRING,
        metavar="CHARS",
        help="longest string feature value or label; a longer one goes to the deadletter as "
        f"too_long (default {MAX_STRING})",
    )
    p.add_argument(
        "--no-predictions",
        action="store_true",
        help="streams this worker defines make no predictions topic output (metrics, drift "
        "and results only; no test-then-train prediction at each label unless re-evaluation "
        "needs it) (default: off, predictions published)",
    )
    _add_budget_options(p)
    add_broker_timeout(p)
    p.add_argument("--web", action="store_true", help="serve the health/dashboard web views")
    p.add_argument(
        "--ephemeral",
        action="store_true",
        help="run without $STREAMEVAL_CHECKPOINT_KEY: checkpoints signed with a random key, "
        "so a restarted worker cannot resume and replays its streams (default: off, the "
        "key is required)",
    )
    p.add_argument(
        "--web-bind",
        default="127.0.0.1",
        help="address the web views listen on (default 127.0.0.1, loopback; 0.0.0.0 for every "
        "interface)",
    )
    p.add_argument(
        "--web-host",
        default="127.0.0.1",
        help="host name the worker advertises for its web views (not the listening address)",
    )
    p.add_argument("--web-port", type=int, default=6066, help="web port (with --web)")
    p.add_argument(
        "--loglevel",
        default="warning",
        help="log level of the worker and Faust: debug, info, warning, error, critical",
    )
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="stderr lines as `ts level logger event=... key=value` (text) or one JSON object "
        "each (json); streams defined, restored, finished, failed and checkpoints are logged "
        "at any --loglevel (default: $STREAMEVAL_LOG_FORMAT, else text)",
    )
    p.set_defaults(handler=cmd_worker)
