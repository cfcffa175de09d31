"""Soak: a real worker on a long synthetic stream with delayed labels, at full replay speed.

Runs only with ``STREAMEVAL_SOAK=1`` (``make faults``), for ``STREAMEVAL_SOAK_SECONDS``
(600 by default) of replay. A Markov stream with 500-instance label delay, re-evaluation
every K = 10 labels into B = 20 bins and two learners goes through ``streameval worker``
(a subprocess) while this test

* samples the worker's resident memory (``VmRSS`` of ``/proc/PID/status``) every few
  seconds. After the warm-up the steady slope (the median growth between consecutive
  samples, in MB per minute) must stay under ``STREAMEVAL_SOAK_MAX_SLOPE`` (default 1.0)
  and the growth overall under ``STREAMEVAL_SOAK_MAX_GROWTH`` MB (default 32): a leak
  shows between every two samples, a step of the allocator (a few MB at once) between
  few. The growth is that of the level memory holds (the highest level held over
  ``HELD`` consecutive samples, above the first such level): a step of the allocator or
  a leak holds; the few MB a checkpoint's pickling takes for a moment, seen by one sample,
  do not. The least-squares and Theil-Sen slopes are reported beside it; over a few
  minutes one step tilts them by 1-3 MB/min. Measured with the worker's allocator setting
  (``streameval.agents.allocator``): 7 MB of growth, a Theil-Sen slope of 0.2 MB/min;
  34 MB and 5.3 MB/min without it, in the heap's free memory. The warm-up is the first
  quarter of the run, or longer: until the worker has taken ``IngestGuard.remember``
  (100 000) labels, the number of labelled ids the ingest guard keeps to recognise a
  second delivery -- a bounded set, but one that grows for the first 100k labels (about
  10 MB). The run goes on past ``STREAMEVAL_SOAK_SECONDS`` until there are
  ``STREAMEVAL_SOAK_MEASURE_SECONDS`` (240) of samples after the warm-up, or three times
  ``STREAMEVAL_SOAK_SECONDS`` have passed;
* follows the worker's periodic metric snapshots: the pending buffer never exceeds the
  experiment's ``pending_cap``, and the labels per CPU second of the worker (``utime +
  stime`` of ``/proc/PID/stat``) in the last third of the run are at least
  ``STREAMEVAL_SOAK_MIN_RATIO`` (default 0.7) of the first third's. Per CPU second, not per
  wall second: the machine's cores are shared (CI runners, other jobs), and a neighbour
  taking half of them halves the wall rate of a worker that did not change; what a worker
  that slows down over time (a structure growing with the stream, a cost per label that
  grows) changes is its cost per label. The wall rates, the worker's share of a core
  and the load average are reported beside it;
* reads the checkpoints topic at the end, record by record: its bytes after the first
  checkpoint and at the end, the checkpoints written, and the growth per checkpoint (what
  one checkpoint writes: its manifest, its new large values, the tombstones of the one
  before), which must stay under ``STREAMEVAL_SOAK_MAX_CHECKPOINT_MB`` (default 8). This
  stream's state is small values (a pickle of ~2.3 MB once the ingest guard holds its
  100,000 ids) and much of it changes between two checkpoints (the pending buffer, the
  learners, the re-evaluation state; the guard's window moves by a tenth): a checkpoint
  writes the chunks it changed: 2.3 MB per checkpoint measured, 2.8 MB when it wrote all
  (``tests/test_checkpoint_growth.py`` shows a large unchanging state written once).

The replay runs as fast as the broker takes it, held at most ``MAX_LEAD`` instances
ahead of the worker (an embedded broker keeps every message in memory: an unbounded
lead would measure the broker's memory, not the worker's). At the end the stream is cut
with an end-of-stream marker and the worker's results document is checked. The figures
are printed (run pytest with ``-s``) and written to ``STREAMEVAL_SOAK_REPORT`` if set.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka_fixtures import topic_to_end
from streameval.agents.broker import EmbeddedBroker
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import prepare, schedule
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent
from streameval.pipeline.ingest import IngestGuard

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.faults,
    pytest.mark.skipif(
        os.environ.get("STREAMEVAL_SOAK") != "1",
        reason="soak test (10 min): set STREAMEVAL_SOAK=1 to run it (`make faults`)",
    ),
]

SECONDS = float(os.environ.get("STREAMEVAL_SOAK_SECONDS", "600"))
MEASURE = float(os.environ.get("STREAMEVAL_SOAK_MEASURE_SECONDS", "240"))
MAX_SLOPE = float(os.environ.get("STREAMEVAL_SOAK_MAX_SLOPE", "1.0"))  # MB per minute
MAX_GROWTH = float(os.environ.get("STREAMEVAL_SOAK_MAX_GROWTH", "32"))  # MB after the warm-up
MIN_RATIO = float(os.environ.get("STREAMEVAL_SOAK_MIN_RATIO", "0.7"))
MAX_CHECKPOINT_MB = float(os.environ.get("STREAMEVAL_SOAK_MAX_CHECKPOINT_MB", "8"))
WARMUP = 0.25  # fraction of the run before the memory slope is measured
SAMPLE_EVERY = 3.0  # seconds between memory samples
HELD = 3  # consecutive samples a level of memory must hold to count as growth
MAX_LEAD = 5_000  # instances the replay may be ahead of the worker's labels
REMEMBER = IngestGuard().remember  # labelled ids kept by the guard: bounded growth until then
DELAY = 500
PENDING_CAP = 2_000


def rss_kib(pid: int) -> int | None:
    """Resident memory of ``pid`` in KiB, ``None`` once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of ``pid`` in seconds, ``None`` once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (14, 15 of stat)


