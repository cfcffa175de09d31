"""``/health`` sees outputs that cannot be delivered (streameval.agents.delivery).

A worker (``--web``) on an embedded broker of its own; mid-run the broker is stopped and
started again on the same port, empty: it answers every probe, but the worker's topics
are gone and nothing the worker produces is delivered. ``/health`` must turn 503 within a
bounded time after the broker answers again (polled, generous deadline), naming the
outputs that are not delivered, while the broker itself is reported reachable.

Which way they are not delivered is the client's race, and both are checked: outputs
that wait (the topics unknown, librdkafka retrying) are named after
:data:`~streameval.agents.delivery.UNDELIVERED_SECONDS`; or the idempotent producer's
next request meets a broker that no longer knows its producer id, a fatal error: then
``/health`` names that error (and the outputs it failed), the worker's next checkpoint is
refused and the worker exits with code 1 and one line saying so (a restart resumes from
its last checkpoint), never with a crash.

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
from typing import Any

import pytest
from kafka_fixtures import wait_until
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


def restart_empty(lost: LostBrokerRun) -> tuple[Any, dict[str, Any], Path]:
    """A worker held from its 2,000th label until the broker answers again, empty; its
    health polled until it is 503 naming outputs not delivered with the broker reachable."""
    # checkpoints only when the input runs dry: a fatal error is reported before the exit
    worker, base, log_path = lost.start_worker("--checkpoint-every", "1000000")
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
    while time.monotonic() - restarted < DEADLINE and worker.poll() is None:
        status, body = get_json(base + "/health")
        broker = (body.get("broker") or {}).get("state")
        seen.append((round(time.monotonic() - restarted, 1), status, broker, body.get("reason")))
        failed = (body.get("counts") or {}).get("delivery_errors")
        if status == 503 and broker == "reachable" and (body.get("undelivered") or failed):
            print(f"\n/health 503 naming undelivered outputs {seen[-1][0]} s after the "
                  f"restart: {body['reason']}")  # fmt: skip
            assert body["status"] == "failing" and body["healthy"] is False
            return worker, body, log_path
        time.sleep(0.1)
    text = log_path.read_text(errors="replace")
    pytest.fail(f"no 503 naming undelivered outputs: {(seen[-10:], worker.poll(), text[-3000:])}")


def exits_refusing_its_checkpoint(worker: Any, failing: dict[str, Any], log_path: Path) -> None:
    """Outputs failed (the producer's fatal error, or failed delivery reports): /health
    names them; the worker exits with code 1 and one line, never a crash."""
    errors = failing["counts"].get("delivery_errors", 0)
    fatal = failing["undelivered"] or ""
    assert fatal.startswith("the output producer failed: ") or errors, failing
    assert fatal in failing["reason"]
    assert not errors or f"{errors} output(s) not delivered" in failing["reason"]
    wait_until(lambda: worker.poll() is not None, 300, "the worker's exit", lambda: True)
    text = log_path.read_text(errors="replace")
    assert worker.returncode == 1, text[-3000:]
    assert "streameval worker: outputs could not be delivered" in text, text[-3000:]
    assert "We experienced a crash" not in text, text[-3000:]


def test_broker_restarted_empty_health_turns_503_naming_undelivered_outputs(run) -> None:
    worker, failing, log_path = restart_empty(run)
    if "waiting undelivered for" not in (failing["undelivered"] or ""):
        exits_refusing_its_checkpoint(worker, failing, log_path)
        return
    assert "waiting undelivered for" in failing["reason"], failing["reason"]
    waited = float(failing["reason"].split("undelivered for ")[1].split(" s")[0])
    assert waited >= UNDELIVERED_SECONDS
