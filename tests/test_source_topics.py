"""The user's own topics, in the user's own layout, evaluated by a worker with a source mapping.

A shop writes orders (nested JSON, keyed by customer, timed by the Kafka timestamp) to a
3-partition topic and chargeback decisions (keyed by order id, hours of event time later,
an ISO time field) to a 2-partition topic, with a few bad records among them. A worker
configured with a ``[source]`` section reads both, and its metric snapshots must equal,
number for number, those of ``evaluate`` on the same rows written as a CSV; every bad
record is in the deadletter topic with its field named; the user's topics are not
written to.
"""

from __future__ import annotations

import importlib.util
import json
import time
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from streameval.agents.config import KafkaSettings
from streameval.agents.mapping import SourceMapping
from streameval.agents.run import start_worker, stop_worker
from streameval.agents.source import PartitionOrder
from streameval.agents.topics import ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.events import FeatureEvent, MetricSnapshot

from streameval.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
N = 1200
LEARNERS = ["nochange", "majority", "nb", "ht", "ta:ht"]
KEY = "source-test-key-" + "k" * 20


def _shop() -> Any:
    spec = importlib.util.spec_from_file_location("orders", ROOT / "docs/examples/orders.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _feature_message(row: dict[str, Any]) -> dict[str, Any]:
    order = {
        "id": row["order_id"],
        "customer": row["order.customer"],
        "amount": row["order.amount"],
        "country": row["order.country"],
        "items": row["order.items"],
    }
    return {"order": order, "channel": row["channel"]}


def _label_message(row: dict[str, Any], iso: Any) -> dict[str, Any]:
    return {"order_id": row["order_id"], "decided_at": iso(row["decided_at"]),
            "outcome": {"chargeback": row["chargeback"]}}  # fmt: skip


SOURCE = """
[source]
features_topic = "{features}"
labels_topic = "{labels}"
stream = "shop"
feature_id = "/order/id"
feature_time = "timestamp"
label_id = "key"
label_time = "/decided_at"
time_format = "iso"
label = "/outcome/chargeback"
exclude = ["order.customer"]
"""


def _produce(settings: KafkaSettings, topics: dict[str, str], rows: list[dict[str, Any]],
             iso: Any) -> int:  # fmt: skip
    producer = Producer({**settings.confluent_config(), "enable.idempotence": True})
    for row in rows:
        value = json.dumps(_feature_message(row)).encode()
        producer.produce(topics["orders"], value, row["order.customer"].encode(),
                         timestamp=_ms(row["created"]))  # fmt: skip
    mid = rows[N // 2]["created"]
    bad_features = [  # missing id, a list for a feature value
        {"order": {"customer": "c01", "amount": 3.0, "country": "NZ", "items": 1},
         "channel": "web"},
        {"order": {"id": "bad1", "customer": "c02", "amount": [3], "country": "NZ",
                   "items": 1}, "channel": "web"},
    ]  # fmt: skip
    for value in bad_features:
        producer.produce(topics["orders"], json.dumps(value).encode(), b"c01",
                         timestamp=_ms(mid))  # fmt: skip
    for row in sorted(rows, key=lambda r: r["decided_at"]):
        value = json.dumps(_label_message(row, iso)).encode()
        producer.produce(topics["chargebacks"], value, row["order_id"].encode(),
                         timestamp=_ms(row["decided_at"]))  # fmt: skip
    no_label = b'{"order_id": "x", "decided_at": "2024-03-02T00:00:00Z"}'
    producer.produce(topics["chargebacks"], no_label, b"o00001x", timestamp=_ms(mid))
    producer.produce(topics["chargebacks"], b"not json at all", b"o00002x", timestamp=_ms(mid))
    assert producer.flush(30) == 0
    return 4  # bad records


def _high_watermarks(settings: KafkaSettings, topic: str) -> list[int]:
    consumer = Consumer({**settings.confluent_config(), "group.id": f"hw-{uuid.uuid4().hex}"})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
             for p in sorted(parts)]  # fmt: skip
    consumer.close()
    return marks


def _read(settings: KafkaSettings, topic: str, until: Any, timeout: float, alive: Any) -> list:
    consumer = Consumer(
        {**settings.confluent_config(), "group.id": f"rd-{uuid.uuid4().hex}",
         "auto.offset.reset": "earliest"}
    )  # fmt: skip
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while not until(got):
            assert time.monotonic() < deadline, f"{topic}: waited {timeout} s; got {len(got)}"
            assert alive(), "the worker died"
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(json.loads(msg.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.kafka
@pytest.mark.slow
def test_a_worker_evaluates_the_users_own_topics_as_evaluate_does_the_csv(
    kafka_settings: KafkaSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop = _shop()
    rows = list(shop.orders(N))
    csv_path = tmp_path / "orders.csv"
    shop.write_csv(csv_path, rows)
    spec = (f"csv:{csv_path}[id=order_id,time=created,label_time=decided_at,"
            "exclude=order.customer]")  # fmt: skip
    snapshot_every = 100
    common = dict(learners=LEARNERS, window=300, snapshot_every=snapshot_every, positive="yes")
    expected: list[MetricSnapshot] = []
    evaluate_config(
        ExperimentConfig(stream="shop", dataset=spec, delay="natural", **common),
        on_output=lambda o: expected.append(o) if isinstance(o, MetricSnapshot) else None,
    )
    periodic = [s.to_dict() for s in expected if s.kind != "final"]
    assert len(periodic) == len(LEARNERS) * (N // snapshot_every)

    prefix = f"src{uuid.uuid4().hex[:6]}."
    settings = replace(kafka_settings, topic_prefix=prefix)
    names = ensure_topics(settings.confluent_config(), settings.partitions, prefix=prefix)
    topics = {"orders": f"{prefix}shop.orders", "chargebacks": f"{prefix}shop.chargebacks"}
    admin = AdminClient(settings.confluent_config())
    for future in admin.create_topics(
        [NewTopic(topics["orders"], 3), NewTopic(topics["chargebacks"], 2)]
    ).values():
        future.result(30)
    n_bad = _produce(settings, topics, rows, shop.iso)
    written = {t: _high_watermarks(settings, t) for t in topics.values()}

    config = tmp_path / "shop.toml"
    config.write_text(SOURCE.format(features=topics["orders"], labels=topics["chargebacks"]))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", settings.bootstrap_servers or "")
    monkeypatch.setenv("STREAMEVAL_TOPIC_PREFIX", prefix)
    submit = ["submit", "--config", str(config), "--window", "300", "--positive", "yes"]
    submit += ["--snapshot-every", str(snapshot_every)]
    assert main(submit + [f"--learner={spec}" for spec in LEARNERS]) == 0
    worker = start_worker(
        settings,
        {"STREAMEVAL_CHECKPOINT_KEY": KEY},
        log_path=tmp_path / "worker.log",
        extra_args=["--config", str(config), "--idle-timeout", "2"],
    )
    alive = lambda: worker.poll() is None  # noqa: E731
    try:
        published = _read(
            settings, names.metrics,
            lambda got: sum(m.get("kind") == "periodic" for m in got) >= len(periodic),
            240, alive,
        )  # fmt: skip
        letters = _read(settings, names.deadletter, lambda got: len(got) >= n_bad, 60, alive)
    finally:
        stop_worker(worker)
    log = (tmp_path / "worker.log").read_text()
    assert f"reading {topics['orders']} and {topics['chargebacks']}" in log, log[-2000:]
    mine = [{k: v for k, v in m.items() if k not in ("seq", "duplicate")}
            for m in published if m.get("kind") == "periodic"]  # fmt: skip
    assert mine == json.loads(json.dumps(periodic))  # number for number, every learner
    reasons = sorted(d["reason"] for d in letters if d["kind"] == "bad_record")
    assert len(reasons) == n_bad, letters
    assert any("/order/id: missing (the instance id)" in r for r in reasons), reasons
    assert any("/order/amount: a list is not a feature value" in r for r in reasons), reasons
    assert any("/outcome/chargeback: missing (the label)" in r for r in reasons), reasons
    assert any(r.startswith("not JSON") for r in reasons), reasons
    assert {t: _high_watermarks(settings, t) for t in topics.values()} == written


def test_partition_order_restores_event_time_across_partitions() -> None:
    order = PartitionOrder([0, 1, 2])
    times = {0: [1.0, 4.0, 9.0], 1: [2.0, 3.0], 2: [5.0]}
    for p, ts in times.items():
        for offset, t in enumerate(ts):
            order.push(p, FeatureEvent("s", f"{p}-{offset}", t, {"a": 1.0}), offset)
    assert [e.ts for e in order.ready()] == [1.0, 2.0, 3.0]  # partition 1 may bring more
    assert order.commit_points() == {0: 1, 1: 2, 2: 0}  # the first offset not passed yet
    order.end(1)  # read to its end: it holds nothing back
    assert [e.ts for e in order.ready()] == [4.0, 5.0]
    assert order.ready() == []  # partition 2 may still bring something earlier than 9
    order.end(2)
    assert [e.ts for e in order.ready()] == [9.0]
    order.push(2, None, 1)  # a dead-lettered message moves the commit point on
    assert order.commit_points() == {0: 3, 1: 2, 2: 2}


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"order": {"id": {"x": 1}, "amount": 1}}, "/order/id: an object, not an id"),
        ({"order": {"id": "a", "amount": 1}, "ts": "yesterday"}, "/ts: 'yesterday' is not"),
        ({"order": {"id": "a"}}, "/order: no feature left"),
    ],
)
def test_mapping_errors_name_the_field(value: dict[str, Any], error: str) -> None:
    mapping = SourceMapping.from_dict(
        {"features_topic": "o", "labels_topic": "c", "label": "/y", "feature_id": "/order/id",
         "feature_time": "/ts", "time_format": "iso", "features": "/order"}
    )  # fmt: skip
    with pytest.raises(ValueError, match=error):
        mapping.feature_event({"ts": "2024-01-01T00:00:00Z", **value}, b"k", None)
    keyed = replace(mapping, feature_id="key")
    with pytest.raises(ValueError, match="/order: a string, not an object"):
        keyed.feature_event({"ts": "2024-01-01T00:00:00Z", "order": "text"}, b"k", None)
    with pytest.raises(ValueError, match="key: the message has no key"):
        keyed.feature_event({"ts": "2024-01-01T00:00:00Z", "order": {"a": 1}}, None, None)


def test_bad_mappings_are_refused_in_one_line() -> None:
    base = {"features_topic": "o", "labels_topic": "c", "label": "/y"}
    for change, error in [
        ({"label_id": "order_id"}, "label_id = 'order_id' is not a JSON pointer or 'key'"),
        ({"time_format": "hours"}, "time_format must be one of ms, s, iso"),
        ({"labels_topic": "o"}, "two topics"),
        ({"colour": "red"}, "unknown key 'colour'"),
    ]:
        with pytest.raises(ValueError, match=error):
            SourceMapping.from_dict({**base, **change})


def test_submit_without_a_dataset_defines_the_sources_stream(tmp_path: Path) -> None:
    from streameval.cli.experiment import config_from_args
    from streameval.cli.kafka import _source_experiment
    from streameval.cli.main import build_parser, settings_schema
    from streameval.cli.settings import parse_args

    config = tmp_path / "shop.toml"
    config.write_text('[source]\nfeatures_topic = "a"\nlabels_topic = "b"\nlabel = "/y"\n')
    parser = build_parser()

    def experiment(*flags: str) -> ExperimentConfig:
        argv = ["submit", "--config", str(config), "--learner", "nb", *flags]
        args = parse_args(parser, settings_schema(parser), argv, environ={})
        return _source_experiment(config_from_args(args), args)

    assert experiment().stream == "a"  # no stream named: the features topic's name
    assert experiment("--source-stream", "shop").stream == "shop"  # a flag beats the file
    with pytest.raises(ValueError, match="name one with --stream-id"):
        experiment("--source-stream", "/region")
    assert experiment("--source-stream", "/region", "--stream-id", "eu").stream == "eu"
    with pytest.raises(ValueError, match="--delay is for replayed datasets"):
        experiment("--delay", "48")
