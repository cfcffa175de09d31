"""Target 6: throughput of concurrent streams on one worker, and of two workers.

One child starts warm workers and replays the measured streams ``reps`` times;
the stream ids are chosen so that every partitioner of the pipeline puts the
i-th stream on partition ``i % partitions``.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from streameval.bench.harness import Bench
from streameval.bench.kafka_runs import kafka_settings, log_time
from streameval.bench.measure import proc_cpu_seconds, proc_status_kib
from streameval.bench.plans import NB_METRICS, Plan, experiment_config, stream_label
from streameval.bench.rows import Row, error_row, fmt_mib


def _partitions_of(key: str, partitions: int) -> tuple[int, int]:
    """Partitions of ``key`` under librdkafka's ``murmur2_random`` and default partitioners.

    The pipeline's producers use ``murmur2_random`` (Java's default); a producer
    left at librdkafka's default (``consistent_random``, CRC32 of the key) puts
    the same key on another partition for about half the keys (two partitions).
    """
    import zlib

    from aiokafka.partitioner import murmur2

    data = key.encode("utf-8")
    return (murmur2(data) & 0x7FFFFFFF) % partitions, zlib.crc32(data) % partitions


def _stream_ids(tag: str, n: int, partitions: int) -> list[str]:
    """``n`` fresh stream ids, the i-th on partition ``i % partitions`` under both partitioners.

    With one partitioner for the experiments and another for the features and
    labels, a stream's definition and its events would reach different
    workers as soon as there are two; ids on which both agree keep the
    measurement about throughput, whichever partitioner a producer uses.
    """
    out = []
    base = uuid.uuid4().hex[:6]
    j = 0
    for i in range(n):
        while True:
            sid = f"{tag}-{base}-{i}-{j}"
            j += 1
            if _partitions_of(sid, partitions) == (i % partitions, i % partitions):
                out.append(sid)
                break
    return out


def _interleave(iterators: list[Iterator[Any]]) -> Iterator[Any]:
    """Round-robin over several event schedules (concurrent streams)."""
    live = list(iterators)
    while live:
        nxt = []
        for it in live:
            try:
                yield next(it)
            except StopIteration:
                continue
            nxt.append(it)
        live = nxt


def child_kafka_curve(job: dict[str, Any]) -> dict[str, Any]:
    """Target 6: ``n_workers`` warm workers, ``n_streams`` concurrent streams, ``reps`` times.

    The workers are started, then a small warm-up stream per partition proves
    every partition is consumed; only then is the clock started, at the
    replay of the measured streams (their events interleaved, as concurrent
    sources would send them), and stopped when the last results arrive. The
    worker logs tell which worker evaluated which stream.
    """
    import re
    import secrets
    import tempfile

    from streameval.agents.replay import PackedMessages, replay
    from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare, schedule

    settings = kafka_settings(job)
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix)
    data_dir = job.get("data_dir")
    env = {"STREAMEVAL_CHECKPOINT_KEY": secrets.token_hex(32)}
    if data_dir:
        env["STREAMEVAL_DATA_DIR"] = str(data_dir)
    log_dir = Path(tempfile.mkdtemp(prefix="streameval-bench-"))
    n_workers = int(job["n_workers"])
    timeout = float(job.get("timeout", 600))
    pack = int(job.get("pack", 200))
    logs = [log_dir / f"worker{i}.log" for i in range(n_workers)]
    workers = [
        start_worker(settings, env, log_path=log, extra_args=["--loglevel", "info"]) for log in logs
    ]

    def alive() -> bool:
        return all(w.poll() is None for w in workers)

    def batch(tag: str, base: dict[str, Any], n: int) -> dict[str, Any]:
        ids = _stream_ids(tag, n, settings.partitions)
        configs = [
            prepare(ExperimentConfig.from_dict({**base, "stream": sid}), data_dir) for sid in ids
        ]
        waiter = ResultsWaiter(settings, *ids)
        for _, cfg in configs:
            submit_experiment(settings, cfg)
        cpu0 = [proc_cpu_seconds(w.pid) or 0.0 for w in workers]
        start = time.perf_counter()
        stats = replay(
            _interleave([schedule(cfg, ds) for ds, cfg in configs]),
            settings,
            message_format=PackedMessages(pack),
            progress=False,
        )
        replay_seconds = time.perf_counter() - start
        done = waiter.wait_all(timeout, alive)
        seconds = max(t for t, _ in done.values()) - start
        cpu = [(proc_cpu_seconds(w.pid) or 0.0) - c for w, c in zip(workers, cpu0, strict=True)]
        return {
            "streams": ids,
            "seconds": seconds,
            "replay_seconds": replay_seconds,
            "events": stats.n_events,
            "n_instances": sum(r["n_instances"] for _, r in done.values()),
            "n_labelled": sum(r["n_labelled"] for _, r in done.values()),
            "per_stream_seconds": sorted(t - start for t, _ in done.values()),
            "worker_cpu_seconds": cpu,
        }

    try:
        deadline = time.monotonic() + 90
        while not all(log_time(log, "Worker ready") for log in logs):
            if time.monotonic() > deadline or not alive():
                raise RuntimeError(f"workers not ready after 90 s (logs in {log_dir})")
            time.sleep(0.2)
        warm_base = {"learners": ["nochange"], "dataset": "electricity", "limit": 200}
        warm = batch("warm", warm_base, settings.partitions)
        reps = []
        for _ in range(int(job["reps"])):
            reps.append(batch("bench", job["config"], int(job["n_streams"])))
            if len(reps) == 1:
                first_hwm = [(proc_status_kib(w.pid) or 0) * 1024 for w in workers]
        hwm = [(proc_status_kib(w.pid) or 0) * 1024 for w in workers]
    finally:
        for w in workers:
            stop_worker(w)
    owner: dict[str, int] = {}
    for i, log in enumerate(logs):
        for m in re.finditer(r"stream (\S+) defined", log.read_text(errors="replace")):
            owner[m.group(1)] = i
    for rep in reps:
        rep["workers_used"] = sorted({owner.get(s, -1) for s in rep["streams"]})
    return {
        "reps": reps,
        "warmup_seconds": warm["seconds"],
        "worker_peak_rss_bytes_first_rep": first_hwm,
        "worker_peak_rss_bytes": hwm,
    }


def plan_target6(b: Bench, plan: Plan, bootstrap: str) -> Callable[[], list[Row]]:
    cfg = experiment_config("electricity", ["nb"], limit=plan.curve_limit, **NB_METRICS)
    cases = [(1, n) for n in plan.curve_streams] + [(2, 2)]
    items = []
    for workers, streams in cases:
        items.append(
            (
                workers,
                streams,
                b.declare(
                    f"T6 {workers} worker(s), {streams} concurrent stream(s)",
                    {
                        "kind": "kafka_curve",
                        "config": cfg,
                        "n_workers": workers,
                        "n_streams": streams,
                        "reps": plan.reps,
                        "partitions": 2,
                        "pack": 200,
                        "bootstrap": bootstrap,
                        "prefix": f"bench-{uuid.uuid4().hex[:8]}.",
                    },
                ),
            )
        )
    b.run_reps([m for *_, m in items], 1)  # the repetitions happen inside the child

    def rows() -> list[Row]:
        out = []
        base_rate = None
        workload = f"{stream_label('electricity', plan.curve_limit)} per stream, nb+window+fading"
        for i, (workers, streams, m) in enumerate(items):
            rid = f"6{chr(ord('a') + i)}"
            what = f"{workers} worker(s), {streams} concurrent stream(s), 2 partitions"
            if not m.runs:
                out.append(error_row(rid, "6", what, workload, m))
                continue
            reps = m.runs[0]["reps"]
            secs = [r["seconds"] for r in reps]
            ev = reps[0]["events"]
            med = statistics.median(secs)
            rate = ev / med
            if workers == 1 and streams == 1:
                base_rate = rate
            ratio = rate / base_rate if base_rate else None
            used = sorted({w for r in reps for w in r["workers_used"]})
            cpu = [sum(r["worker_cpu_seconds"]) for r in reps]
            hwm = m.runs[0]["worker_peak_rss_bytes_first_rep"]
            out.append(
                Row(
                    rid,
                    "6",
                    what,
                    workload,
                    f"{rate:,.0f} ev/s",
                    "worker " + " + ".join(fmt_mib(h) for h in hwm),
                    "1 worker, 1 stream" if ratio is not None else "-",
                    ratio,
                    "curve",
                    "n/a",
                    f"{ev:,} events per repetition; seconds {[round(s, 2) for s in secs]} "
                    f"(replay to last results; workers warm); worker CPU seconds "
                    f"{[round(c, 2) for c in cpu]}; streams evaluated by worker(s) {used}; "
                    f"per-stream finish {[round(t, 1) for t in reps[0]['per_stream_seconds']]} s",
                    {"measured": m.as_dict()},
                )
            )
        return out

    return rows
