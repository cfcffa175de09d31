"""One run's stream evaluated in the ``run`` process itself, read by a plain consumer.

``streameval worker`` is the deployable service: a Faust app in a consumer group
(:mod:`streameval.agents.app`) that evaluates every stream of its partitions, checkpoints,
and survives restarts. ``streameval run`` serves a single stream that ends with
the run, and for that the Faust worker costs more than the evaluation of a
small stream: a second interpreter, Faust's start-up and the consumer-group join
take 5.6-6.5 s of a 12 s Electricity run in ``make bench`` (target 2).

:func:`consume_stream` feeds the same :class:`~streameval.agents.worker.StreamWorker` from
a plain ``confluent_kafka.Consumer`` in the calling process: the partitions of
the three input topics are *assigned* (no group, so no join and no rebalance),
read from the offsets they had before the run produced anything, and only the
messages keyed by the run's stream are handed over. Everything else -- decoding,
the merge, deduplication, the experiment, the outputs and the results document
on the metrics topic -- is the worker's, as in the Faust app, so both give the
results of ``evaluate`` (``tests/test_kafka_pipeline.py``).

:func:`evaluate_inline` is ``run``'s whole evaluation side: the results waiter, the
progress, and the replay in a child process forked at the start of the run
(:mod:`streameval.agents.replay_process`), or in a thread where this process may not fork.

What it does not do: checkpoint (a run that dies is simply run again) and serve
the dashboard (``run --dashboard`` starts the Faust worker instead). A lost
broker is watched as in the worker (:mod:`streameval.agents.health`): the run exits with
:data:`~streameval.agents.health.EXIT_BROKER_LOST` after the broker timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from streameval.agents.codec import StreamFailed, failure_text
from streameval.agents.collection import collecting_less
from streameval.agents.config import FETCH_SETTINGS, KafkaSettings
from streameval.agents.publish import METADATA_TIMEOUT, watched_producer
from streameval.agents.topics import INPUT_KINDS, TopicNames
from streameval.agents.worker import StreamWorker

#: Messages taken from the consumer per call (its fetches are larger anyway).
BATCH = 1000
#: Seconds between two housekeeping ticks of the worker (idle release, producer callbacks).
TICK = 1.0


def input_offsets(settings: KafkaSettings, timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """The end offset of every partition of the input topics, now (where a new run starts)."""
    from confluent_kafka import Consumer, TopicPartition

    names = TopicNames.for_prefix(settings.topic_prefix)
    consumer = Consumer({**settings.confluent_config(), "group.id": "streameval-run-offsets"})
    try:
        offsets = {}
        for topic in names.kinds(INPUT_KINDS):  # these topics' metadata only, not the broker's
            for partition in consumer.list_topics(topic, timeout=timeout).topics[topic].partitions:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout
                )
                offsets[topic, partition] = max(0, high)
        return offsets
    finally:
        consumer.close()


def consume_stream(
    settings: KafkaSettings,
    worker: StreamWorker,
    stream: str,
    start: dict[tuple[str, int], int],
    *,
    timeout: float,
    failed: Callable[[], BaseException | None] = lambda: None,
    on_message: Callable[[StreamWorker], None] | None = None,
) -> None:
    """Hand ``stream``'s input messages to ``worker`` until it has published its results.

    ``start`` gives the offset of every input partition to read from
    (:func:`input_offsets` before the experiment was submitted). ``failed`` is
    asked between batches whether the producer of the events gave up (its
    exception is then raised here). ``on_message`` is called with ``worker`` after each
    message of the stream (``run``'s progress reads the stream's counts). Raises
    :class:`RuntimeError` as soon as the stream failed (a learner raised: the worker
    stops the stream and publishes no results) and :class:`TimeoutError` when no
    results came within ``timeout`` seconds.
    """
    from confluent_kafka import Consumer, TopicPartition

    names = TopicNames.for_prefix(settings.topic_prefix)
    kind_of = names.kinds(INPUT_KINDS)
    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"streameval-run-{stream}",  # required by librdkafka; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **FETCH_SETTINGS,
        }
    )
    key = stream.encode("utf-8")
    # the results go out as soon as they are made; the metadata comes while the stream is read
    knowing = threading.Thread(
        target=worker.publisher.know_topics, args=(("metrics",),), name="streameval-metadata"
    )
    knowing.start()
    try:
        with collecting_less():  # see streameval.agents.collection
            consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in start.items()])
            deadline = time.monotonic() + timeout
            next_tick = time.monotonic() + TICK
            while stream not in worker.streams.concluded:
                # what has arrived, at once; else wait for the next message (at most 0.2 s):
                # consume(n, t) returns only when n messages are there or t has passed
                batch = consumer.consume(BATCH, 0) or consumer.consume(1, 0.2)
                for msg in batch:
                    if msg.error() is not None or msg.key() != key:
                        continue  # partition ends and errors; other streams' messages
                    worker.handle(
                        kind_of[msg.topic()], msg.value(), msg.key(), msg.partition(), msg.offset()
                    )
                    if on_message is not None:
                        on_message(worker)
                _raise_if_stopped(worker, stream)
                now = time.monotonic()
                if now >= next_tick:
                    worker.tick()
                    next_tick = now + TICK
                    exc = failed()
                    if exc is not None:
                        raise exc
                if now > deadline:
                    raise TimeoutError(f"no results for stream {stream!r} within {timeout:.0f} s")
            worker.publisher.confirm(30.0)
    finally:
        knowing.join(METADATA_TIMEOUT)  # as long as know_topics may wait for the broker
        consumer.close()


def _raise_if_stopped(worker: StreamWorker, stream: str) -> None:
    """:class:`StreamFailed` if ``stream`` failed, or was never defined (over budget)."""
    runner = worker.runners.get(stream)
    if runner is not None and runner.failed is not None:
        raise StreamFailed(failure_text(stream, runner.failed, worker.names.deadletter))
    if runner is None and stream in worker.stopped:
        kind, reason = worker.stopped[stream]
        raise StreamFailed(failure_text(stream, reason, worker.names.deadletter, kind))


def run_inline(
    settings: KafkaSettings,
    stream: str,
    produce: Callable[[threading.Event], Any],
    *,
    timeout: float,
    predictions: bool,
    broker_timeout: float | None = None,
    on_message: Callable[[StreamWorker], None] | None = None,
) -> Any:
    """Evaluate ``stream`` here while ``produce`` (submit + replay) runs in a thread.

    Returns what ``produce`` returned. ``produce`` is given an event that is set when
    the evaluation stopped early (the stream failed, the time ran out): it should
    then stop producing. The results document is on the metrics
    topic when this returns (read it with a :class:`~streameval.agents.run.ResultsWaiter`
    created before ``produce`` submits the experiment). ``on_message``: see
    :func:`consume_stream`.
    """
    import secrets
    from concurrent.futures import ThreadPoolExecutor

    from streameval.agents.health import broker_timeout as timeout_of
    from streameval.agents.health import watch_broker

    start = input_offsets(settings)
    health, monitor = watch_broker(
        settings.confluent_config(),
        timeout_of(broker_timeout),
        describe=lambda: f"stream {stream}",
        who="streameval run",
        advice="Run it again once the broker is back.",
        topic=TopicNames.for_prefix(settings.topic_prefix).metrics,
    )
    worker: StreamWorker | None = None
    try:
        producer = watched_producer(settings, health)
        worker = StreamWorker(
            settings,
            key=secrets.token_bytes(32),  # never used: this worker writes no checkpoint
            checkpoint_every=2**62,
            predictions=predictions,
            producer=producer,
            checkpoints=False,
        )
        stop = threading.Event()
        with ThreadPoolExecutor(1, thread_name_prefix="streameval-replay") as pool:
            job = pool.submit(produce, stop)

            def failed() -> BaseException | None:
                return job.exception() if job.done() else None

            try:
                consume_stream(
                    settings, worker, stream, start, timeout=timeout, failed=failed,
                    on_message=on_message,
                )  # fmt: skip
            except BaseException:
                stop.set()  # the replay ends at its next event; the pool waits for it
                raise
            return job.result()
    finally:
        monitor.stop()
        if worker is not None:
            # what was produced before a failure (its deadletter); a traceback keeps this
            # frame and the worker alive: the producer goes now, or librdkafka keeps
            # reconnecting to a broker that may be gone
            worker.publisher.close(10.0)
        producer = None


def replay_process(
    config: Any, settings: KafkaSettings, data_dir: str | None, speed: float | None, pack: int
) -> Any:
    """``run``'s replay in a forked child process, if this process may fork now (else
    ``None``: it replays in a thread); see :mod:`streameval.agents.replay_process`."""
    from streameval.agents.replay_process import ReplayProcess, can_fork

    if not can_fork():
        return None
    return ReplayProcess(config, settings, data_dir=data_dir, speed=speed, pack=pack)


def evaluate_inline(
    config: Any,
    settings: KafkaSettings,
    replayer: Any,
    bar: Any,
    *,
    data_dir: str | None,
    pack: int,
    speed: float | None,
    timeout: float,
    predictions: bool,
    broker_timeout: float | None,
) -> tuple[dict[str, Any], Any, float]:
    """``run`` evaluating here (:mod:`streameval.agents.inline`) while ``replayer`` (a
    :class:`~streameval.agents.replay_process.ReplayProcess`), else a thread, replays:
    results, replay stats, start."""
    from concurrent.futures import ThreadPoolExecutor

    from streameval.agents.run import (
        ResultsWaiter,
        RunnerFollower,
        replay_dataset,
        submit_experiment,
    )

    def produce(stop: threading.Event) -> Any:
        waiting.result()  # it reads from the metrics topic's end: there before the experiment
        if replayer is not None:
            return replayer.produce(settings, bar.replay_counter(), stop)
        # the definition and the events at once (each producer's start costs ~0.5 s on
        # Tansu): events read before the definition wait for it (parked)
        with ThreadPoolExecutor(1, thread_name_prefix="streameval-submit") as pool:
            submitted = pool.submit(submit_experiment, settings, config)
            stats = replay_dataset(
                settings, config, speed=speed, pack=pack,
                progress=bar.replay_counter(), data_dir=data_dir, stop=stop,
            )  # fmt: skip
            submitted.result()
        return stats

    start = time.perf_counter()
    follower = RunnerFollower(bar, config.stream)
    # the waiter's consumer finds the metrics topic's end while run_inline reads the input
    # topics' ends (two round trips to the broker at once)
    with ThreadPoolExecutor(1, thread_name_prefix="streameval-waiter") as pool:
        waiting = pool.submit(ResultsWaiter, settings, config.stream)
        try:
            stats = run_inline(
                settings, config.stream, produce, timeout=timeout, predictions=predictions,
                broker_timeout=broker_timeout, on_message=follower.seen,
            )  # fmt: skip
        finally:
            follower.stop()
    # the results are on the metrics topic once run_inline has returned
    return waiting.result().wait(timeout, alive=lambda: True), stats, start
