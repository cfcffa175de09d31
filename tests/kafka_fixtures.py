"""Kafka fixtures for tests marked ``pytest.mark.kafka``.

Import them in ``tests/conftest.py``::

    from kafka_fixtures import kafka_bootstrap, kafka_settings, kafka_prefix  # noqa: F401

``kafka_bootstrap`` (session) picks the broker, first match wins:

1. ``KAFKA_BOOTSTRAP_SERVERS`` -- an existing cluster (security settings from
   the other ``KAFKA_*`` variables, see :mod:`streameval.agents.config`);
2. a testcontainers ``KafkaContainer`` when a Docker engine answers a ping
   within 2 s (``STREAMEVAL_TEST_DOCKER=0`` skips this step);
3. the embedded Tansu broker (:class:`streameval.agents.broker.EmbeddedBroker`).

A broker that fails to start fails the tests that need it; they are never
silently skipped. The broker is shared by every module that imports these
fixtures (reference-counted), so importing them twice does not start two.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from streameval.agents.broker import EmbeddedBroker, wait_for_broker
from streameval.agents.config import KafkaSettings

log = logging.getLogger(__name__)

_shared: dict[str, object] = {}
_users = 0


def docker_available(timeout: float = 2.0) -> bool:
    """True when a Docker engine answers a ping within ``timeout`` seconds."""
    if os.environ.get("STREAMEVAL_TEST_DOCKER", "").strip() == "0":
        return False
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, no permission, timeout: all mean "no Docker"
        return False


def _start() -> tuple[str, contextlib.ExitStack]:
    """Start (or find) a broker; return its bootstrap and the stack that stops it."""
    stack = contextlib.ExitStack()
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if env:
        settings = KafkaSettings.from_env()
        conf = settings.confluent_config()
        bootstrap = conf.pop("bootstrap.servers")
        wait_for_broker(bootstrap, 15.0, config=conf)
        return bootstrap, stack
    if docker_available():
        try:
            from testcontainers.community.kafka import KafkaContainer

            container = stack.enter_context(KafkaContainer())
            return container.get_bootstrap_server(), stack
        except Exception as exc:  # fall back to the embedded broker
            log.warning("testcontainers Kafka did not start (%s); using the embedded broker", exc)
            stack.close()
            stack = contextlib.ExitStack()
    broker = stack.enter_context(EmbeddedBroker())
    return broker.bootstrap, stack


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap ``host:port`` of the test broker (see the module docstring)."""
    global _users
    if not _shared:
        bootstrap, stack = _start()
        _shared.update(bootstrap=bootstrap, stack=stack)
    _users += 1
    try:
        yield str(_shared["bootstrap"])
    finally:
        _users -= 1
        if _users == 0:
            stack = _shared.pop("stack")
            _shared.clear()
            assert isinstance(stack, contextlib.ExitStack)
            stack.close()


@pytest.fixture(scope="session")
def kafka_settings(kafka_bootstrap: str) -> KafkaSettings:
    """:class:`KafkaSettings` for the test broker (environment security settings kept)."""
    return KafkaSettings.from_env().with_bootstrap(kafka_bootstrap)


@pytest.fixture
def kafka_prefix() -> str:
    """A fresh topic prefix per test, so tests never see each other's topics."""
    return f"test-{uuid.uuid4().hex[:10]}."


def run_and_evaluate(config: Any, settings: KafkaSettings) -> tuple[dict, dict]:
    """The results documents of ``run_through_kafka`` (on fresh topics) and of in-process
    ``evaluate_config`` of ``config``, without what only a run through Kafka has (its
    ``runtime`` and ``ingest`` blocks)."""
    from dataclasses import replace

    from streameval.agents.run import run_through_kafka
    from streameval.pipeline.evaluate import evaluate_config

    reference = evaluate_config(config)
    fresh = replace(settings, topic_prefix=f"run-{uuid.uuid4().hex[:8]}.")
    ran = run_through_kafka(config, fresh)
    for doc in (ran, reference):
        for key in ("runtime", "ingest"):
            doc.pop(key, None)
    return ran, reference


def topic_to_end(
    settings: KafkaSettings, topic: str, *, timeout: float = 60.0, idle: float = 1.5
) -> list:
    """Every message of ``topic`` (no consumer group), in order per partition, up to the
    end it had when asked (:func:`~streameval.agents.topics.messages_to_end`)."""
    from confluent_kafka import Consumer, TopicPartition
    from streameval.agents.topics import messages_to_end

    conf = {**settings.confluent_config(), "group.id": f"read-{uuid.uuid4().hex[:8]}"}
    consumer = Consumer({**conf, "enable.auto.commit": False})
    try:
        parts = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {}
        for p in parts:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > 0:
                ends[(topic, p)] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        return list(messages_to_end(consumer, ends, timeout=timeout, idle=idle, what=topic))
    finally:
        consumer.close()


def wait_until(condition: Any, timeout: float, what: str, alive: Any) -> None:
    """Poll ``condition`` until it holds; fail if ``alive()`` turns false (a worker died)
    or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert alive(), f"a worker died while waiting for {what}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.5)