def load_average() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per minute."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    cov = sum((t - mt) * (v - mv) for t, v in points)
    return 60.0 * cov / var if var else 0.0


def robust_slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Theil-Sen slope (median of the pairwise slopes), in MB per minute.

    Less tilted by a step of a few MB than a least-squares line, but still by a step in
    the middle of a short window. Reported, not checked.
    """
    slopes = sorted(
        (v2 - v1) / (t2 - t1)
        for i, (t1, v1) in enumerate(points)
        for t2, v2 in points[i + 1 :]
        if t2 > t1
    )
    return 60.0 * _median(slopes)


def steady_slope_per_minute(points: list[tuple[float, float]]) -> float:
    """The median growth between consecutive samples, in MB per minute.

    A leak shows between every two samples; the allocator's steps (a few MB at once, then
    nothing for minutes, sometimes handed back) between few. This is the slope that is
    checked; the steps are bounded separately (``MAX_GROWTH``).
    """
    rates = sorted((v2 - v1) / (t2 - t1) for (t1, v1), (t2, v2) in itertools.pairwise(points))
    return 60.0 * _median(rates) if rates else 0.0


def held_growth_mb(points: list[tuple[float, float]], held: int = HELD) -> float:
    """How far the memory held over ``held`` consecutive samples rose above the first
    such level: the largest minimum of ``held`` consecutive values, less the first.

    >>> held_growth_mb([(0, 100.0), (3, 101.0), (6, 100.0), (9, 140.0), (12, 101.0)])
    0.0
    >>> held_growth_mb([(0, 100.0), (3, 100.0), (6, 100.0), (9, 108.0), (12, 108.0), (15, 109.0)])
    8.0
    """
    levels = [min(v for _, v in points[i : i + held]) for i in range(len(points) - held + 1)]
    return max(levels) - levels[0] if levels else float("nan")


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def checkpoint_topic(settings: KafkaSettings) -> dict[str, Any]:
    """The checkpoints topic's bytes (keys and values), read record by record: after the
    first complete checkpoint, at the end, per checkpoint, and what each kind of record
    holds."""
    topic = TopicNames.for_prefix(settings.topic_prefix).checkpoints
    total = start = manifests = values = tombstones = 0
    written: list[int] = []  # bytes of each complete checkpoint: since the one before
    since = 0
    value_digests: list[str] = []
    for msg in topic_to_end(settings, topic, timeout=300, idle=2.0):
        n = len(msg.key() or b"") + len(msg.value() or b"")
        total += n
        since += n
        if msg.value() is None:
            tombstones += n
            continue
        record = json.loads(msg.value())
        if "value" in record:
            values += n
            if record["part"] == 0:
                value_digests.append(record["value"])
            continue
        manifests += n
        if record["part"] == record["parts"] - 1:  # parts are in order on a partition
            written.append(since)
            since = 0
            start = start or total
    n = len(written)
    return {
        "checkpoints": n,
        "bytes_after_first": start,
        "bytes_end": total,
        "growth_per_checkpoint": round((total - start) / (n - 1)) if n > 1 else None,
        "largest_checkpoint": max(written, default=0),
        "manifest_bytes": manifests,
        "value_bytes": values,
        "values_written": len(value_digests),
        "values_distinct": len(set(value_digests)),
        "tombstone_bytes": tombstones,
    }


class Observer(threading.Thread):
    """Reads the metrics topic (progress, pending) and samples the worker's memory."""

    def __init__(self, settings: KafkaSettings, stream: str, pid: int, broker_pid: int | None):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, TopicPartition

        self.stream, self.pid, self.broker_pid = stream, pid, broker_pid
        topic = TopicNames.for_prefix(settings.topic_prefix).metrics
        self.consumer = Consumer(
            {
                **settings.confluent_config(),
                "group.id": f"soak-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
            }
        )
        meta = self.consumer.list_topics(topic, timeout=10)
        self.consumer.assign([TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions])
        # (time, n_labelled, pending, worker CPU seconds)
        self.progress: list[tuple[float, int, int, float]] = []
        self.loads: list[float] = []  # the machine's 1-minute load average, every sample
        self.memory: list[tuple[float, int, int | None]] = []  # (time, worker KiB, broker KiB)
        self.n_labelled = 0
        self.warm_at: float | None = None  # when the worker had taken REMEMBER labels
        self.stop = threading.Event()
        self.start_time = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start_time

    def done(self) -> bool:
        """Enough: SECONDS of replay and MEASURE seconds after the warm-up (or 3 x SECONDS)."""
        now = self.elapsed()
        if now >= 3 * SECONDS:
            return True
        warm = max(WARMUP * now, self.warm_at if self.warm_at is not None else now)
        return now >= SECONDS and now - warm >= MEASURE

    def run(self) -> None:
        next_sample = 0.0
        try:
            while not self.stop.is_set():
                now = time.monotonic() - self.start_time
                if now >= next_sample:
                    worker = rss_kib(self.pid)
                    if worker is not None:
                        broker = rss_kib(self.broker_pid) if self.broker_pid else None
                        self.memory.append((now, worker, broker))
                        load = load_average()
                        if load is not None:
                            self.loads.append(load)
                    next_sample = now + SAMPLE_EVERY
                msg = self.consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                snap = json.loads(msg.value())
                if snap.get("stream") != self.stream or snap.get("kind") != "periodic":
                    continue
                if snap.get("learner") != "nochange":
                    continue
                self.n_labelled = snap["n_labelled"]
                now = self.elapsed()
                if self.warm_at is None and self.n_labelled >= REMEMBER:
                    self.warm_at = now
                cpu = cpu_seconds(self.pid)
                if cpu is None:
                    continue
                self.progress.append(
                    (now, snap["n_labelled"], int(snap["metrics"]["pending"]), cpu)
                )
        finally:
            self.consumer.close()


