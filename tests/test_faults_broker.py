"""Broker-side faults: no broker at all, and a replay run twice into the same topics.

* ``streameval run`` against a bootstrap address where nothing listens must fail fast
  (non-zero, within 15 s) and say which address it tried.
* The same replay written twice into the topics of one stream, before its end marker
  (an operator re-running a replay that seemed stuck): the second delivery of every
  instance is rejected by id (``already_labelled``, ``duplicate_label``) into the
  deadletter topic, nothing is counted twice, and the metrics equal ``evaluate``'s. The
  only trace left in the results document is ``counters.feature_updates``: the second
  features of the instances still waiting for their labels count as evolving features
  (identical ones), exactly as the in-process
  :class:`~streameval.pipeline.runner.StreamRunner` does.

The broker lost mid-run (each test on an embedded Tansu broker of its own, which it
pauses with ``SIGSTOP`` -- connections stay open, nothing answers -- or kills):

* paused for 12 s (twice the session timeout, a dozen heartbeats), then resumed: ``/health``
  answers 503 naming the broker during the pause and 200 after, ``/api/metrics`` carries
  the broker state and since when, the log shows each retry with its delay, and the
  results equal ``evaluate``'s, with an idle timeout (8 s) shorter than the pause: no event
  is released out of order because the worker could not read;
* killed, with ``--broker-timeout 10``: the worker exits with code 75 after 10 s (not
  before), naming the address and the timeout;
* paused for longer than ``--broker-timeout 6``: the worker exits; once the broker is back
  a new worker restores the last checkpoint and ends with ``evaluate``'s results.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.request import urlopen

import pytest
from kafka_fixtures import wait_until
from streameval.agents.broker import EmbeddedBroker
from streameval.agents.checkpoint_topic import read_checkpoints
from streameval.agents.config import KafkaSettings
from streameval.agents.health import EXIT_BROKER_LOST, PROBE_TIMEOUT
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.merge import topic_of
from streameval.pipeline.runner import StreamRunner
from test_kafka_pipeline import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.faults]

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "127.0.0.1:1"  # nothing listens on port 1


def test_run_without_a_broker_fails_fast_naming_the_address(data_dir: Path) -> None:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": NOWHERE,
        "STREAMEVAL_DATA_DIR": str(data_dir),  # `run` loads the dataset before the broker
    }
    cmd = [sys.executable, "-m", "streameval.cli", "run", "--dataset", "electricity",
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


def test_run_whose_broker_dies_mid_run_exits_75_after_the_timeout(data_dir: Path) -> None:
    """``run`` evaluates in its own process (streameval.agents.inline) and watches its broker as the
    worker does: killed mid-run, the run exits with 75 after ``--broker-timeout``."""
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "STREAMEVAL_DATA_DIR": str(data_dir),
        }
        cmd = [sys.executable, "-m", "streameval.cli", "run", "--dataset", "electricity",
               "--learner", "nochange", "--speed", "20000", "--broker-timeout", "6",
               "--no-progress"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(12)  # imports, topics, replay under way (~45 s of replay at this speed)
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            os.kill(broker.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            rc = proc.wait(40)
            elapsed = time.monotonic() - killed_at
            err = proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert rc == EXIT_BROKER_LOST, err[-3000:]
    assert 6.0 <= elapsed < 20.0, f"exited {elapsed:.1f} s after the broker died: {err[-2000:]}"
    # librdkafka's own threads may still log a line after it: look for it, not at the end
    said = [line for line in err.splitlines() if line.startswith("streameval run: ")]
    assert said[0] == f"streameval run: Kafka at {bootstrap} (KAFKA_BOOTSTRAP_SERVERS)", said
    said = said[1:]  # the address it uses, then one line for the broker lost
    assert len(said) == 1, err[-3000:]
    assert said[0].startswith(f"streameval run: the Kafka broker at {bootstrap} has not"), said
    assert "broker timeout 6 s" in said[0], said
    assert said[0].endswith("Run it again once the broker is back."), said
    assert "Traceback" not in err, err[-3000:]


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
    worker = start_worker(settings, {}, log_path=tmp_path / "w.log", extra_args=["--ephemeral"])
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

    reference = evaluate_config(config, data_dir=data_dir)
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


# -- the broker lost mid-run ---------------------------------------------------------------------

PAUSE = 12.0  # seconds: 2 x the session timeout, 12 heartbeats (streameval.agents.config)
IDLE_TIMEOUT = 8.0  # seconds: shorter than the pause
KEY = {"STREAMEVAL_CHECKPOINT_KEY": "broker-faults-" + "k" * 20}


def get_json(url: str) -> tuple[int | None, dict[str, Any]]:
    """(status, JSON body) of a GET; (None, {}) when the worker does not answer in 2 s."""
    try:
        with urlopen(url, timeout=2.0) as resp:
            return resp.status, json.loads(resp.read())
    except HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except (URLError, OSError, ValueError):
        return None, {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LostBrokerRun:
    """An Electricity stream replayed into a broker of its own, and a worker with ``--web``."""

    def __init__(
        self,
        broker: EmbeddedBroker,
        data_dir: Path,
        tmp_path: Path,
        learners: tuple[str, ...] = ("nochange", "nb"),
        limit: int | None = 20_000,
    ) -> None:
        self.broker = broker
        self.settings = replace(
            KafkaSettings.from_env().with_bootstrap(broker.bootstrap),
            topic_prefix=f"lost-{uuid.uuid4().hex[:6]}.",
        )
        ensure_topics(
            self.settings.confluent_config(),
            self.settings.partitions,
            prefix=self.settings.topic_prefix,
        )
        self.config = ExperimentConfig(
            f"lost-{uuid.uuid4().hex[:6]}",
            list(learners),
            dataset="electricity",
            limit=limit,
            delay="48",
            reeval_k=10,
            bins=5,
            window=200,
            snapshot_every=500,
        )
        self.data_dir = data_dir
        dataset, self.config = prepare(self.config, data_dir)
        self.waiter = ResultsWaiter(self.settings, self.config.stream)
        submit_experiment(self.settings, self.config)
        replay(schedule(self.config, dataset), self.settings, message_format=PackedMessages(50))
        self.tmp_path = tmp_path
        self.workers: list[subprocess.Popen] = []

    def start_worker(self, *args: str) -> tuple[subprocess.Popen, str, Path]:
        port = free_port()
        log_path = self.tmp_path / f"worker-{len(self.workers)}.log"
        worker = start_worker(
            self.settings,
            KEY,
            log_path=log_path,
            extra_args=["--web", "--web-port", str(port), "--checkpoint-every", "5000", *args],
        )
        self.workers.append(worker)
        return worker, f"http://127.0.0.1:{port}", log_path

    def wait_labelled(self, base: str, worker: subprocess.Popen, n: int) -> dict[str, Any]:
        """Until the worker has labelled ``n`` instances; its stream's /health entry then."""
        deadline = time.monotonic() + 300  # generous: the machine may be loaded
        while time.monotonic() < deadline and worker.poll() is None:
            _, body = get_json(base + "/health")
            stream = body.get("streams", {}).get(self.config.stream, {})
            if stream.get("n_labelled", 0) >= n:
                return stream
            time.sleep(0.2)
        pytest.fail(f"the worker did not reach {n} labels (rc {worker.poll()})")

    def wait_checkpointed(self, worker: subprocess.Popen) -> None:
        """Until a whole checkpoint of the stream is on the checkpoints topic: what a
        restarted worker resumes from (however long the loaded machine takes to write it)."""
        topic = TopicNames.for_prefix(self.settings.topic_prefix).checkpoints

        def written() -> bool:
            reader, _ = read_checkpoints(self.settings.confluent_config(), topic, timeout=60)
            stream = self.config.stream
            return stream in reader.latest and not reader.missing(stream)

        wait_until(written, 300, "a checkpoint of the stream", lambda: worker.poll() is None)

    def reference(self) -> dict[str, Any]:
        return without(evaluate_config(self.config, data_dir=self.data_dir))

    def close(self) -> None:
        for worker in self.workers:
            stop_worker(worker)
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(self.broker.pid, signal.SIGCONT)  # never leave a stopped broker behind


