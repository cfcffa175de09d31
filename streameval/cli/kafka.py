"""The Kafka subcommands of ``streameval``: run, worker, replay, submit.

``run`` is the main job: it finds a broker (``KAFKA_BOOTSTRAP_SERVERS``, else
an embedded Tansu broker on loopback), creates the topics, submits the
experiment, starts a worker process, replays the dataset, waits for the
worker's results document on the ``metrics`` topic, prints the same tables as
``evaluate`` and writes the same results JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import uuid
from typing import Any

from streameval.agents.config import ENV_FIELDS, SECRET_FIELDS, KafkaSettings
from streameval.agents.health import EXIT_BROKER_LOST
from streameval.agents.run import (
    RESULTS_TIMEOUT,
    replay_dataset,
    run_through_kafka,
    submit_experiment,
)
from streameval.cli.experiment import add_experiment_options
from streameval.cli.settings import EnvSetting
from streameval.cli.settings import options as options_of
from streameval.cli.source import add_source_options, mapping_from_args, start_source
from streameval.pipeline.memory import MAX_STRING, STREAM_BYTES, WORKER_BYTES

log = logging.getLogger(__name__)


def _settings(args: argparse.Namespace) -> KafkaSettings:
    settings = KafkaSettings.from_env()
    if getattr(args, "bootstrap", None):
        settings = settings.with_bootstrap(args.bootstrap)
    return settings


def file_sections() -> dict[str, dict[str, Any]]:
    """The config file's environment-only settings: the Kafka connection and the checkpoint key.

    ``[kafka]`` holds one key per :data:`~streameval.agents.config.ENV_FIELDS` entry,
    named as the :class:`~streameval.agents.config.KafkaSettings` field
    (``bootstrap_servers``, ``sasl_password``, ...); ``[worker] checkpoint_key`` is
    ``STREAMEVAL_CHECKPOINT_KEY``. A file value is
    exported to its variable when the variable is unset, so the environment wins
    and ``KafkaSettings.from_env`` reads both. Secrets are masked in
    ``streameval config show`` as in ``KafkaSettings.redacted``.

    >>> kafka = file_sections()["kafka"]
    >>> kafka["sasl_password"].env, kafka["sasl_password"].secret, kafka["partitions"].kind
    ('KAFKA_SASL_PASSWORD', True, <class 'int'>)
    """
    defaults = {f.name: f.default for f in dataclasses.fields(KafkaSettings)}
    kafka = {
        name: EnvSetting(
            env=var,
            kind=int if name == "partitions" else str,
            default=defaults[name],
            secret=name in SECRET_FIELDS,
        )
        for var, name in ENV_FIELDS.items()
    }
    worker = {"checkpoint_key": EnvSetting(env="STREAMEVAL_CHECKPOINT_KEY", secret=True)}
    return {"kafka": kafka, "worker": worker}


def _add_kafka_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("kafka")
    g.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS; SASL/SSL settings "
        "come from the KAFKA_* environment variables, see the README)",
    )
    g.add_argument(
        "--verbose",
        action="store_true",
        help="let librdkafka's own log lines (every reconnection attempt) through to stderr",
    )


def _reach(settings: KafkaSettings, command: str, timeout: float | None = None) -> None:
    """Wait (up to the broker timeout, at most 15 s) until the cluster answers; else
    :class:`~streameval.agents.broker.BrokerUnavailable` naming the address (exit 75)."""
    from streameval.agents.broker import MAX_PROBE_TIMEOUT, wait_for_broker
    from streameval.agents.health import broker_timeout

    conf = settings.confluent_config()
    bootstrap = conf.pop("bootstrap.servers")
    wait_for_broker(
        bootstrap,
        min(broker_timeout(timeout), MAX_PROBE_TIMEOUT),
        config=conf,
        hint=f"{command} needs a running broker: start one with `streameval broker`, or check "
        "KAFKA_BOOTSTRAP_SERVERS (--bootstrap) and the KAFKA_* security settings",
    )


def _add_broker_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a worker (or run) that loses its broker reports unhealthy and retries with "
        "backoff; it exits (code 75) after SECONDS without an answer (default: "
        "$STREAMEVAL_BROKER_TIMEOUT, else 120)",
    )


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


# -- command handlers ------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from streameval.cli.experiment import config_from_args, print_results, write_outputs

    if not args.stream_id:
        args.stream_id = f"{args.dataset}-{uuid.uuid4().hex[:8]}"
    config = config_from_args(args)
    worker_args = []
    if args.broker_timeout is not None:
        worker_args += ["--broker-timeout", str(args.broker_timeout)]
    if args.dashboard is not None:
        worker_args += ["--web", "--web-host", "127.0.0.1", "--web-port", str(args.dashboard)]
        print(f"dashboard: http://127.0.0.1:{args.dashboard}/dashboard", file=sys.stderr)
    results = run_through_kafka(
        config,
        _settings(args),
        on_broker=_say_broker,
        data_dir=args.data_dir,
        progress=not args.no_progress,
        pack=args.pack,
        speed=args.speed,
        timeout=args.timeout,
        worker_args=worker_args,
        predictions=args.predictions,
        inline=args.dashboard is None,  # the dashboard is served by the Faust worker
        broker_timeout=args.broker_timeout,
    )
    print_results(results)
    write_outputs(results, args)
    return 0


def _say_broker(bootstrap: str, embedded: bool) -> None:
    """``run``'s line naming the broker it uses, so other clients can attach to it."""
    kind = "embedded broker, stops with the run" if embedded else "KAFKA_BOOTSTRAP_SERVERS"
    print(f"streameval run: Kafka at {bootstrap} ({kind})", file=sys.stderr, flush=True)


