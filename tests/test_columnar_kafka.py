"""The Kafka worker on the columnar core against ``evaluate`` on the columnar core.

* the two baselines with window and fading;
* learners that read the features (``nb``, ``ht``, ``ta:ht``), a positive class (AUC),
  periodic snapshots: the results document with its curves, and every metric snapshot the
  worker published, equal ``evaluate``'s;
* a worker SIGKILLed half-way: another one restores the stream from its checkpoint (a
  columnar experiment) and finishes it with ``evaluate``'s results.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka_fixtures import topic_to_end, wait_until
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import (
    ResultsWaiter,
    replay_dataset,
    start_worker,
    stop_worker,
    submit_experiment,
)
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.events import MetricSnapshot

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEY = {"STREAMEVAL_CHECKPOINT_KEY": "columnar-kafka-test-key-" + "k" * 20}


def comparable(results: dict) -> dict:
    """Everything but the stream id (unique per run) and the timings."""
    r = copy.deepcopy(results)
    for key in ("runtime", "ingest", "stream"):
        r.pop(key, None)
    r["config"].pop("stream")
    return r


def through_a_worker(
    settings: KafkaSettings, config: ExperimentConfig, data_dir: Path, tmp_path: Path
) -> dict[str, Any]:
    """``config`` replayed to a fresh ``streameval worker``; its results document."""
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix)
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    worker = start_worker(settings, KEY, log_path=tmp_path / "w.log")
    try:
        replay_dataset(settings, config, speed=None, pack=100, progress=False, data_dir=data_dir)
        return waiter.wait(300, alive=lambda: worker.poll() is None)
    finally:
        stop_worker(worker)


def test_a_worker_gives_the_columnar_results_of_evaluate(
    kafka_settings, kafka_prefix, data_dir, tmp_path
) -> None:
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    config = ExperimentConfig(
        f"elec-{uuid.uuid4().hex[:6]}",
        ["nochange", "majority"],
        dataset="electricity",
        limit=3000,
        delay="48",
        window=500,
        fading=0.99,
        snapshot_every=500,
    )
    reference = evaluate_config(config, data_dir=data_dir)
    assert reference["runtime"]["path"] == "columnar"
    got = through_a_worker(settings, prepare(config, data_dir)[1], data_dir, tmp_path)
    assert got["runtime"]["path"] == "columnar"  # the worker runs the columnar core too
    assert comparable(got) == comparable(reference)


def test_learners_that_read_features_give_evaluates_results_and_snapshots(
    kafka_settings, kafka_prefix, data_dir, tmp_path
) -> None:
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    config = prepare(
        ExperimentConfig(
            f"elec-{uuid.uuid4().hex[:6]}", ["nochange", "nb", "ht", "ta:ht"],
            dataset="electricity", limit=3000, delay="48", window=500, fading=0.99,
            snapshot_every=400,
        ),
        data_dir,
    )[1]  # fmt: skip
    assert config.positive is not None  # the prequential AUC too
    outputs: list[Any] = []
    reference = evaluate_config(config, data_dir=data_dir, on_output=outputs.append)
    assert reference["runtime"]["path"] == "columnar"
    got = through_a_worker(settings, config, data_dir, tmp_path)
    assert got["runtime"]["path"] == "columnar"
    assert comparable(got) == comparable(reference)
    assert len(got["curves"]["n_labelled"]) == 3000 // 400 + 1
    names = TopicNames.for_prefix(settings.topic_prefix)
    published = [json.loads(m.value()) for m in topic_to_end(settings, names.metrics)]
    snapshots = [m for m in published if m.get("kind") in ("periodic", "final")]
    expected = [
        json.loads(json.dumps(o.to_dict())) for o in outputs if isinstance(o, MetricSnapshot)
    ]
    assert len(expected) == 4 * (3000 // 400 + 1)
    assert [{k: v for k, v in m.items() if k != "seq"} for m in snapshots] == expected


@pytest.mark.faults
def test_a_killed_workers_columnar_stream_is_restored_from_its_checkpoint(
    kafka_settings, kafka_prefix, data_dir, tmp_path
) -> None:
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix)
    names = TopicNames.for_prefix(settings.topic_prefix)
    config = prepare(
        ExperimentConfig(
            f"elec-{uuid.uuid4().hex[:6]}", ["majority", "nb", "ta:ht"], dataset="electricity",
            limit=3000, delay="96", window=300, snapshot_every=500,
        ),
        data_dir,
    )[1]  # fmt: skip
    reference = evaluate_config(config, data_dir=data_dir)
    args = ["--checkpoint-every", "400", "--loglevel", "info"]
    first = start_worker(settings, KEY, log_path=tmp_path / "a.log", extra_args=args)
    second = None
    waiter = ResultsWaiter(settings, config.stream)
    events = list(schedule(config, prepare(config, data_dir)[0]))
    span = events[-1].ts - events[0].ts
    replayer = threading.Thread(
        target=replay,  # ~20 s of wall time for the whole stream
        args=(events, settings),
        kwargs={"speed": span / 20.0, "message_format": PackedMessages(20)},
        daemon=True,
    )
    try:
        submit_experiment(settings, config)
        replayer.start()

        def checkpointed() -> bool:  # a regular checkpoint, past the one of the definition
            records = topic_to_end(settings, names.checkpoints, idle=0.5)
            return any(
                (v := json.loads(m.value())).get("stream") == config.stream and v.get("id", 0) >= 2
                for m in records
                if m.value() is not None
            )

        wait_until(checkpointed, 120, "a regular checkpoint", lambda: first.poll() is None)
        assert replayer.is_alive(), "the stream ended before the kill: pace the replay slower"
        first.kill()  # SIGKILL: no last checkpoint, no commit
        first.wait(10)
        second = start_worker(settings, KEY, log_path=tmp_path / "b.log", extra_args=args)
        replayer.join(120)
        got = waiter.wait(300, alive=lambda: second.poll() is None)
    finally:
        for worker in (first, second):
            if worker is not None:
                stop_worker(worker)
    log = (tmp_path / "b.log").read_text(errors="replace")
    assert f"restored stream {config.stream} from checkpoint" in log
    assert got["runtime"]["restores"] == 1 and got["runtime"]["path"] == "columnar"
    assert comparable(got) == comparable(reference)
