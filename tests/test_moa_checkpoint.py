"""A worker's checkpoint carries MOA models (Java serialisation inside the signed pickle).

A worker evaluating ``moa:`` learners is SIGKILLed right after one of its regular
checkpoints is on the checkpoints topic; a second worker restores the stream from that
checkpoint and finishes it. Its results must be those of an uninterrupted in-process run
(``evaluate``), number for number: the restored MOA models predicted what the
uninterrupted ones did.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule

# a SIGKILLed worker, MOA in a JVM
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.faults, pytest.mark.moa]

KEY = {"STREAMEVAL_CHECKPOINT_KEY": "moa-checkpoint-test-" + "k" * 24}
LEARNERS = ["moa:NaiveBayes", "ta:moa:HoeffdingTree[g=50]", "nb"]


def _comparable(results: dict) -> dict:
    """Everything but the stream id and the timings."""
    out = copy.deepcopy(results)
    for key in ("runtime", "ingest", "stream", "curves"):
        out.pop(key, None)
    out["config"].pop("stream")
    return out


def _last_checkpoint(settings: KafkaSettings, topic: str, deadline: float, alive) -> int:
    """Wait until a complete checkpoint numbered 3 or more is on ``topic``; its number."""
    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"w-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        while time.monotonic() < deadline:
            assert alive(), "the worker died"
            msg = consumer.poll(0.05)
            if msg is None or msg.error() or msg.value() is None:
                continue
            value = json.loads(msg.value())
            if value.get("id", 0) >= 3 and value.get("part") == value.get("parts", 0) - 1:
                return int(value["id"])
        raise TimeoutError("no third checkpoint")
    finally:
        consumer.close()


def test_a_restored_worker_continues_moa_learners_exactly(
    kafka_settings: KafkaSettings, data_dir: Path, tmp_path: Path
) -> None:
    settings = replace(kafka_settings, topic_prefix=f"moa{uuid.uuid4().hex[:8]}.")
    names = ensure_topics(settings.confluent_config(), 2, prefix=settings.topic_prefix)
    config = ExperimentConfig(
        stream=f"moa-ckpt-{uuid.uuid4().hex[:6]}",
        learners=LEARNERS,
        dataset="electricity",
        limit=2000,
        delay="24",
        window=300,
    )
    dataset, config = prepare(config, data_dir)
    reference = _comparable(evaluate_config(config, data_dir=data_dir))
    events = list(schedule(config, dataset))
    args = ["--checkpoint-every", "300"]
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    first = start_worker(settings, KEY, log_path=tmp_path / "w1.log", extra_args=args)
    second = None
    replayer = threading.Thread(
        target=replay,
        args=(events, settings),
        kwargs={"speed": 2e5, "message_format": PackedMessages(20)},  # ~18 s of stream
        daemon=True,
    )
    replayer.start()
    try:
        topic = TopicNames.for_prefix(settings.topic_prefix).checkpoints
        killed_at = _last_checkpoint(
            settings, topic, time.monotonic() + 300, alive=lambda: first.poll() is None
        )
        first.kill()  # SIGKILL: the checkpoint is all that is left of its models
        first.wait(10)
        second = start_worker(settings, KEY, log_path=tmp_path / "w2.log", extra_args=args)
        replayer.join(300)
        results = waiter.wait(600, alive=lambda: second.poll() is None)
    finally:
        stop_worker(first)
        if second is not None:
            stop_worker(second)
    log = (tmp_path / "w2.log").read_text(errors="replace")
    assert f"restored stream {config.stream} from checkpoint" in log, log[-2000:]
    assert results["runtime"]["restores"] == 1
    assert _comparable(results) == reference
    accuracy = {k: v["accuracy"] for k, v in results["learners"].items()}
    assert accuracy["moa:NaiveBayes"] > 0.6, accuracy
    print(f"killed after checkpoint {killed_at} of {names.checkpoints}; accuracy {accuracy}")
