"""The Kafka pipeline end to end on a real broker (embedded Tansu, testcontainers or configured).

Every test compares against the in-process driver: `run` must give the results JSON of
`evaluate`, number for number, also after a SIGKILL, with bad input around, and with two
streams sharing one worker.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from agents.commands import (
    ResultsWaiter,
    replay_dataset,
    run_through_kafka,
    start_worker,
    stop_worker,
    submit_experiment,
)
from agents.replay import PackedMessages, replay
from agents.topics import TopicNames, ensure_topics
from pipeline.config import ExperimentConfig
from pipeline.evaluate import evaluate, prepare, schedule
from pipeline.report.curves import curves_from_snapshots

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

LEARNERS = ["nochange", "nb", "ta:ht"]


def electricity(stream: str, **kw) -> ExperimentConfig:
    return ExperimentConfig(
        stream=stream,
        learners=LEARNERS,
        dataset="electricity",
        limit=3000,
        delay="48",
        reeval_k=10,
        bins=20,
        window=500,
        **kw,
    )


def comparable(results: dict) -> dict:
    """Everything but the stream id (unique per run) and the timings."""
    r = copy.deepcopy(results)
    r.pop("runtime", None)
    r.pop("ingest", None)
    r.pop("stream")
    r["config"].pop("stream")
    r["config"].pop("snapshot_every", None)
    r.pop("curves", None)  # only runs with --snapshot-every have curves
    return r


@pytest.fixture
def settings(kafka_settings, kafka_prefix):
    s = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(s.confluent_config(), s.partitions, prefix=s.topic_prefix)
    return s


@pytest.fixture(scope="module")
def reference(data_dir):
    return evaluate(electricity("reference"), data_dir=data_dir)


def read_topic(settings, topic: str, idle: float = 1.5) -> list[tuple[bytes, bytes]]:
    """Every message of ``topic`` (plain confluent-kafka), until ``idle`` seconds bring nothing.

    (Tansu's high watermarks count record batches, not records: no use as an end.)
    """
    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"t-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions])
        out = []
        last = time.monotonic()
        while time.monotonic() - last < idle:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            out.append((msg.key(), msg.value()))
            last = time.monotonic()
        return out
    finally:
        consumer.close()


def count_messages(settings, topic: str) -> int:
    return len(read_topic(settings, topic, idle=0.5))


def test_run_gives_the_results_of_evaluate(settings, reference, data_dir) -> None:
    config = electricity(f"elec-{uuid.uuid4().hex[:6]}", snapshot_every=500)
    ran = run_through_kafka(config, settings, data_dir=data_dir)
    assert ran["runtime"]["driver"] == "run"
    assert comparable(ran) == comparable(reference)

    # a user's own consumer (plain confluent-kafka, no project code) finds the documented
    # fields of the metrics topic: stream, learner, n_labelled, ts, kind, metrics{...}
    topic = TopicNames.for_prefix(settings.topic_prefix).metrics
    snapshots = [json.loads(v) for _, v in read_topic(settings, topic)]
    mine = [s for s in snapshots if s["stream"] == config.stream and s["kind"] != "results"]
    assert {s["kind"] for s in mine} == {"periodic", "final"}
    final = {s["learner"]: s for s in mine if s["kind"] == "final"}
    assert set(final) == set(LEARNERS)
    for learner, snap in final.items():
        assert snap["n_labelled"] == 3000
        assert snap["metrics"]["accuracy"] == reference["learners"][learner]["accuracy"]
        assert snap["metrics"]["kappa_per"] == reference["learners"][learner]["kappa_per"]
        assert len(snap["binned"]["accuracy"]) == 22
    periodic = [s for s in mine if s["kind"] == "periodic" and s["learner"] == "nb"]
    assert [s["n_labelled"] for s in periodic] == [500, 1000, 1500, 2000, 2500, 3000]
    # the results' curves are the snapshots the metrics topic carried
    assert ran["curves"] == curves_from_snapshots(mine)
    assert ran["curves"]["n_labelled"] == [500, 1000, 1500, 2000, 2500, 3000]


def test_worker_killed_mid_run_ends_with_identical_results(
    settings, reference, data_dir, tmp_path
) -> None:
    """SIGKILL half-way through the stream (after some checkpoints), restart, compare."""
    dataset, config = prepare(electricity(f"elec-kill-{uuid.uuid4().hex[:6]}"), data_dir)
    names = TopicNames.for_prefix(settings.topic_prefix)
    events = list(schedule(config, dataset))
    half = len(events) // 2
    env = {"STREAMEVAL_CHECKPOINT_KEY": "a-test-key-" + "k" * 20}
    args = ["--checkpoint-every", "300"]
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    first = start_worker(settings, env, log_path=tmp_path / "w1.log", extra_args=args)
    second = None
    try:
        replay(events[:half], settings, message_format=PackedMessages(20))
        deadline = time.monotonic() + 120
        while count_messages(settings, names.checkpoints) < 4:  # a few checkpoints in
            assert first.poll() is None, (tmp_path / "w1.log").read_text()
            assert time.monotonic() < deadline, "no checkpoints were written"
            time.sleep(0.5)
        first.kill()  # SIGKILL: no chance to save or commit anything more
        first.wait(10)
        second = start_worker(settings, env, log_path=tmp_path / "w2.log", extra_args=args)
        replay(events[half:], settings, message_format=PackedMessages(20))
        results = waiter.wait(300, alive=lambda: second.poll() is None)
    finally:
        stop_worker(first)
        if second is not None:
            stop_worker(second)
    log = (tmp_path / "w2.log").read_text()
    assert "checkpoints of 1 stream(s) found" in log, log[-2000:]
    assert f"restored stream {config.stream} from checkpoint" in log, log[-2000:]
    assert comparable(results) == comparable(reference)


def test_bad_input_goes_to_deadletter_and_results_stay_identical(
    settings, reference, data_dir, tmp_path
) -> None:
    _, config = prepare(electricity(f"elec-bad-{uuid.uuid4().hex[:6]}"), data_dir)
    names = TopicNames.for_prefix(settings.topic_prefix)
    key = config.stream.encode()
    producer = Producer(settings.confluent_config())
    bad = [
        (names.features, key, b"this is not json"),
        (names.features, key, b'{"stream": "' + key + b'", "id": "1"}'),  # out of schema
        (names.labels, key, b"[1, 2, 3]"),  # a packed message of non-objects
        (names.features, key, json.dumps(  # a feature the stream does not have
            {"stream": config.stream, "id": "w", "ts": 0.0, "x": {"bogus": 1.0}, "seq": 0}
        ).encode()),
        (names.labels, key, json.dumps(  # a label whose features never come
            {"stream": config.stream, "id": "ghost", "ts": 0.0, "y": "UP", "seq": 0}
        ).encode()),
        (names.features, b"nobody", json.dumps(  # a stream no experiment defines
            {"stream": "nobody", "id": "1", "ts": 0.0, "x": {"a": 1.0}, "seq": 0}
        ).encode()),
    ]
    for topic, k, value in bad:
        producer.produce(topic, value, k)
    producer.flush(10)
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    worker = start_worker(
        settings, {}, log_path=tmp_path / "w.log", extra_args=["--park-timeout", "2"]
    )
    try:
        replay_dataset(settings, config, speed=None, pack=50, progress=False, data_dir=data_dir)
        results = waiter.wait(300, alive=lambda: worker.poll() is None)
        time.sleep(3)  # the parked "nobody" events time out after 2 s
        letters = [json.loads(v) for _, v in read_topic(settings, names.deadletter)]
    finally:
        stop_worker(worker)
    assert comparable(results) == comparable(reference)
    kinds = sorted(d["kind"] for d in letters)
    # not JSON, out of schema, and the three elements of the packed [1, 2, 3]
    assert kinds == ["orphan_label", *["schema"] * 5, "unknown_stream", "wrong_width"]
    for d in letters:
        assert d["reason"] and d["offset"] >= 0 and d["topic"] in (names.features, names.labels)
    assert results["ingest"]["rejected_wrong_width"] == 1
    assert results["ingest"]["rejected_orphan_label"] == 1


def test_two_streams_share_one_worker_without_mixing_state(settings, data_dir, tmp_path) -> None:
    configs = [
        ExperimentConfig(f"elec-{uuid.uuid4().hex[:6]}", ["nochange", "nb"], dataset="electricity",
                         limit=1500, delay="0", window=200),
        ExperimentConfig(f"air-{uuid.uuid4().hex[:6]}", ["majority", "ht"], dataset="airlines",
                         limit=1500, delay="natural", reeval_k=5, bins=4),
    ]
    prepared = [prepare(c, data_dir)[1] for c in configs]
    waiters = [ResultsWaiter(settings, c.stream) for c in prepared]
    for c in prepared:
        submit_experiment(settings, c)
    worker = start_worker(settings, {}, log_path=tmp_path / "w.log")
    try:
        for c in prepared:
            replay_dataset(settings, c, speed=None, pack=100, progress=False, data_dir=data_dir)
        results = [w.wait(300, alive=lambda: worker.poll() is None) for w in waiters]
    finally:
        stop_worker(worker)
    for c, got in zip(configs, results, strict=True):
        assert comparable(got) == comparable(evaluate(c, data_dir=data_dir))
