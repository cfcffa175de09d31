"""The Kafka children of targets 2 and 3: raw confluent-kafka (a) and ``streameval run``.

Every run gets fresh topics on the bench broker (:func:`kafka_settings`); the
Faust worker logs tell when a worker was ready (:func:`log_time`).
"""

from __future__ import annotations

import importlib
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streameval.bench.measure import proc_cpu_seconds, proc_status_kib


def kafka_settings(job: dict[str, Any]) -> Any:
    import dataclasses

    from streameval.agents.config import KafkaSettings

    settings = KafkaSettings.from_env().with_bootstrap(job["bootstrap"])
    # fresh topics for every run: a worker restores every checkpoint of its topic, and
    # each run signs them with a fresh random STREAMEVAL_CHECKPOINT_KEY
    return dataclasses.replace(
        settings,
        topic_prefix=f"{job['prefix']}{uuid.uuid4().hex[:6]}.",
        partitions=int(job.get("partitions") or settings.partitions),
    )


def child_raw(job: dict[str, Any]) -> dict[str, Any]:
    """Reference (a): produce the replay's own messages raw, then consume + ``json.loads`` them."""
    from confluent_kafka import Producer

    from streameval.agents.replay import PRODUCER_DEFAULTS, OneEventPerMessage, PackedMessages
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare, schedule

    settings = kafka_settings(job)
    names = ensure_topics(
        settings.confluent_config(),
        settings.partitions,
        prefix=settings.topic_prefix,
        kinds=("features", "labels"),
    )
    config = ExperimentConfig(
        stream=f"raw-{uuid.uuid4().hex[:8]}",
        learners=["nochange"],
        dataset=job["dataset"],
        limit=job.get("limit"),
        delay=job.get("delay", "0"),
    )
    dataset, config = prepare(config, job.get("data_dir"))
    pack = int(job["pack"])
    fmt = PackedMessages(pack) if pack > 1 else OneEventPerMessage()
    messages = []
    n_events = 0
    for event in schedule(config, dataset):  # encoded before the clock starts
        messages.extend(fmt.add(event))
        n_events += 1
    messages.extend(fmt.flush())
    topic_of = {"features": names.features, "labels": names.labels}

    producer = Producer({**settings.confluent_config(), **PRODUCER_DEFAULTS})
    start = time.perf_counter()
    for m in messages:
        while True:
            try:
                producer.produce(topic_of[m.kind], m.value, m.key)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(120)
    produce_seconds = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{left} raw messages not delivered")

    consume_seconds, decoded = consume_decode(settings, list(topic_of.values()), len(messages))
    return {
        "seconds": consume_seconds,
        "produce_seconds": produce_seconds,
        "events": n_events,
        "events_decoded": decoded,  # the end marker travels to both topics
        "messages": len(messages),
        "bytes": sum(len(m.value) for m in messages),
    }


def consume_decode(settings: Any, topics: list[str], n_messages: int) -> tuple[float, int]:
    """Read ``n_messages`` back from partition offset 0 of ``topics`` with a bare
    ``Consumer`` and ``json.loads`` each: the seconds from ``assign`` to the last one
    decoded, and the events decoded."""
    from confluent_kafka import Consumer, TopicPartition

    from streameval.agents.config import FETCH_SETTINGS

    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # run's inline consumer's: a fetch that meets an empty partition waits 50 ms,
            # not 500 (with the default, a raw read took 0.5 s more now and then)
            **FETCH_SETTINGS,
        }
    )
    parts = []
    for topic in topics:
        meta = consumer.list_topics(topic, timeout=10)
        parts += [TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions]
    decoded = got = 0
    deadline = time.monotonic() + 300
    start = time.perf_counter()
    consumer.assign(parts)
    loads = json.loads
    while got < n_messages:
        if time.monotonic() > deadline:
            raise TimeoutError(f"raw consume: {got} of {n_messages} messages after 300 s")
        # ask for exactly what is left (at most 10,000): consume() returns when the batch is
        # full or the timeout passes, so a larger batch would add the timeout at the end
        for msg in consumer.consume(min(10_000, n_messages - got), 0.5):
            if msg.error():
                continue
            value = loads(msg.value())
            decoded += len(value) if isinstance(value, list) else 1
            got += 1
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds, decoded


_FAUST_TS = "%Y-%m-%d %H:%M:%S,%f"