def cmd_worker(args: argparse.Namespace) -> int:
    from streameval.agents.admission import Budget, parse_size
    from streameval.agents.app import create_app, run_app
    from streameval.agents.checkpoint import checkpoint_key
    from streameval.agents.publish import watched_producer
    from streameval.agents.worker import StreamWorker

    settings = _settings(args)
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

    checkpoints: dict[str, int] = {}
    health, monitor = watch_broker(
        settings.confluent_config(),
        broker_timeout(args.broker_timeout),
        describe=lambda: f"last checkpoints {checkpoints}" if checkpoints else "no checkpoint yet",
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


def cmd_replay(args: argparse.Namespace) -> int:
    from streameval.pipeline.config import ExperimentConfig

    settings = _settings(args)
    if settings.embedded:
        raise ValueError(
            "streameval replay needs KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
            "`streameval broker` starts a local one"
        )
    config = ExperimentConfig(
        stream=args.stream_id or args.dataset,
        learners=["nochange"],
        dataset=args.dataset,
        delay=args.delay,
        limit=args.limit,
    )
    from streameval.pipeline.evaluate import prepare

    prepare(config, args.data_dir)  # a missing dataset is said before the broker is asked
    _reach(settings, "replay", args.broker_timeout)
    stats = replay_dataset(
        settings,
        config,
        speed=None if args.max else args.speed,
        pack=args.pack,
        progress=not args.no_progress,
        data_dir=args.data_dir,
    )
    print(json.dumps(stats.as_dict()))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from streameval.cli.experiment import config_from_args
    from streameval.pipeline.evaluate import prepare

    settings = _settings(args)
    if settings.embedded:
        raise ValueError(
            "streameval submit needs KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
            "`streameval broker` starts a local one"
        )
    config = config_from_args(args)
    if args.dataset is not None:
        _, config = prepare(config, args.data_dir)
    else:
        config = _source_experiment(config, args)
    _reach(settings, "submit", args.broker_timeout)
    submit_experiment(settings, config)
    print(f"experiment for stream {config.stream!r} submitted")
    return 0


def _source_experiment(config: Any, args: argparse.Namespace) -> Any:
    """``config`` over the stream of the source mapping (``submit`` without ``--dataset``)."""
    from streameval.pipeline.config import ExperimentConfig

    mapping = mapping_from_args(args)
    if mapping is None:
        raise ValueError("submit needs --dataset, or a source mapping ([source] or --source-*)")
    stream = args.stream_id or mapping.stream_name
    if stream is None:
        raise ValueError(
            f"the source's stream id is read from {mapping.stream}: name one with --stream-id"
        )
    if args.delay not in ("0", 0):
        raise ValueError("--delay is for replayed datasets: a source's labels come when they come")
    return ExperimentConfig.from_dict({**config.to_dict(), "stream": stream, "delay": "0"})


def register(sub: Any) -> None:
    """Add the Kafka subcommands to the ``streameval`` parser."""
    p = sub.add_parser(
        "run",
        help="the main job: replay a dataset through Kafka and evaluate it in a worker",
        description="Same options as evaluate; runs through Kafka (embedded broker unless "
        "KAFKA_BOOTSTRAP_SERVERS is set) and writes the same results JSON.",
    )
    add_experiment_options(p)
    _add_kafka_options(p)
    p.add_argument(
        "--pack",
        type=int,
        default=200,
        help="events per Kafka message in the replay (1 = one event per message)",
    )
    p.add_argument(
        "--speed",
        type=float,
        default=None,
        help="replay at SPEED times event time (default: as fast as possible)",
    )
    p.add_argument(
        "--dashboard",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the live dashboard of the run's worker on 127.0.0.1:PORT",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=RESULTS_TIMEOUT,
        help="seconds to wait for the worker's results",
    )
    p.add_argument(
        "--predictions",
        action="store_true",
        help="also publish every prediction on the predictions topic (default: off; the "
        "results need none of them and making them costs about a quarter of the worker's time)",
    )
    _add_broker_timeout(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser(
        "worker",
        help="run a worker: consume experiments, features, labels",
        description="Consume experiments, features and labels; publish predictions, metrics, "
        "drift and deadletter. With a source mapping ([source] or --source-*) it also reads "
        "the user's own two topics and repartitions them into the pipeline's (run it on one "
        "worker per source).",
    )
    _add_kafka_options(p)
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
    _add_broker_timeout(p)
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

    p = sub.add_parser("replay", help="write a dataset's feature and label events to Kafka")
    p.add_argument("--dataset", required=True)
    p.add_argument("--delay", default="0")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--stream-id", default=None)
    p.add_argument("--data-dir", default=None)
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--speed", type=float, default=1.0, help="SPEED times event time (default 1: real time)"
    )
    g.add_argument("--max", action="store_true", help="as fast as possible")
    p.add_argument("--pack", type=int, default=1, help="events per message (default 1)")
    p.add_argument("--no-progress", action="store_true")
    _add_kafka_options(p)
    _add_broker_timeout(p)
    p.set_defaults(handler=cmd_replay)

    p = sub.add_parser(
        "submit",
        help="define an experiment on the experiments topic",
        description="Define an experiment: over a dataset (--dataset, replayed with "
        "`streameval replay`), or over the user's own topics (a source mapping, [source] "
        "or --source-*, read by a worker with the same mapping).",
    )
    add_experiment_options(p, outputs=False)  # it writes no results: no --json, --report
    options_of(p)["dataset"].required = False
    add_source_options(p)
    _add_kafka_options(p)
    _add_broker_timeout(p)
    p.set_defaults(handler=cmd_submit)