@pytest.fixture
def lost(data_dir: Path, tmp_path: Path) -> Iterator[LostBrokerRun]:
    with EmbeddedBroker() as broker:
        run = LostBrokerRun(broker, data_dir, tmp_path)
        try:
            yield run
        finally:
            run.close()


@pytest.fixture
def lost_whole(data_dir: Path, tmp_path: Path) -> Iterator[LostBrokerRun]:
    """:func:`lost` on the whole of Electricity: 40,000 labels after the first checkpoint,
    so that the first worker is still at work when the checkpoint is seen on its topic
    (on 20,000, it had once finished before, and the restart had nothing to resume)."""
    with EmbeddedBroker() as broker:
        run = LostBrokerRun(broker, data_dir, tmp_path, limit=None)
        try:
            yield run
        finally:
            run.close()


def test_broker_paused_mid_run_unhealthy_then_resumes_with_identical_results(lost) -> None:
    # an idle timeout shorter than the pause: time the worker cannot read is no silence of
    # the topics (before streameval.agents.app discounted it, the merger's queue was released out of
    # order after a long enough outage and ~2,000 labels were rejected as orphans)
    worker, base, log_path = lost.start_worker("--idle-timeout", str(IDLE_TIMEOUT))
    lost.wait_labelled(base, worker, 4000)
    bootstrap = lost.broker.bootstrap
    paused_at = time.time()
    os.kill(lost.broker.pid, signal.SIGSTOP)
    statuses: list[tuple[float, int | None, dict[str, Any]]] = []
    metrics: list[dict[str, Any]] = []
    while time.time() - paused_at < PAUSE:
        status, body = get_json(base + "/health")
        statuses.append((time.time() - paused_at, status, body))
        _, api = get_json(base + "/api/metrics?since=none")
        if api:
            metrics.append(api["health"])
        time.sleep(0.5)
    os.kill(lost.broker.pid, signal.SIGCONT)
    resumed_at = time.time()
    try:
        results = lost.waiter.wait(180, alive=lambda: worker.poll() is None)
        after, body_after = get_json(base + "/health")
    except BaseException:
        print(log_path.read_text(errors="replace")[-4000:])
        raise
    finally:
        stop_worker(worker)
    log_text = log_path.read_text(errors="replace")

    # unhealthy during the pause, noticed within a few seconds, never a hung web server
    answered = [(t, s, b) for t, s, b in statuses if s is not None]
    assert len(answered) >= len(statuses) - 2, statuses
    unhealthy = [(t, b) for t, s, b in answered if s == 503]
    assert unhealthy and unhealthy[0][0] < 8.0, [(t, s) for t, s, _ in statuses]
    body = unhealthy[-1][1]
    assert body["status"] == "failing" and body["healthy"] is False
    assert bootstrap in body["reason"] and body["broker"]["state"] == "unreachable"
    assert body["broker"]["attempts"] >= 2 and body["broker"]["timeout"] == 120.0
    down = [h for h in metrics if not h["healthy"]]
    assert down and all(h["broker"]["state"] == "unreachable" for h in down)
    # since = when the first failed attempt began: at most one probe timeout before the pause
    assert all(paused_at - PROBE_TIMEOUT - 1 <= h["broker"]["since"] <= resumed_at for h in down)
    # retried with backoff, each attempt logged with its delay; then healthy again
    assert "attempt 1 failed, next in 0.5 s" in log_text, log_text[-3000:]
    assert "attempt 2 failed, next in 1.0 s" in log_text, log_text[-3000:]
    assert "answers again after" in log_text
    assert after == 200 and body_after["broker"]["state"] == "reachable", body_after
    assert body_after["broker"]["outages"] >= 1 and body_after["broker"]["since"] >= paused_at
    # and the results are those of an uninterrupted run: nothing released out of order
    assert results["ingest"]["idle_released"] == 0, (results["ingest"], log_text[-3000:])
    assert results["ingest"].get("rejected_orphan_label", 0) == 0, results["ingest"]
    assert without(results) == lost.reference()