def line_time(line: str) -> float | None:
    """Wall time (epoch s) at the start of a worker's log line: the worker's own format (an
    ISO 8601 UTC time, ``2026-11-26T19:30:46.502Z info ...``) or Faust's default
    (``[2026-11-26 19:30:46,502] ...``, local time); ``None`` for any other line.

    >>> line_time("1970-01-01T00:01:40.500Z info faust.worker Ready")
    100.5
    >>> line_time("Traceback (most recent call last):") is None
    True
    """
    from datetime import datetime

    try:
        if line.startswith("["):
            return datetime.strptime(line[1:24], _FAUST_TS).timestamp()
        stamp = line.split(" ", 1)[0]
        if not stamp.endswith("Z"):
            return None
        return datetime.fromisoformat(stamp[:-1] + "+00:00").timestamp()
    except ValueError:
        return None


def log_time(log: Path, needle: str, last: bool = False) -> float | None:
    """Wall time (epoch s) of the first (or last) line of a worker's log containing
    ``needle`` (:func:`line_time`)."""
    found = None
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if needle in line:
            at = line_time(line)
            if at is None:
                continue
            found = at
            if not last:
                return found
    return found


#: The modules ``streameval run`` imports on first use (see :func:`child_kafka_run`).
RUN_MODULES = (
    "streameval.agents.broker",
    "streameval.agents.inline",
    "streameval.agents.replay",
    "streameval.agents.replay_process",
    "streameval.agents.topics",
    "streameval.agents.worker",
    "streameval.pipeline.evaluate",
)


def child_kafka_run(job: dict[str, Any]) -> dict[str, Any]:
    """``streameval.agents.run.run_through_kafka`` as ``streameval run`` does it, on the bench
    broker.

    Timed around the whole call. Hooks (wrapping, not replacing, the functions
    ``run_through_kafka`` calls) read the worker's peak RSS and CPU time just
    before it is stopped and the wall time the results arrived; the worker log
    (``--loglevel info``) gives the moment its consumer was ready, so the row
    can split start-up from processing.
    """
    from streameval.agents import run as commands
    from streameval.pipeline.config import ExperimentConfig

    # What run_through_kafka imports on first use is imported before the clock starts, as
    # child_evaluate imports streameval.pipeline.evaluate before its own: both timings leave
    # the imports out.
    for module in RUN_MODULES:
        importlib.import_module(module)

    settings = kafka_settings(job)
    seen: dict[str, Any] = {}
    start_worker, stop_worker = commands.start_worker, commands.stop_worker

    def start_hook(*args: Any, **kwargs: Any) -> Any:
        proc = start_worker(*args, **kwargs)
        seen.update(proc=proc, log=Path(kwargs["log_path"]), started=time.time())
        return proc

    def stop_hook(proc: Any, timeout: float = 15.0) -> None:
        seen["worker_hwm"] = proc_status_kib(proc.pid)
        seen["worker_cpu"] = proc_cpu_seconds(proc.pid)
        seen["stopping"] = time.time()
        stop_worker(proc, timeout)

    class TimedWaiter(commands.ResultsWaiter):
        def wait(self, timeout: float, alive: Callable[[], bool]) -> dict[str, Any]:
            out = super().wait(timeout, alive)
            seen["results_at"] = time.time()
            return out

    commands.start_worker, commands.stop_worker = start_hook, stop_hook
    commands.ResultsWaiter = TimedWaiter  # type: ignore[misc]
    cfg = dict(job["config"])
    cfg["stream"] = f"bench-{uuid.uuid4().hex[:10]}"
    config = ExperimentConfig.from_dict(cfg)
    start = time.perf_counter()
    cpu_before = proc_cpu_seconds(os.getpid())
    results = commands.run_through_kafka(
        config,
        settings,
        data_dir=job.get("data_dir"),
        pack=int(job.get("pack", 200)),
        timeout=float(job.get("timeout", 600)),
        worker_args=["--loglevel", "info"],
        inline=bool(job.get("inline", True)),
    )
    seconds = time.perf_counter() - start
    if "proc" not in seen:  # inline (streameval.agents.inline): this process evaluated the stream
        seen["worker_hwm"] = proc_status_kib(os.getpid())
        cpu_after = proc_cpu_seconds(os.getpid())
        if cpu_before is not None and cpu_after is not None:
            seen["worker_cpu"] = cpu_after - cpu_before
    ready = log_time(seen["log"], "Worker ready", last=True) if "log" in seen else None
    out = {
        "seconds": seconds,
        "runtime": results["runtime"],
        "events": results["runtime"]["events"],
        "n_instances": results["n_instances"],
        "n_labelled": results["n_labelled"],
        "accuracy": {k: v.get("accuracy") for k, v in results["learners"].items()},
        "worker_peak_rss_bytes": (seen.get("worker_hwm") or 0) * 1024,
        "worker_cpu_seconds": seen.get("worker_cpu"),
        "inline": "proc" not in seen,
    }
    if ready is not None and "results_at" in seen:
        out["startup_seconds"] = ready - seen["started"]
        out["after_ready_seconds"] = seen["results_at"] - ready
    return out
