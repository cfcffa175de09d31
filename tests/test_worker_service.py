"""A worker that speaks like a service, on the embedded broker.

``streameval worker --web --log-format json`` is sent an Electricity stream, a message that
is not JSON, and the rest of the stream once ``/metrics`` has been scraped in the middle
of the replay. ``/metrics`` then shows the documented series of that stream; after the
results its gauges equal the results document, its counters the worker's log and
the deadletter. The worker's stderr is one JSON object per line (no banner, no spinner
escapes) and says when the stream was defined, checkpointed and finished.
"""

from __future__ import annotations

import json
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka_fixtures import wait_until
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import prepare, schedule
from test_dashboard import free_port

pytestmark = [pytest.mark.kafka]

KEY = {"STREAMEVAL_CHECKPOINT_KEY": "service-test-key-" + "k" * 24}
#: The series docs/operations.md documents, by the labels they carry.
PER_LEARNER = ("accuracy", "kappa_per", "kappa_plus", "auc", "pending")
PER_STREAM = ("labels_total", "repredictions_total")
PER_WORKER = ("events_total", "checkpoints_total", "healthy")


def scrape(port: int) -> dict[str, float]:
    """``/metrics`` as ``{'name{labels}': value}`` (comments and blank lines left out)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = response.read().decode("utf-8")
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def paused_events(events: list, at: int, resume: threading.Event) -> Iterator:
    """``events``, waiting (up to 5 minutes) for ``resume`` after the first ``at``."""
    for i, event in enumerate(events):
        if i == at:
            resume.wait(300)
        yield event


def test_metrics_during_a_replay_and_structured_log_lines(
    kafka_settings: KafkaSettings, tmp_path: Path
) -> None:
    settings = replace(kafka_settings, topic_prefix=f"svc{uuid.uuid4().hex[:8]}.")
    ensure_topics(settings.confluent_config(), 2, prefix=settings.topic_prefix)
    names = TopicNames.for_prefix(settings.topic_prefix)
    stream = f"elec-{uuid.uuid4().hex[:6]}"
    config = prepare(
        ExperimentConfig(
            stream, ["nochange", "nb"], dataset="electricity", limit=3000, delay="24",
            reeval_k=10, bins=5,
        )
    )[1]  # fmt: skip
    events = list(schedule(config, prepare(config)[0]))
    port = free_port()
    log_path = tmp_path / "worker.log"
    args = ["--web", "--web-port", str(port), "--log-format", "json", "--checkpoint-every", "1000"]
    worker = start_worker(settings, KEY, log_path=log_path, extra_args=args)
    resume = threading.Event()
    alive = lambda: worker.poll() is None  # noqa: E731
    try:
        wait_until(lambda: _answers(port), 120, "the worker's web server", alive)
        waiter = ResultsWaiter(settings, stream)
        submit_experiment(settings, config)
        bad = Producer(settings.confluent_config())
        bad.produce(names.features, b"not json", stream.encode())
        assert bad.flush(30) == 0
        replaying = threading.Thread(
            target=replay,
            args=(paused_events(events, len(events) // 2, resume), settings),
            kwargs={"message_format": PackedMessages(50)},
        )
        replaying.start()
        series = f'{{learner="nb",stream="{stream}"}}'

        def scored() -> bool:
            return scrape(port).get(f'streameval_labels_total{{stream="{stream}"}}', 0) > 0

        wait_until(scored, 180, "labels scored on /metrics", alive)
        during = scrape(port)
        assert replaying.is_alive()  # paused halfway: this scrape is during the replay
        for name in PER_LEARNER:
            assert f"streameval_{name}{series}" in during, sorted(during)
        for name in PER_STREAM:
            assert f'streameval_{name}{{stream="{stream}"}}' in during, sorted(during)
        for name in PER_WORKER:
            assert f"streameval_{name}" in during, sorted(during)
        assert 0 < during[f'streameval_labels_total{{stream="{stream}"}}'] < 3000
        assert any(k.startswith("streameval_consumer_lag{") for k in during), sorted(during)
        resume.set()
        replaying.join(120)
        results = waiter.wait(300, alive=alive)
        # the stream's last checkpoint follows its results (within a second or so)
        wait_until(lambda: _saved_after_finishing(log_path), 120, "the last checkpoint", alive)
        after = scrape(port)
    finally:
        resume.set()
        stop_worker(worker)
    log = log_path.read_text(errors="replace")
    nb = results["learners"]["nb"]
    for name in ("accuracy", "kappa_per", "kappa_plus", "auc"):
        assert after[f"streameval_{name}{series}"] == pytest.approx(nb[name], rel=1e-9), name
    assert after[f'streameval_labels_total{{stream="{stream}"}}'] == results["n_labelled"] == 3000
    made = results["overhead"]["n_predictions_made"]
    assert made > 0 and after[f'streameval_repredictions_total{{stream="{stream}"}}'] == made
    assert after[f"streameval_pending{series}"] == results["overhead"]["pending"]
    assert after['streameval_deadletters_total{kind="schema"}'] == 1
    assert after["streameval_healthy"] == 1

    assert "\x1b" not in log and "\b" not in log, "escape sequences in a log"
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert lines, log[-2000:]
    ours = [line for line in lines if line.get("stream") == stream]
    said = [line["event"] for line in ours]
    assert said[0] == "defined" and said[-1] == "checkpoint", said
    assert "finished" in said and ours[0]["learners"] == ["nochange", "nb"]
    finished = next(line for line in ours if line["event"] == "finished")
    assert finished["n_labelled"] == 3000 and finished["level"] == "info"
    checkpoints = [line for line in ours if line["event"] == "checkpoint"]
    assert checkpoints and all(line["ts"].endswith("Z") for line in checkpoints)
    assert after["streameval_checkpoints_total"] >= len(checkpoints)
    assert any(line.get("event") == "ready" for line in lines), log[-2000:]
    # every line of the worker's own is JSON: no banner, no spinner, no bare prints
    stray = [line for line in log.splitlines() if line and not line.startswith("{")]
    assert all(line.startswith("streameval worker: ") for line in stray), stray[:5]


def _saved_after_finishing(log_path: Path) -> bool:
    said = [
        json.loads(line).get("event")
        for line in log_path.read_text(errors="replace").splitlines()
        if line.startswith("{")
    ]
    return "finished" in said and "checkpoint" in said[said.index("finished") :]


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
            return True
    except OSError:
        return False
