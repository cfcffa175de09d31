"""The Kafka connection of the Kafka subcommands: its options and the broker check.

Every Kafka subcommand (``run``, ``worker``, ``replay``, ``submit``) takes
``--bootstrap`` and ``--verbose``; the connection's other settings (SASL, SSL)
come from the ``KAFKA_*`` environment variables
(:class:`~streameval.agents.config.KafkaSettings`). A command that needs a running
broker checks it answers before it starts, so a wrong address is said in one line.
"""

from __future__ import annotations

import argparse

from streameval.agents.config import KafkaSettings


def kafka_settings(args: argparse.Namespace) -> KafkaSettings:
    """The Kafka settings of the environment, ``--bootstrap`` first when given."""
    settings = KafkaSettings.from_env()
    if getattr(args, "bootstrap", None):
        settings = settings.with_bootstrap(args.bootstrap)
    return settings


def add_kafka_options(p: argparse.ArgumentParser) -> None:
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


def reach_broker(settings: KafkaSettings, command: str, timeout: float | None = None) -> None:
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


def add_broker_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a worker (or run) that loses its broker reports unhealthy and retries with "
        "backoff; it exits (code 75) after SECONDS without an answer (default: "
        "$STREAMEVAL_BROKER_TIMEOUT, else 120)",
    )
