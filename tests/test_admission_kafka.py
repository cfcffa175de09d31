"""Admission by cost on the embedded broker: bombs within every limit never take a worker down.

A ``streameval worker`` with a 512 MiB memory budget is sent generated experiment messages,
each within every single-parameter limit but over budget together (``generated_bombs``),
and beside them one valid Electricity stream. Every bomb is refused to the deadletter with
its estimate and the limit; meanwhile the worker's RSS stays under its budget, ``/health``
answers within 1 s each time it is asked, and the valid stream's results equal ``evaluate``.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from test_admission import generated_bombs
from test_dashboard import free_port
from test_failover import _comparable, _outputs

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEY = {"STREAMEVAL_CHECKPOINT_KEY": "admission-test-key-" + "k" * 24}
BUDGET = 512 << 20


def _rss(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes (``VmRSS`` of /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Watch(threading.Thread):
    """Polls ``/health`` and the worker's RSS until stopped: every answer's time and status."""

    def __init__(self, port: int, pid: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/health"
        self.pid = pid
        self.answers: list[tuple[float, int]] = []
        self.rss: list[int] = []
        self.done = threading.Event()

    def ask(self) -> tuple[float, int]:
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(self.url, timeout=5) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        return time.perf_counter() - start, status

    def run(self) -> None:
        while not self.done.is_set():
            self.answers.append(self.ask())
            self.rss.append(_rss(self.pid))
            time.sleep(0.1)


def _wait_up(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer within {timeout} s"
            time.sleep(0.3)


def test_bombs_within_limits_are_refused_and_the_worker_keeps_serving(
    kafka_settings: KafkaSettings, tmp_path: Path
) -> None:
    settings = replace(kafka_settings, topic_prefix=f"adm{uuid.uuid4().hex[:8]}.")
    ensure_topics(settings.confluent_config(), 2, prefix=settings.topic_prefix)
    topics = TopicNames.for_prefix(settings.topic_prefix)
    tag = uuid.uuid4().hex[:6]
    bombs = [{**b, "stream": f"{b['stream']}-{tag}"} for b in generated_bombs(12)]
    bombs.append({"stream": f"arf-{tag}", "learners": ["nochange", "arf[n_models=10000000]"]})
    valid = prepare(
        ExperimentConfig(
            f"valid-{tag}", ["nochange", "nb", "ta:ht"], dataset="electricity", limit=1500,
            delay="24", window=300, reeval_k=10, bins=10,
        )
    )[1]  # fmt: skip
    reference = _comparable(evaluate_config(valid))
    port = free_port()
    args = ["--web", "--web-port", str(port), "--memory-budget", str(BUDGET)]
    worker = start_worker(settings, KEY, log_path=tmp_path / "worker.log", extra_args=args)
    watch = Watch(port, worker.pid)
    try:
        _wait_up(watch.url, 120)
        watch.start()
        waiter = ResultsWaiter(settings, valid.stream)
        for i, bomb in enumerate(bombs):
            submit_experiment(settings, ExperimentConfig.from_dict(bomb))
            if i == len(bombs) // 2:
                submit_experiment(settings, valid)
        events = list(schedule(valid, prepare(valid)[0]))
        replay(events, settings, speed=None, message_format=PackedMessages(50))
        results = waiter.wait(180, alive=lambda: worker.poll() is None)
        deadline = time.monotonic() + 60
        while True:
            letters = [
                m for m in _outputs(settings, [topics.deadletter], idle=0.5)
                if m.get("kind") == "over_budget"
            ]  # fmt: skip
            if len(letters) >= len(bombs) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        time.sleep(1.0)  # a few more answers after the last refusal
    finally:
        watch.done.set()
        if watch.is_alive():
            watch.join(10)
        stop_worker(worker)
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert _comparable(results) == reference, log[-3000:]
    refused = {m["key"]: m["reason"] for m in letters}
    assert set(refused) == {b["stream"] for b in bombs}, log[-3000:]
    for reason in refused.values():
        assert "needs an estimated" in reason and "over the per-stream memory budget" in reason
    assert len(watch.answers) >= 10
    slowest = max(t for t, _ in watch.answers)
    assert slowest < 1.0, slowest
    assert {status for _, status in watch.answers} == {200}
    assert max(watch.rss) < BUDGET, max(watch.rss)
    rss = max(watch.rss) >> 20
    print(f"/health: {len(watch.answers)} answers, slowest {slowest:.3f} s; max RSS {rss} MiB")
