"""The Kafka subcommands of ``streameval``: run, worker, replay, submit.

``run`` is the main job: it finds a broker (``KAFKA_BOOTSTRAP_SERVERS``, else
an embedded Tansu broker on loopback), creates the topics, submits the
experiment, starts a worker process, replays the dataset, waits for the
worker's results document on the ``metrics`` topic, prints the same tables as
``evaluate`` and writes the same results JSON. The ``worker`` subcommand lives
in :mod:`streameval.cli.worker`, the connection options all four share in
:mod:`streameval.cli.connection`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import uuid
from typing import Any

from streameval.agents.collection import collecting_less
from streameval.agents.config import ENV_FIELDS, SECRET_FIELDS, KafkaSettings
from streameval.agents.run import (
    RESULTS_TIMEOUT,
    replay_dataset,
    run_through_kafka,
    submit_experiment,
)
from streameval.cli.connection import (
    add_broker_timeout,
    add_kafka_options,
    kafka_settings,
    reach_broker,
)
from streameval.cli.experiment import add_experiment_options
from streameval.cli.settings import EnvSetting
from streameval.cli.settings import options as options_of
from streameval.cli.source import add_source_options, mapping_from_args
from streameval.cli.worker import add_worker_parser
from streameval.cli.worker import cmd_worker as cmd_worker  # re-exported: a Kafka command

log = logging.getLogger(__name__)


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
        kafka_settings(args),
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


def cmd_replay(args: argparse.Namespace) -> int:
    from streameval.pipeline.config import ExperimentConfig

    settings = kafka_settings(args)
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
    reach_broker(settings, "replay", args.broker_timeout)
    with collecting_less():  # an event per row, each freed at once (agents.collection)
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

    settings = kafka_settings(args)
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
    reach_broker(settings, "submit", args.broker_timeout)
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
    add_kafka_options(p)
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
    add_broker_timeout(p)
    p.set_defaults(handler=cmd_run)

    add_worker_parser(sub)

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
    add_kafka_options(p)
    add_broker_timeout(p)
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
    add_kafka_options(p)
    add_broker_timeout(p)
    p.set_defaults(handler=cmd_submit)