def paced(events: Iterator[InputEvent], observer: Observer) -> Iterator[Any]:
    """The schedule until ``observer.done()``, at most MAX_LEAD instances ahead, then the end."""
    n_instances = n_events = 0
    last: InputEvent | None = None
    for event in events:
        if isinstance(event, EndOfStream):
            break
        if isinstance(event, FeatureEvent):
            n_instances += 1
            if n_instances % 500 == 0:
                if observer.done():
                    break
                while n_instances - observer.n_labelled > MAX_LEAD and not observer.done():
                    time.sleep(0.05)
        n_events += 1
        last = event
        yield event
    assert last is not None
    yield EndOfStream(last.stream, last.ts, last.seq + 1, n_events + 1)


@pytest.fixture
def soak_settings(kafka_prefix: str) -> Iterator[tuple[KafkaSettings, int | None]]:
    """A broker of its own (its memory is reported too), or the configured cluster."""
    settings = KafkaSettings.from_env()
    if not settings.embedded:
        yield replace(settings, topic_prefix=kafka_prefix), None
        return
    with EmbeddedBroker() as broker:
        yield (
            replace(settings.with_bootstrap(broker.bootstrap), topic_prefix=kafka_prefix),
            (broker.pid),
        )


def test_soak_memory_pending_and_throughput_stay_flat(soak_settings, tmp_path: Path) -> None:
    settings, broker_pid = soak_settings
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix)
    config = ExperimentConfig(
        stream=f"soak-{uuid.uuid4().hex[:6]}",
        learners=["nochange", "nb"],
        dataset="markov[k=3,p_stay=0.9,n=10000000,seed=7]",  # more than 10 min can take
        delay=str(DELAY),
        reeval_k=10,
        bins=20,
        window=1000,
        pending_cap=PENDING_CAP,
        snapshot_every=2000,
    )
    dataset, config = prepare(config)
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    log_path = tmp_path / "worker.log"
    worker = start_worker(settings, {"STREAMEVAL_CHECKPOINT_KEY": "soak-" + "k" * 27},
                          log_path=log_path)  # fmt: skip
    observer = Observer(settings, config.stream, worker.pid, broker_pid)
    observer.start()
    try:
        stats = replay(
            paced(schedule(config, dataset), observer),
            settings,
            message_format=PackedMessages(200),
        )
        results = waiter.wait(900, alive=lambda: worker.poll() is None)
    except BaseException:
        print(log_path.read_text(errors="replace")[-3000:])
        raise
    finally:
        observer.stop.set()
        observer.join(10)
        stop_worker(worker)
    checkpoints = checkpoint_topic(settings)

    # -- the figures
    run_end = observer.progress[-1][0] if observer.progress else SECONDS
    warm = max(WARMUP * run_end, observer.warm_at if observer.warm_at is not None else run_end)
    memory = [(t, kib / 1024) for t, kib, _ in observer.memory if t <= run_end]
    after = [(t, mb) for t, mb in memory if t >= warm]
    slope = steady_slope_per_minute(after)
    theil_sen = robust_slope_per_minute(after) if len(after) > 1 else float("nan")
    least_squares = slope_per_minute(after) if len(after) > 1 else float("nan")
    growth = held_growth_mb(after)
    peak_growth = max(mb for _, mb in after) - after[0][1] if after else float("nan")
    third = run_end / 3
    firsts = [p for p in observer.progress if p[0] <= third]
    lasts = [p for p in observer.progress if p[0] >= 2 * third]

    def rate(points: list[tuple[float, int, int, float]]) -> float:
        """Labels per wall second."""
        (t0, n0, _, _), (t1, n1, _, _) = points[0], points[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def cpu_rate(points: list[tuple[float, int, int, float]]) -> float:
        """Labels per CPU second of the worker."""
        (_, n0, _, c0), (_, n1, _, c1) = points[0], points[-1]
        return (n1 - n0) / (c1 - c0) if c1 > c0 else 0.0

    def cpu_share(points: list[tuple[float, int, int, float]]) -> float:
        """The worker's CPU seconds per wall second (1.0 = one core all the time)."""
        (t0, _, _, c0), (t1, _, _, c1) = points[0], points[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0

    enough = len(firsts) > 1 and len(lasts) > 1

    broker_mb = [kib / 1024 for _, _, kib in observer.memory if kib]
    report = {
        "seconds": round(run_end, 1),
        "instances_replayed": stats.n_features,
        "events_replayed": stats.n_events,
        "n_labelled": results["n_labelled"],
        "labels_per_cpu_s_first_third": round(cpu_rate(firsts), 1) if enough else None,
        "labels_per_cpu_s_last_third": round(cpu_rate(lasts), 1) if enough else None,
        "labels_per_s_first_third": round(rate(firsts), 1) if enough else None,
        "labels_per_s_last_third": round(rate(lasts), 1) if enough else None,
        "worker_cpu_share_first_third": round(cpu_share(firsts), 2) if enough else None,
        "worker_cpu_share_last_third": round(cpu_share(lasts), 2) if enough else None,
        "load_average_mean": round(sum(observer.loads) / len(observer.loads), 2)
        if observer.loads
        else None,
        "load_average_max": max(observer.loads) if observer.loads else None,
        "warmup_seconds": round(warm, 1),
        "rss_mb_start": round(memory[0][1], 1),
        "rss_mb_after_warmup": round(after[0][1], 1) if after else None,
        "rss_mb_end": round(memory[-1][1], 1),
        "rss_mb_max": round(max(mb for _, mb in memory), 1),
        "rss_steady_slope_mb_per_min": round(slope, 4),
        "rss_theil_sen_slope_mb_per_min": round(theil_sen, 3),
        "rss_least_squares_slope_mb_per_min": round(least_squares, 3),
        "rss_growth_mb_after_warmup": round(growth, 1),
        "rss_peak_above_first_sample_after_warmup_mb": round(peak_growth, 1),
        "rss_samples": len(memory),
        "broker_rss_mb_end": round(broker_mb[-1], 1) if broker_mb else None,
        "pending_max_seen": max(p for _, _, p, _ in observer.progress),
        "pending_cap": PENDING_CAP,
        "max_pending": results["overhead"]["max_pending"],
        "evicted": results["overhead"]["evicted"],
        "never_labelled": results["counters"]["never_labelled"],
        "checkpoint_topic_bytes_start": checkpoints["bytes_after_first"],
        "checkpoint_topic_bytes_end": checkpoints["bytes_end"],
        "checkpoint_topic_growth_per_checkpoint": checkpoints["growth_per_checkpoint"],
        "checkpoint_topic": checkpoints,
        "rss_mb_every_30s": [round(mb, 1) for t, mb in memory if int(t) % 30 < SAMPLE_EVERY],
        "rss_samples_after_warmup": [[round(t, 1), round(mb, 2)] for t, mb in after],
    }
    full = json.dumps(report, indent=2)
    text = json.dumps({k: v for k, v in report.items() if "samples" not in k}, indent=2)
    print("\nsoak:", text)
    (tmp_path / "soak.json").write_text(full)
    if os.environ.get("STREAMEVAL_SOAK_REPORT"):
        Path(os.environ["STREAMEVAL_SOAK_REPORT"]).write_text(full)

    # -- the checks
    assert results["n_labelled"] + results["counters"]["never_labelled"] == stats.n_features
    assert results["overhead"]["evicted"] == 0, text
    assert report["pending_max_seen"] <= PENDING_CAP, text
    assert results["overhead"]["max_pending"] <= PENDING_CAP, text
    assert len(after) >= 10, text
    assert slope <= MAX_SLOPE, text
    assert growth <= MAX_GROWTH, text
    assert enough, text
    assert cpu_rate(lasts) >= MIN_RATIO * cpu_rate(firsts), text
    # the checkpoints topic grows by what each checkpoint writes, never the states before
    per_checkpoint = checkpoints["growth_per_checkpoint"]
    assert checkpoints["checkpoints"] >= 2 and per_checkpoint is not None, text
    assert per_checkpoint <= MAX_CHECKPOINT_MB * 2**20, text
