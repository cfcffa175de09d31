"""Topic creation on a real broker: counts, compaction, idempotence, mismatches."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka_fixtures import kafka_bootstrap, kafka_prefix, kafka_settings  # noqa: F401
from streameval.agents.config import KafkaSettings
from streameval.agents.topics import (
    COMPACTED,
    TOPIC_KINDS,
    TopicError,
    TopicMismatch,
    TopicNames,
    ensure_topics,
)

pytestmark = pytest.mark.kafka


def describe_topics(admin_config: dict[str, Any], prefix: str) -> dict[str, int]:
    """``{topic: partition count}`` of the pipeline topics that exist."""
    md = AdminClient(dict(admin_config)).list_topics(timeout=10.0)
    names = TopicNames.for_prefix(prefix)
    return {name: len(md.topics[name].partitions) for name in names if name in md.topics}


def test_names() -> None:
    names = TopicNames.for_prefix("p.")
    assert list(names) == [f"p.{k}" for k in TOPIC_KINDS]
    assert TopicNames.for_prefix("").features == "features"


def test_bad_layouts_are_refused_before_touching_the_broker() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(TopicError, match="co-partitioned"):
        ensure_topics(conf, {"features": 4, "labels": 2, "default": 4})
    with pytest.raises(TopicError, match="unknown topic kinds"):
        ensure_topics(conf, 4, kinds=["features", "nope"])
    with pytest.raises(TopicError, match=">= 1"):
        ensure_topics(conf, 0)


def test_ensure_topics_creates_checks_and_is_idempotent(
    kafka_settings: KafkaSettings,  # noqa: F811
    kafka_prefix: str,  # noqa: F811
) -> None:
    conf = kafka_settings.confluent_config()
    names = ensure_topics(conf, {"default": 2, "experiments": 1}, prefix=kafka_prefix)
    counts = describe_topics(conf, kafka_prefix)
    assert counts == {name: (1 if name == names.experiments else 2) for name in names}

    admin = AdminClient(conf)
    resources = [ConfigResource("topic", getattr(names, kind)) for kind in COMPACTED]
    for resource, fut in admin.describe_configs(resources).items():
        assert fut.result()["cleanup.policy"].value == "compact", resource
    plain = admin.describe_configs([ConfigResource("topic", names.features)])
    policy = next(iter(plain.values())).result().get("cleanup.policy")
    assert policy is None or policy.value == "delete"

    # idempotent: the same layout again is fine
    assert ensure_topics(conf, {"default": 2, "experiments": 1}, prefix=kafka_prefix) == names
    # a different count for existing topics is refused, naming them
    with pytest.raises(TopicMismatch, match=rf"{kafka_prefix}features has 2 partitions") as info:
        ensure_topics(conf, 3, prefix=kafka_prefix)
    assert "STREAMEVAL_PARTITIONS" in str(info.value)


def test_partially_existing_topics(
    kafka_settings: KafkaSettings,  # noqa: F811
    kafka_prefix: str,  # noqa: F811
) -> None:
    conf = kafka_settings.confluent_config()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(kafka_prefix + "labels", 3, 1)])[kafka_prefix + "labels"].result()
    names = ensure_topics(conf, 3, prefix=kafka_prefix, kinds=["features", "labels"])
    assert describe_topics(conf, kafka_prefix) == {names.features: 3, names.labels: 3}
    with pytest.raises(TopicMismatch, match="labels has 3 partitions, expected 5"):
        ensure_topics(conf, 5, prefix=kafka_prefix, kinds=["labels"])


def test_the_broker_probes_answer_for_a_missing_topic_and_never_create_it(
    kafka_settings: KafkaSettings,  # noqa: F811
    kafka_prefix: str,  # noqa: F811
) -> None:
    """The health monitor's probe and ``wait_for_broker`` ask for a topic's metadata: the
    broker answers for a topic it does not have, and does not create it; a closed port
    fails the probe."""
    import socket

    from streameval.agents.broker import PROBE_TOPIC, wait_for_broker
    from streameval.agents.health import metadata_probe

    config = kafka_settings.confluent_config()
    missing = TopicNames.for_prefix(kafka_prefix).metrics
    assert metadata_probe(config, missing)(5.0) is None  # the broker answers
    assert wait_for_broker(config["bootstrap.servers"], 10.0, config=config) >= 1
    listed = AdminClient(dict(config)).list_topics(timeout=10.0).topics
    assert missing not in listed and PROBE_TOPIC not in listed
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert metadata_probe({"bootstrap.servers": f"127.0.0.1:{port}"}, missing)(1.0)
