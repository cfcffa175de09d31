"""The output producer looks its topics up before the first output (``Publisher.know_topics``).

librdkafka holds a message to a topic it has not looked up until the lookup is answered,
which delayed a stream's results by half a second in some runs. What the producer knows is
read from librdkafka's own statistics (``stats_cb``): a topic appears there, with its
partitions, once the producer has its metadata. The control: a producer that was not told
to look a topic up does not list it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from streameval.agents.config import KafkaSettings
from streameval.agents.publish import Publisher
from streameval.agents.topics import TopicNames, ensure_topics

pytestmark = pytest.mark.kafka


def _known_topics(
    settings: KafkaSettings, ask: Callable[[Publisher], None]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The topics (with their partitions) in the statistics of a fresh output producer
    after ``ask(publisher)``."""
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=prefix)
    stats: list[dict[str, Any]] = []
    producer = Producer(
        {
            **settings.confluent_config(),
            "statistics.interval.ms": 50,
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )
    publisher = Publisher(producer, TopicNames.for_prefix(prefix), Counter())
    ask(publisher)
    stats.clear()  # statistics made from here on show what the producer kept
    deadline = time.monotonic() + 30
    while len(stats) < 2:  # the second is wholly after the lookups
        assert time.monotonic() < deadline, "no statistics from librdkafka within 30 s"
        producer.poll(0.05)
    return {
        name: topic for name, topic in stats[-1]["topics"].items() if name.startswith(prefix)
    }, publisher.topics


def test_the_metrics_topic_is_known_before_the_first_output(kafka_settings: KafkaSettings) -> None:
    known, topics = _known_topics(kafka_settings, lambda p: p.know_topics(("metrics",)))
    assert list(known) == [topics["metrics"]]
    partitions = {p for p in known[topics["metrics"]]["partitions"] if p != "-1"}
    assert len(partitions) == kafka_settings.partitions


def test_every_output_topic_is_known_after_a_worker_start(kafka_settings: KafkaSettings) -> None:
    # what a worker's start calls (StreamWorker.restore): the output positions, then the lookups
    known, topics = _known_topics(
        kafka_settings, lambda p: p.start(kafka_settings.confluent_config())
    )
    assert sorted(known) == sorted(topics.values())


def test_a_producer_not_told_knows_no_topic(kafka_settings: KafkaSettings) -> None:
    known, _ = _known_topics(kafka_settings, lambda p: None)
    assert known == {}


class _Unanswered:
    """A producer whose broker does not answer a lookup (as confluent-kafka raises it)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.asked.append(str(topic))
        raise KafkaException("Local: Broker transport failure")


def test_a_broker_that_does_not_answer_only_leaves_the_lookup_for_later() -> None:
    producer = _Unanswered()
    publisher = Publisher(producer, TopicNames.for_prefix("t."), Counter())
    publisher.know_topics(timeout=0.01)
    # the cluster's metadata first (the producer's id: agents.first_delivery), then each topic
    assert producer.asked == ["None", "t.predictions", "t.metrics", "t.drift"]
