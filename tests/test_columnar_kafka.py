"""The Kafka pipeline (per-event core in the worker) against ``evaluate`` on the columnar core."""

from __future__ import annotations

import copy
import uuid
from dataclasses import replace

import pytest
from streameval.agents.run import (
    ResultsWaiter,
    replay_dataset,
    start_worker,
    stop_worker,
    submit_experiment,
)
from streameval.agents.topics import ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def comparable(results: dict) -> dict:
    """Everything but the stream id (unique per run) and the timings."""
    r = copy.deepcopy(results)
    for key in ("runtime", "ingest", "stream", "curves"):
        r.pop(key, None)
    r["config"].pop("stream")
    r["config"].pop("snapshot_every", None)
    return r


def test_a_worker_gives_the_columnar_results_of_evaluate(
    kafka_settings, kafka_prefix, data_dir, tmp_path
) -> None:
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix)
    config = ExperimentConfig(
        f"elec-{uuid.uuid4().hex[:6]}",
        ["nochange", "majority"],
        dataset="electricity",
        limit=3000,
        delay="48",
        window=500,
        fading=0.99,
        snapshot_every=0,  # the columnar core computes the final results only
    )
    reference = evaluate_config(config, data_dir=data_dir)
    assert reference["runtime"]["path"] == "columnar"
    prepared = prepare(config, data_dir)[1]
    waiter = ResultsWaiter(settings, prepared.stream)
    submit_experiment(settings, prepared)
    worker = start_worker(settings, {}, log_path=tmp_path / "w.log", extra_args=["--ephemeral"])
    try:
        replay_dataset(settings, prepared, speed=None, pack=100, progress=False, data_dir=data_dir)
        got = waiter.wait(300, alive=lambda: worker.poll() is None)
    finally:
        stop_worker(worker)
    assert "path" not in got.get("runtime", {})  # the worker runs the per-event core
    assert comparable(got) == comparable(reference)