def test_broker_killed_mid_run_worker_exits_after_the_timeout(lost) -> None:
    worker, base, log_path = lost.start_worker("--broker-timeout", "10")
    lost.wait_labelled(base, worker, 4000)
    bootstrap = lost.broker.bootstrap
    killed_at = time.monotonic()
    os.kill(lost.broker.pid, signal.SIGKILL)
    try:
        rc = worker.wait(40)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker still runs 40 s after its broker died, with --broker-timeout 10")
    elapsed = time.monotonic() - killed_at
    text = log_path.read_text(errors="replace")
    assert rc == EXIT_BROKER_LOST, text[-3000:]
    assert 10.0 <= elapsed < 20.0, f"exited {elapsed:.1f} s after the broker died"
    # its last word, on the real stderr (librdkafka's threads may still log after it)
    said = [line for line in text.splitlines() if line.startswith("streameval worker: ")]
    assert said, text[-3000:]
    last = said[-1]
    assert last.startswith(f"streameval worker: the Kafka broker at {bootstrap} has not "), last
    assert "broker timeout 10 s" in last and "--broker-timeout" in last, last
    assert "Traceback" not in text, text[-3000:]


def test_broker_lost_past_the_timeout_a_restart_resumes_identically(lost_whole) -> None:
    lost = lost_whole
    worker, _, log_path = lost.start_worker("--broker-timeout", "6")
    lost.wait_checkpointed(worker)  # the restart below must resume from one
    os.kill(lost.broker.pid, signal.SIGSTOP)
    try:
        rc = worker.wait(30)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker still runs 30 s after its broker stopped answering")
    finally:
        os.kill(lost.broker.pid, signal.SIGCONT)
    text = log_path.read_text(errors="replace")
    assert rc == EXIT_BROKER_LOST, text[-3000:]
    assert "last checkpoints {" in text, text[-2000:]

    second, _, second_log = lost.start_worker()
    try:
        results = lost.waiter.wait(180, alive=lambda: second.poll() is None)
    except BaseException:
        print(second_log.read_text(errors="replace")[-4000:])
        raise
    restored = second_log.read_text(errors="replace")
    assert f"restored stream {lost.config.stream} from checkpoint" in restored, restored[-2000:]
    assert without(results) == lost.reference()


