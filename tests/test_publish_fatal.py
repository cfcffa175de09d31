"""A producer that fails fatally (streameval.agents.publish): reported, never a crash.

An idempotent producer whose broker restarted empty gets ``UNKNOWN_PRODUCER_ID`` and can
produce nothing more: librdkafka raises the fatal error from ``poll`` and ``flush``, and
``Local: Fatal error`` from every ``produce`` after it. The worker must go on taking its
input, count every output from then on as not delivered, answer ``status()`` (``/health``
503 naming the error, never a 500), and refuse its next checkpoint, the error the service
turns into a clean exit. The errors raised here are confluent-kafka's own
``KafkaException(KafkaError(...))``, as the client makes them; the real broker restarted
empty is ``test_health_undelivered.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from streameval.agents.codec import encode
from streameval.agents.dashboard import health_summary
from streameval.agents.publish import Publisher
from streameval.agents.topics import TopicNames
from test_fuzz_ingest import FakeProducer, Harness, _features

UNKNOWN_PRODUCER_ID = KafkaException(
    KafkaError(
        KafkaError.UNKNOWN_PRODUCER_ID,
        "ProduceRequest failed due to unknown producer id: unable to retry",
        fatal=True,
    )
)
REPORTED = "the output producer failed: " + UNKNOWN_PRODUCER_ID.args[0].str()
LOCAL_FATAL = KafkaException(
    KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error")
)


class BrokerForgets(FakeProducer):
    """Delivers (keeps) every message until :meth:`forget`, then fails as librdkafka does."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False
        self.queued = 0

    def forget(self) -> None:
        self.failed = True
        self.queued = 3  # produced before the failure, never to be delivered

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any = None) -> None:
        if self.failed:
            raise LOCAL_FATAL
        super().produce(topic, value, key, on_delivery)

    def poll(self, timeout: float = 0.0) -> int:
        if self.failed:
            raise UNKNOWN_PRODUCER_ID
        return 0

    def flush(self, timeout: float | None = None) -> int:
        if self.failed:
            raise UNKNOWN_PRODUCER_ID
        return 0

    def __len__(self) -> int:
        return self.queued


def _pair(h: Harness, i: int) -> None:
    h.send("features", _features("s", i))
    h.send(
        "labels", encode({"stream": "s", "id": str(i), "ts": float(i), "y": "a", "seq": 2 * i + 1})
    )


def test_a_fatal_producer_error_makes_the_worker_unhealthy_and_its_checkpoint_refused() -> None:
    twin = Harness(checkpoint_every=10**9)  # the same input, a producer that never fails
    h = Harness(checkpoint_every=10**9)
    h.producer = producer = BrokerForgets()
    h.worker.publisher.producer = producer
    for each in (h, twin):
        each.send("experiments", encode({"stream": "s", "learners": ["nochange"]}), b"s")
        for i in range(5):
            _pair(each, i)
    assert h.worker.healthy and h.worker.status()["undelivered"] is None
    h.worker.checkpoint()  # delivered: the stream is in a checkpoint
    twin.worker.checkpoint()
    assert [m[:2] for m in producer.messages] == [m[:2] for m in twin.producer.messages]
    delivered = len(producer.messages)

    producer.forget()
    for each in (h, twin):
        for i in range(5, 9):  # input still taken: no output of it is delivered
            _pair(each, i)
        each.worker.tick()
    status = h.worker.status()  # answers: /health is a 503, not a 500
    assert not h.worker.healthy and status["healthy"] is False
    assert status["undelivered"] == REPORTED  # polled first, after the first prediction
    lost = len(twin.producer.messages) - delivered
    assert lost == 8 and len(producer.messages) == delivered
    assert status["counts"]["delivery_errors"] == lost
    labelled = [x.worker.runners["s"].experiment.n_labelled for x in (h, twin)]
    assert labelled == [8, 8]  # the last label waits for the join, as the twin's does
    summary = health_summary(status)
    assert summary["healthy"] is False
    assert summary["reason"] == f"{lost} output(s) not delivered; " + REPORTED
    with pytest.raises(RuntimeError, match=r"outputs not delivered \(3 queued\).*unknown producer"):
        h.worker.checkpoint()


def test_a_fatal_error_is_kept_and_later_outputs_are_counted_not_delivered() -> None:
    producer = BrokerForgets()
    publisher = Publisher(producer, TopicNames.for_prefix("p."), counts=Counter())
    producer.forget()
    assert publisher.undelivered() == REPORTED
    with pytest.raises(RuntimeError, match=r"\(3 queued\): the output producer failed"):
        publisher.confirm(1.0)  # nothing produced since: the checkpoint is refused all the same
    publisher.produce("p.metrics", "s", {"a": 1})  # not produced, counted
    assert publisher.counts["delivery_errors"] == 1
    assert publisher.delivery_errors == ["p.metrics: not produced, " + REPORTED]
    assert publisher.flush(1.0) == 3


def test_an_error_that_is_not_fatal_is_raised() -> None:
    class Refuses(FakeProducer):
        def produce(self, *args: Any, **kw: Any) -> None:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"))

    publisher = Publisher(Refuses(), TopicNames.for_prefix("p."), counts=Counter())
    with pytest.raises(KafkaException, match="timed out"):
        publisher.produce("p.metrics", "s", {"a": 1})
    assert publisher.fatal is None
