"""``streameval broker``: a local Kafka broker in the foreground, for trying the Kafka commands.

It starts the embedded Tansu broker (:class:`~streameval.agents.broker.EmbeddedBroker`,
memory storage, one node) on ``--port`` or a free loopback port, creates the
pipeline's topics (``$STREAMEVAL_TOPIC_PREFIX``, ``$STREAMEVAL_PARTITIONS``, as ``run``
does), prints the line a second terminal pastes::

    export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:40417

and keeps the broker up until Ctrl-C (or ``SIGTERM``). ``worker``, ``submit``,
``replay`` and any Kafka client (the README's metrics consumer) then attach to
that address. Its topics live in memory: they are gone when it stops.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from typing import Any

#: Seconds between checks that the broker process still runs.
WATCH_INTERVAL = 0.5


def add_broker_command(sub: Any) -> argparse.ArgumentParser:
    """Register ``streameval broker``."""
    p = sub.add_parser(
        "broker",
        help="start a local Kafka broker (embedded Tansu, in memory) and print its address",
        description="Start the embedded Tansu broker in the foreground, create the pipeline's "
        "topics and print `export KAFKA_BOOTSTRAP_SERVERS=HOST:PORT` for a second terminal "
        "(worker, submit, replay, your own consumer). Ctrl-C stops it; its topics live in "
        "memory and go with it.",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="TCP port to listen on (default: a free one, printed)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on and advertise; clients must reach it by this name",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="let librdkafka's own log lines through to stderr",
    )
    p.set_defaults(handler=cmd_broker)
    return p


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, a port that another process already listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ValueError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another "
                "--port, or none for a free one"
            ) from None


def cmd_broker(args: argparse.Namespace) -> int:
    from streameval.agents.broker import EmbeddedBroker
    from streameval.agents.config import KafkaSettings
    from streameval.agents.topics import ensure_topics

    if args.port is not None:
        if not 0 < args.port < 65536:
            raise ValueError(f"--port must be between 1 and 65535, got {args.port}")
        check_port(args.host, args.port)
    base = KafkaSettings.from_env()
    with EmbeddedBroker(host=args.host, port=args.port) as broker:
        settings = base.with_bootstrap(broker.bootstrap)
        names = ensure_topics(
            settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix
        )
        print(f"export KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap}", flush=True)
        print(
            f"streameval broker: Tansu pid {broker.pid} on {broker.bootstrap}, topics "
            f"{names.prefix}* ({settings.partitions} partitions) in memory; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        try:
            while broker.running:
                time.sleep(WATCH_INTERVAL)
        except KeyboardInterrupt:
            print("streameval broker: stopped", file=sys.stderr)
            return 0
        tail = " ".join(broker.log_tail(300).split())
        print(
            f"streameval broker: the broker process exited ({tail or 'no output'})",
            file=sys.stderr,
        )
    from streameval.cli.errors import EXIT_BROKER

    return EXIT_BROKER
