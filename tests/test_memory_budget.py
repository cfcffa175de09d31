"""A worker under a flood of ~1 MB messages stays within its byte budget, on the embedded broker.

A worker with a 64 MiB budget reads 300 feature messages of an undefined stream (parked
until they time out), then 300 of a defined one, each carrying a ~0.9 MB string, and the
labels of the defined stream. Its resident memory is sampled throughout: it must stay
under its size before the flood plus the budget plus :data:`MARGIN`. What the budget
refuses is dead-lettered as ``over_budget`` with the sizes in the reason, and nothing is
lost: per stream, the events admitted and those dead-lettered add up to those sent. Then
the worker serves an ordinary stream, whose results equal ``evaluate``'s.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka_fixtures import wait_until
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from test_failover import KEY, _comparable, _free_port, _outputs

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.faults]

MIB = 1 << 20
BUDGET = 64 * MIB
N = 300
STRING = 900_000  # characters: a message stays under 1 MiB (and librdkafka's 1e6 bytes)
#: What the worker's memory may exceed its budget by (docs/reliability.md, *Memory*): the
#: messages read ahead (``agents.app.read_ahead``: at most half the budget), the copies of
#: the message being decoded and of the deadletter record being encoded, the allocator's
#: slack.
MARGIN = BUDGET // 2 + 64 * MIB


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class RssSampler(threading.Thread):
    """The largest resident size of a process, sampled every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, _rss(self.pid))
            except (OSError, RuntimeError):
                return
            self.stop.wait(0.05)


def _flood(settings: KafkaSettings, names: Any, stream: str, *, labels: bool) -> None:
    """``N`` feature messages of ``stream`` with a ~0.9 MB string each; or, with ``labels``,
    their labels and the end of the stream."""
    producer = Producer({**settings.confluent_config(), "linger.ms": 5})
    key = stream.encode()
    for i in range(N):
        if labels:
            y = "ab"[i % 3 == 0]
            event = {"stream": stream, "id": str(i), "ts": float(i), "y": y, "seq": 2 * i + 1}
            producer.produce(names.labels, json.dumps(event).encode(), key)
        else:
            x = {"a": float(i % 7), "s": f"{i:06d}" + "x" * STRING}
            event = {"stream": stream, "id": str(i), "ts": float(i), "x": x, "seq": 2 * i}
            producer.produce(names.features, json.dumps(event).encode(), key)
        producer.poll(0)
    if labels:
        end = {"stream": stream, "ts": float(N), "seq": 2 * N, "n_events": 2 * N, "end": True}
        for topic in (names.features, names.labels):
            producer.produce(topic, json.dumps(end).encode(), key)
    assert producer.flush(60) == 0


def _health(port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return {}


def test_a_flood_of_large_strings_stays_within_the_worker_byte_budget(
    kafka_settings: KafkaSettings, tmp_path: Path
) -> None:
    settings = replace(kafka_settings, topic_prefix=f"mb{uuid.uuid4().hex[:8]}.")
    names = ensure_topics(settings.confluent_config(), 4, prefix=settings.topic_prefix)
    big, ghost = f"big-{uuid.uuid4().hex[:4]}", f"ghost-{uuid.uuid4().hex[:4]}"
    args = ["--input-budget", "64MiB", "--stream-input-budget", "64MiB", "--max-string", "1000000"]
    port = _free_port()
    args += ["--park-timeout", "10", "--loglevel", "info", "--web", "--web-port", str(port)]
    worker = start_worker(settings, KEY, log_path=tmp_path / "w.log", extra_args=args)
    alive = lambda: worker.poll() is None  # noqa: E731
    sampler = RssSampler(worker.pid)
    try:
        waiter = ResultsWaiter(settings, big)
        submit_experiment(settings, ExperimentConfig(big, ["nochange", "majority"]))
        wait_until(lambda: "defined:" in (tmp_path / "w.log").read_text(), 120, "the worker", alive)
        time.sleep(1.0)  # what the worker holds once it runs (no fixed wait: a baseline)
        baseline = _rss(worker.pid)
        sampler.start()
        _flood(settings, names, ghost, labels=False)

        def letters() -> list[dict[str, Any]]:
            return _outputs(settings, [names.deadletter], idle=1.0)

        ghost_letters: list[dict[str, Any]] = []

        def ghosts_done() -> bool:  # the parked ones go out after --park-timeout
            ghost_letters[:] = [d for d in letters() if d["key"] == ghost]
            return len(ghost_letters) >= N

        # the parked events hold the worker's budget until they time out: the big stream
        # comes after, so how much of it the budget admits does not depend on timing
        wait_until(ghosts_done, 120, "every event of the undefined stream dead-lettered", alive)
        _flood(settings, names, big, labels=False)
        status: dict[str, Any] = {}

        def features_seen() -> bool:  # every feature event of the big stream queued or refused
            status.update(_health(port))
            counts = status.get("streams", {}).get(big, {})
            return counts.get("waiting", 0) + counts.get("refused", 0) == N

        wait_until(features_seen, 180, "the big stream's features", alive)
        # no label yet: what the worker holds never went beyond its budget
        assert 0 < status["bytes"]["peak"] <= BUDGET, status["bytes"]
        assert status["streams"][big]["bytes_held"] <= BUDGET
        _flood(settings, names, big, labels=True)
        results = waiter.wait(300, alive)
        sampler.stop.set()
        sampler.join()
        # the worker still serves a normal stream
        normal = prepare(
            ExperimentConfig(
                f"ok-{uuid.uuid4().hex[:4]}", ["nochange", "majority", "nb"],
                dataset="electricity", limit=600, delay="24",
            )
        )[1]  # fmt: skip
        waiter = ResultsWaiter(settings, normal.stream)
        submit_experiment(settings, normal)
        replay(list(schedule(normal, prepare(normal)[0])), settings)
        served = waiter.wait(180, alive)
        big_letters = [d for d in letters() if d["key"] == big]
    finally:
        sampler.stop.set()
        stop_worker(worker)
    peak = sampler.peak
    print(f"worker RSS: baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB")
    assert peak - baseline <= BUDGET + MARGIN, (baseline / MIB, peak / MIB)

    # the undefined stream: parked up to its budget, the rest dead-lettered over budget
    kinds = Counter(d["kind"] for d in ghost_letters)
    assert set(kinds) == {"over_budget", "unknown_stream"} and sum(kinds.values()) == N, kinds
    assert kinds["over_budget"] > 0 and kinds["unknown_stream"] > 0  # timed out, parked
    over = next(d for d in ghost_letters if d["kind"] == "over_budget")
    assert re.fullmatch(r"event of id '\d+' not parked: .* bytes: 9006\d\d more .*", over["reason"])
    assert f"exceed its budget of {BUDGET}" in over["reason"], over

    # the defined stream: admitted + dead-lettered == sent, per topic
    assert {d["kind"] for d in big_letters} == {"over_budget"}, Counter(
        d["kind"] for d in big_letters
    )
    refused = Counter("labels" if d["topic"] == names.labels else "features" for d in big_letters)
    ingest = results["ingest"]
    assert ingest["refused"] == len(big_letters)
    assert 0 < refused["features"] < N
    admitted = N - refused["features"]
    assert results["n_instances"] == admitted and N - refused["labels"] == admitted, refused
    assert results["n_labelled"] == admitted, results["counters"]
    label_reasons = {d["reason"] for d in big_letters if d["topic"] == names.labels}
    assert all(r.endswith("whose features were refused (over_budget)") for r in label_reasons)
    assert ingest["bytes_held"] == 0
    assert _comparable(served) == _comparable(evaluate_config(normal))