def test_a_checkpoint_id_written_again_after_a_partial_one_is_read_whole(monkeypatch) -> None:
    """A worker that exits while the broker holds only some parts of checkpoint N leaves them
    on the topic; its successor restores N - 1 and writes its own N. That one is read whole
    (not mixed with the stale parts, whose HMAC it does not share) and restores."""
    import random

    import streameval.agents.checkpoint as ckpt
    import streameval.agents.checkpoint_topic as records

    key = b"k" * 32
    monkeypatch.setattr(records, "PART_BYTES", 200)
    rng = random.Random(7)
    states = [rng.randbytes(n) for n in (900, 1500, 900)]  # incompressible
    stale = ckpt.to_messages("s", 5, *ckpt.dumps(states[0], key))
    fresh = ckpt.to_messages("s", 5, *ckpt.dumps(states[1], key))
    same_size = ckpt.to_messages("t", 5, *ckpt.dumps(states[2], key))
    assert 2 < len(stale) == len(same_size) < len(fresh)
    reader = ckpt.CheckpointReader()
    for message in [*stale[:2], *fresh, *[{**m, "stream": "t"} for m in stale[:2]], *same_size]:
        reader.add(message)
    assert reader.load("s", key) == states[1]
    assert reader.load("t", key) == states[2]
