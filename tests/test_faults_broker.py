"""Broker-side faults: no broker at all, and a replay run twice into the same topics.

* ``streameval run`` against a bootstrap address where nothing listens must fail fast
  (non-zero, within 15 s) and say which address it tried.
* The same replay written twice into the topics of one stream, before its end marker
  (an operator re-running a replay that seemed stuck): the second delivery of every
  instance is rejected by id (``already_labelled``, ``duplicate_label``) into the
  deadletter topic, nothing is counted twice, and the metrics equal ``evaluate``'s. The
  only trace left in the results document is ``counters.feature_updates``: the second
  features of the instances still waiting for their labels count as evolving features
  (identical ones), exactly as the in-process :class:`~pipeline.runner.StreamRunner` does.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_kafka_pipeline import read_topic

from agents.commands import ResultsWaiter, start_worker, stop_worker, submit_experiment
from agents.replay import PackedMessages, replay
from agents.topics import TopicNames, ensure_topics
from pipeline.config import ExperimentConfig
from pipeline.evaluate import evaluate, prepare, schedule
from pipeline.merge import topic_of
from pipeline.runner import StreamRunner

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "127.0.0.1:1"  # nothing listens on port 1


def test_run_without_a_broker_fails_fast_naming_the_address(data_dir: Path) -> None:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": NOWHERE,
        "PYTHONHASHSEED": "0",
        "STREAMEVAL_DATA_DIR": str(data_dir),  # `run` loads the dataset before the broker
    }
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--dataset", "electricity",
           "--limit", "100", "--learner", "nochange", "--no-progress"]  # fmt: skip
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"`streameval run` still running after 60 s: {exc.stderr!r}")
    elapsed = time.monotonic() - start
    tail = done.stderr[-2000:]
    assert done.returncode != 0, tail
    assert elapsed < 15.0, f"took {elapsed:.1f} s: {tail}"
    last = done.stderr.strip().splitlines()[-1]
    assert NOWHERE in last and "KAFKA_BOOTSTRAP_SERVERS" in last, tail
    assert "Traceback" not in done.stderr, tail


# -- a replay run twice --------------------------------------------------------------------------


@pytest.fixture
def settings(kafka_settings, kafka_prefix):
    s = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(s.confluent_config(), s.partitions, prefix=s.topic_prefix)
    return s


def without(results: dict[str, Any], *keys: str) -> dict[str, Any]:
    r = copy.deepcopy(results)
    for key in ("runtime", "ingest", *keys):
        r.pop(key, None)
    r["config"].pop("snapshot_every", None)
    return r


def test_a_replay_run_twice_before_the_end_counts_once(settings, data_dir, tmp_path) -> None:
    config = ExperimentConfig(
        f"twice-{uuid.uuid4().hex[:6]}",
        ["nochange", "nb", "ta:ht"],
        dataset="electricity",
        limit=1000,
        delay="48",
        reeval_k=10,
        bins=5,
        window=200,
    )
    dataset, config = prepare(config, data_dir)
    *body, end = list(schedule(config, dataset))
    names = TopicNames.for_prefix(settings.topic_prefix)

    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    worker = start_worker(settings, {}, log_path=tmp_path / "w.log")
    try:
        for _ in range(2):  # the same replay twice, neither with its end marker ...
            replay(body, settings, message_format=PackedMessages(50))
        replay([end], settings)  # ... which comes once, after both
        results = waiter.wait(300, alive=lambda: worker.poll() is None)
        letters = [json.loads(v) for _, v in read_topic(settings, names.deadletter)]
    finally:
        stop_worker(worker)

    # the in-process twin: the same two deliveries through a StreamRunner
    twin = StreamRunner(config, emit_predictions=False)
    rejected: Counter[str] = Counter()
    for event in [*body, *body]:
        rejected.update(r.kind for r in twin.push(topic_of(event), event)[1])
    for topic in ("features", "labels"):
        rejected.update(r.kind for r in twin.push(topic, end)[1])
    n = config.limit
    assert rejected["duplicate_label"] == n  # every second label
    assert rejected["already_labelled"] + twin.experiment.counters["feature_updates"] == n

    reference = evaluate(config, data_dir=data_dir)
    assert without(results, "counters") == without(reference, "counters")
    assert results["n_labelled"] == n and results["n_instances"] == n
    assert results["counters"] == twin.results()["counters"]
    assert Counter(d["kind"] for d in letters) == rejected
    # (where each record says the event came from: see test_fuzz_ingest.py,
    # test_deadletter_names_the_topic_and_offset_of_the_rejected_event)
    ingest = results["ingest"]
    assert ingest["rejected_duplicate_label"] == n
    assert ingest["rejected_already_labelled"] == rejected["already_labelled"]
    assert ingest["redelivered"] == 0 and ingest["after_end"] == 0
