"""Broker health (streameval.agents.health) without a broker: the monitor's retries, backoff
and timeout.

The probes here are plain functions that fail a given number of times; the real probe
(a metadata request) and a real broker lost mid-run are in ``test_faults_broker.py``.
"""

from __future__ import annotations

import logging
import threading

import pytest
from streameval.agents.health import (
    Backoff,
    BrokerHealth,
    BrokerMonitor,
    QuietWhileLost,
    broker_timeout,
)


class FlakyProbe:
    """Fails ``failures`` times with ``reason``, then answers."""

    def __init__(self, failures: int, reason: str = "Local: Timed out") -> None:
        self.failures = failures
        self.reason = reason
        self.calls: list[float] = []

    def __call__(self, timeout: float) -> str | None:
        self.calls.append(timeout)
        if len(self.calls) <= self.failures:
            return self.reason
        return None


def test_backoff_doubles_up_to_its_cap_and_resets() -> None:
    b = Backoff(0.5, 2.0, 8.0)
    assert [b.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    b.reset()
    assert b.next() == 0.5


def test_timeout_from_option_environment_or_default() -> None:
    assert broker_timeout(None, {}) == 120.0
    assert broker_timeout(None, {"STREAMEVAL_BROKER_TIMEOUT": " 45 "}) == 45.0
    assert broker_timeout(10.0, {"STREAMEVAL_BROKER_TIMEOUT": "45"}) == 10.0
    with pytest.raises(ValueError, match="STREAMEVAL_BROKER_TIMEOUT"):
        broker_timeout(None, {"STREAMEVAL_BROKER_TIMEOUT": "soon"})
    with pytest.raises(ValueError, match="positive"):
        broker_timeout(0.0, {})


def test_monitor_retries_with_backoff_logs_each_attempt_and_recovers(caplog) -> None:
    health = BrokerHealth("k1:9092", timeout=30.0)
    probe = FlakyProbe(failures=3)
    expired: list[BrokerHealth] = []
    monitor = BrokerMonitor(
        health, probe, expired.append, interval=0.01, backoff=Backoff(0.01, 2.0, 0.02)
    )
    seen: list[bool] = []
    with caplog.at_level(logging.WARNING, logger="streameval.agents.health"):
        monitor.start()
        while len(probe.calls) < 6:  # three failures, then healthy probes
            seen.append(health.ok)
            threading.Event().wait(0.002)
        monitor.stop()
        monitor.join(2)
    lines = [r.getMessage() for r in caplog.records]
    assert not expired and health.ok and health.outages == 1
    assert False in seen  # unhealthy while the probe failed
    delays = [line.split("next in ")[1].split(" s")[0] for line in lines if "next in" in line]
    assert delays == ["0.0", "0.0", "0.0"]  # 0.01, 0.02, 0.02 rounded to 0.1 s
    assert [f"attempt {i} failed" in lines[i - 1] for i in (1, 2, 3)] == [True] * 3
    assert all("k1:9092" in line and "Local: Timed out" in line for line in lines[:3])
    assert "answers again" in lines[3] and "3 failed attempt(s)" in lines[3]


def test_monitor_gives_up_after_the_timeout_and_never_before() -> None:
    ticks = [0.0]
    health = BrokerHealth("k1:9092", timeout=10.0, monotonic=lambda: ticks[0])

    def dead(timeout: float) -> str:  # each attempt costs its whole timeout
        ticks[0] += timeout
        return "Connection refused"

    expired: list[float] = []
    monitor = BrokerMonitor(
        health, dead, lambda h: expired.append(h.down_for()), probe_timeout=3.0,
        backoff=Backoff(0.0, 1.0, 0.0),
    )  # fmt: skip
    monitor.run()  # in this thread: returns once expired
    assert expired == [10.0]  # the last probe was cut to the time left: exactly 10 s
    assert health.attempts == 4 and health.reason == "Connection refused"  # 3 + 3 + 3 + 1 s


def test_kafka_error_callback_marks_the_broker_lost_without_counting_an_attempt() -> None:
    from confluent_kafka import KafkaError

    health = BrokerHealth("k1:9092")
    health.on_kafka_error(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert health.ok  # not a lost cluster
    health.on_kafka_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert not health.ok and health.attempts == 0
    assert health.reason is not None and health.reason.startswith("_ALL_BROKERS_DOWN")


def test_client_logs_are_thinned_only_during_an_outage() -> None:
    ticks = [0.0]
    health = BrokerHealth("k1:9092", monotonic=lambda: ticks[0])
    quiet = QuietWhileLost(health, every=30.0)

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("aiokafka.conn", logging.ERROR, __file__, 1, msg, None, None)

    assert all(quiet.filter(record("Unable connect to node %s")) for _ in range(3))
    health.lost("refused")
    passed = []
    for second in range(0, 61, 1):
        ticks[0] = float(second)
        passed += [second] * quiet.filter(record("Unable connect to node %s"))
        passed += [-second] * quiet.filter(record("Failed fetch messages from %s"))
    assert passed == [0, 0, 30, -30, 60, -60]  # one of each message per 30 s
    health.restored()
    assert quiet.filter(record("Unable connect to node %s"))
