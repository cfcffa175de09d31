"""``/health`` sees outputs that cannot be delivered (streameval.agents.delivery).

A worker (``--web``) on an embedded broker of its own; mid-run the broker is stopped and
started again on the same port, empty: it answers every probe, but the worker's topics
are gone and nothing the worker produces is delivered. ``/health`` must turn 503 within a
bounded time after the broker answers again (polled, generous deadline), naming the
outputs that wait undelivered, while the broker itself is reported reachable.

The worker must still be mid-stream when the broker comes back: it is held (``SIGSTOP``)
from the moment it has labelled 2,000 instances until the broker answers again, and its
learner is the slow k-NN, so it still holds prefetched events to evaluate (and outputs
to produce) when it resumes. A worker with nothing left to produce has nothing
undelivered: that is not the case tested here.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from streameval.agents.broker import EmbeddedBroker
from streameval.agents.delivery import UNDELIVERED_SECONDS
from test_faults_broker import LostBrokerRun, get_json

pytestmark = [pytest.mark.kafka, pytest.mark.faults]

DEADLINE = 120.0  # seconds after the restart: polled, generous on a loaded machine


@pytest.fixture
def run(data_dir: Path, tmp_path: Path) -> Iterator[LostBrokerRun]:
    """An Electricity stream replayed into a broker of its own (test_faults_broker)."""
    with EmbeddedBroker() as broker:
        lost = LostBrokerRun(broker, data_dir, tmp_path, learners=("nochange", "knn"))
        try:
            yield lost
        finally:
            lost.close()


def test_broker_restarted_empty_health_turns_503_naming_undelivered_outputs(run) -> None:
    lost = run
    worker, base, log_path = lost.start_worker()
    stream = lost.wait_labelled(base, worker, 2000)
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        assert not stream["finished"], stream  # the case needs work left after the restart
        lost.broker.stop()
        lost.broker.start()  # the same port, no topics, no data
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    restarted = time.monotonic()
    seen: list[tuple[float, int | None, str | None, str | None]] = []
    failing: dict | None = None
    while time.monotonic() - restarted < DEADLINE and worker.poll() is None:
        status, body = get_json(base + "/health")
        broker = (body.get("broker") or {}).get("state")
        seen.append((round(time.monotonic() - restarted, 1), status, broker, body.get("reason")))
        if status == 503 and broker == "reachable" and body.get("undelivered"):
            failing = body
            break
        time.sleep(0.5)
    text = log_path.read_text(errors="replace")
    assert failing is not None, (seen[-10:], worker.poll(), text[-3000:])
    elapsed = seen[-1][0]
    print(f"\n/health 503 naming undelivered outputs {elapsed} s after the restart: "
          f"{failing['reason']}")  # fmt: skip
    assert failing["status"] == "failing" and failing["healthy"] is False
    assert "waiting undelivered for" in failing["reason"], failing["reason"]
    waited = float(failing["reason"].split("undelivered for ")[1].split(" s")[0])
    assert waited >= UNDELIVERED_SECONDS
