"""Broker lifecycle: embedded Tansu start/stop, no orphans, unreachable addresses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from streameval.agents.broker import BrokerUnavailable, EmbeddedBroker, broker_for, wait_for_broker
from streameval.agents.config import KafkaSettings

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.kafka


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _wait_dead(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_unreachable_address_fails_fast_and_names_it() -> None:
    start = time.monotonic()
    with pytest.raises(BrokerUnavailable, match=r"127\.0\.0\.1:1\b") as info:
        wait_for_broker("127.0.0.1:1", timeout=2.0)
    assert time.monotonic() - start < 15.0
    assert "within" in str(info.value)


def test_broker_for_checks_a_configured_cluster() -> None:
    settings = KafkaSettings(bootstrap_servers="127.0.0.1:1")
    start = time.monotonic()
    with (
        pytest.raises(BrokerUnavailable, match=r"127\.0\.0\.1:1"),
        broker_for(settings, timeout=1.5),
    ):
        pass  # pragma: no cover - never reached
    assert time.monotonic() - start < 15.0


def test_embedded_broker_lifecycle() -> None:
    broker = EmbeddedBroker()
    with broker:
        pid = broker.pid
        assert pid is not None and broker.running
        host, port = broker.bootstrap.split(":")
        assert host == "127.0.0.1"
        assert wait_for_broker(broker.bootstrap, timeout=5.0) >= 1
        assert "tansu" in broker.log_tail(10_000).lower()
    assert not broker.running and broker.pid is None
    assert _wait_dead(pid, 1.0)
    broker.stop()  # idempotent
    with pytest.raises(BrokerUnavailable):
        _ = broker.bootstrap
    # the port is free again
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", int(port)))


def test_embedded_broker_stops_on_error() -> None:
    pid = None
    with pytest.raises(RuntimeError, match="boom"), EmbeddedBroker() as broker:
        pid = broker.pid
        raise RuntimeError("boom")
    assert pid is not None and _wait_dead(pid, 2.0)


def test_broker_for_without_cluster_starts_an_embedded_one() -> None:
    with broker_for(KafkaSettings()) as bootstrap:
        assert bootstrap.startswith("127.0.0.1:")
        assert wait_for_broker(bootstrap, timeout=5.0) >= 1
    with pytest.raises(BrokerUnavailable):
        wait_for_broker(bootstrap, timeout=1.0)


def test_failed_start_quotes_the_broker_output() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(BrokerUnavailable) as info:
            EmbeddedBroker(port=port, startup_timeout=5.0).start()
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text and "broker output" in text
    assert "in use" in text.lower()
    assert time.monotonic() - start < 15.0


# A shell starts background jobs with SIGINT ignored, and Python then keeps it ignored;
# the child restores Ctrl-C's default so SIGINT is tested however the suite was launched.
_CHILD = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {repo!r})
    from streameval.agents.broker import EmbeddedBroker
    with EmbeddedBroker() as broker:
        print(broker.pid, flush=True)
        time.sleep(60)
    """
)


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["SIGKILL", "SIGTERM", "SIGINT"]
)
def test_no_orphan_broker_when_the_owner_dies(sig: signal.Signals) -> None:
    """Killed, terminated or interrupted, the owning process never leaves Tansu behind."""
    if sig == signal.SIGKILL and not sys.platform.startswith("linux"):
        pytest.skip("SIGKILL cleanup relies on Linux PR_SET_PDEATHSIG")
    owner = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(repo=str(REPO))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line.strip().isdigit(), owner.stderr.read() if owner.stderr else line
        broker_pid = int(line)
        assert _alive(broker_pid)
        owner.send_signal(sig)
        owner.wait(timeout=30)
        assert _wait_dead(broker_pid, 5.0), f"Tansu pid {broker_pid} survived {sig.name}"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_a_worker_whose_broker_cannot_be_reached_exits_75_in_one_line(tmp_path) -> None:
    """It cannot read its checkpoints, so it cannot serve at all: rc 75 (try again later),
    one line naming the address, no traceback."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "STREAMEVAL_CHECKPOINT_KEY": "unreachable-test-" + "k" * 24,
        "STREAMEVAL_BROKER_TIMEOUT": "300",  # the monitor must not be what ends it
    }
    done = subprocess.run(
        [sys.executable, "-m", "streameval.cli", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 75, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if "cannot read the checkpoints topic" in x]
    assert "127.0.0.1:1" in line and line.endswith("exiting with 75 (try again later)")
