"""``streameval bench``: speed and memory, every figure a ratio measured in the same run.

Every configuration runs in a fresh child process (``python -m streameval.bench
--child``, the job as JSON on stdin), ``--reps`` times (default 3), repetitions
interleaved (rep 1 of every configuration, then rep 2, ...), and reports the
median. Each child reports its own peak RSS (``VmHWM`` of ``/proc/self/status``)
and, for Kafka runs, that of the worker process that did the evaluation.

The references are measured in the same run, on the same machine and, for
Kafka, on the same broker (one embedded Tansu broker for the whole bench, or
the cluster of ``KAFKA_BOOTSTRAP_SERVERS``):

(a) the limit: raw confluent-kafka produce, then consume + ``json.loads`` of
    the very messages a replay sends (one event per message, and 200 per message);
(b) the peer: ``river.evaluate.progressive_val_score`` with river's
    ``GaussianNB`` and ``metrics.Accuracy`` on the same stream and delay;
(c) ``streameval.pipeline.evaluate.evaluate`` for the same configuration.

The targets (``TARGETS``) are checked and printed PASS/FAIL; ``bench/results.json``
holds every repetition, ``bench/results.md`` the table. ``bench/README.md``
explains the choices and holds the profiles of failing targets.

Heavy imports (river, confluent-kafka, the pipeline) stay inside functions so
that ``streameval --help`` does not pay for them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD_TAG = "@@streameval-bench-result "
GIB = 1024**3
MIB = 1024**2
NB_METRICS = {"window": 1000, "fading": 0.999}  # "every metric on": whole + window + fading
FOUR_LEARNERS = ["nochange", "majority", "nb", "ht"]
BASELINES = ["nochange", "majority"]

TARGETS = {
    "1": "in-process evaluate, nb with every metric (window + fading) >= River "
    "progressive_val_score with GaussianNB on the same stream (ratio >= 1.0)",
    "2": "run through Kafka >= 0.5 x in-process evaluate, same configuration",
    "3": "run with the two baselines >= 0.25 x raw consume+decode rate of the same broker",
    "4": "re-evaluation K=10, B=50 costs <= 3x the same run without it (covtype, delay 1000)",
    "5": "covtype, delay 1000, K=10, B=50, four learners: peak RSS < 1 GiB; pending-buffer "
    "memory proportional to pending instances",
    "6": "throughput of 1, 2, 4 concurrent streams on one worker and of two workers on "
    "two partitions (a curve, no threshold)",
}


# -- sizes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What each mode runs (``--quick``, default, ``--full``)."""

    mode: str
    reps: int
    t1: tuple[tuple[str, int | None, str], ...]  # (dataset, limit, delay) for target 1
    t1_learners: tuple[str, ...]  # learner specs with a river peer
    kafka: tuple[tuple[str, int | None], ...]  # (dataset, limit) for targets 2 and 3
    kafka_learners: tuple[tuple[str, ...], ...]  # learner sets for target 2
    pack1: bool  # also run target 3's run with one event per message
    raw_packs: tuple[int, ...]  # message layouts of the raw limit (a)
    cov_limit: int | None  # targets 4 and 5
    cov_delay: str
    curve_limit: int | None  # target 6, instances of electricity per stream
    curve_streams: tuple[int, ...] = (1, 2, 4)
    timeout: float = 3600.0

    @property
    def cov_label(self) -> str:
        if self.cov_limit is None:
            return "covtype (whole, 581,012)"
        return f"covtype prefix {self.cov_limit:,} of 581,012"


PLANS = {
    "quick": Plan(
        mode="quick",
        reps=1,
        t1=(("electricity", 2000, "0"), ("electricity", 2000, "natural")),
        t1_learners=("nb",),
        kafka=(("electricity", 2000),),
        kafka_learners=(("nb",),),
        pack1=False,
        raw_packs=(200,),
        cov_limit=800,
        cov_delay="100",
        curve_limit=500,
        curve_streams=(1, 2),
        timeout=300.0,
    ),
    "default": Plan(
        mode="default",
        reps=3,
        t1=(
            ("electricity", None, "0"),
            ("electricity", None, "natural"),
            # the third stream, with its natural (departure -> arrival) delay and a str
            # feature: a prefix, the whole of it alone would take ~7 of the 15 minutes
            ("airlines", 100_000, "natural"),
        ),
        t1_learners=("nb",),
        kafka=(("electricity", None),),
        kafka_learners=(("nb",),),
        pack1=False,
        raw_packs=(200, 1),
        cov_limit=21_000,  # 20,000 instances past the 1,000-instance delay
        cov_delay="1000",
        curve_limit=10_000,
    ),
    "full": Plan(
        mode="full",
        reps=3,
        t1=tuple(
            (d, None, delay)
            for d in ("electricity", "covtype", "airlines")
            for delay in ("0", "natural")
        ),
        t1_learners=("nb", "ht"),
        kafka=(("electricity", None), ("covtype", None), ("airlines", None)),
        kafka_learners=(("nb",), tuple(FOUR_LEARNERS), ("ta:nb",)),
        pack1=True,
        raw_packs=(200, 1),
        cov_limit=None,
        cov_delay="1000",
        curve_limit=None,
        timeout=24 * 3600.0,
    ),
}

N_INSTANCES = {"electricity": 45_312, "covtype": 581_012, "airlines": 539_383}


def n_of(dataset: str, limit: int | None) -> int:
    n = N_INSTANCES[dataset]
    return n if limit is None else min(n, limit)


def stream_label(dataset: str, limit: int | None) -> str:
    n = N_INSTANCES[dataset]
    if limit is None or limit >= n:
        return f"{dataset} whole ({n:,})"
    return f"{dataset} prefix {limit:,}"


# -- process measurements (used by children) ----------------------------------------------------


def proc_status_kib(pid: int | str = "self", key: str = "VmHWM") -> int | None:
    """A ``kB`` field of ``/proc/PID/status`` (peak RSS by default); ``None`` if unreadable."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def proc_cpu_seconds(pid: int | str = "self") -> float | None:
    """User + system CPU seconds of a process (``/proc/PID/stat``)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def deep_sizeof(root: Any) -> int:
    """Bytes of every object reachable from ``root`` (``sys.getsizeof``, each object once).

    Follows containers, instance ``__dict__`` and ``__slots__``; never classes,
    functions or modules. What the buffer holds in memory, unlike its pickle.
    """
    import types
    from collections import deque

    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack.extend(obj)
        elif isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
            continue
        else:
            if hasattr(obj, "__dict__"):
                stack.append(obj.__dict__)
            for klass in type(obj).__mro__:
                for slot in getattr(klass, "__slots__", ()):
                    if hasattr(obj, slot):
                        stack.append(getattr(obj, slot))
    return total


def self_peak_rss() -> int:
    """Peak RSS of this process in bytes."""
    kib = proc_status_kib("self")
    if kib is None:
        import resource

        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024


# -- children: one configuration, one repetition ------------------------------------------------


def _profiled(job: dict[str, Any], fn: Callable[[], Any]) -> Any:
    """Run ``fn``; with ``job["profile"]`` under cProfile, the top written to that file."""
    path = job.get("profile")
    if not path:
        return fn()
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    try:
        return prof.runcall(fn)
    finally:
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(out.getvalue())


def child_evaluate(job: dict[str, Any]) -> dict[str, Any]:
    """``streameval.pipeline.evaluate.evaluate`` for one config (timed around the whole call)."""
    from streameval.pipeline.config import ExperimentConfig

    config = ExperimentConfig.from_dict(job["config"])
    if job.get("sample_buffer"):
        return _evaluate_sampled(config, job)
    from streameval.pipeline.evaluate import evaluate_config

    start, cpu = time.perf_counter(), time.process_time()
    results = _profiled(job, lambda: evaluate_config(config, data_dir=job.get("data_dir")))
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "loop_seconds": results["runtime"]["seconds"],
        "events": results["runtime"]["events"],
        "n_instances": results["n_instances"],
        "accuracy": {k: v.get("accuracy") for k, v in results["learners"].items()},
        "overhead": results["overhead"],
    }


def _evaluate_sampled(config: Any, job: dict[str, Any]) -> dict[str, Any]:
    """``evaluate``'s loop, sampling the pending buffer's pickle size as the run goes.

    The loop is that of :func:`streameval.pipeline.evaluate.evaluate` (prepare, one
    :class:`~streameval.pipeline.experiment.Experiment`, the schedule, ``results()``);
    the time spent sampling is measured and left out of ``seconds``.
    Samples: in the fill phase (no label yet) and the drain phase (no
    features left) when the pending count reaches one of ``sample_levels``,
    and every ``sample_every`` events in between.
    """
    import pickle

    from streameval.pipeline.evaluate import prepare, schedule
    from streameval.pipeline.experiment import Experiment

    levels = set(job.get("sample_levels") or [])
    every = max(1, int(job.get("sample_every") or 10_000))
    samples: list[dict[str, Any]] = []
    excluded = 0.0

    def sample(exp: Any, phase: str, n_events: int) -> None:
        nonlocal excluded
        t = time.perf_counter()
        buf = exp.buffer
        samples.append(
            {
                "phase": phase,
                "events": n_events,
                "pending": len(buf),
                "entries_held": buf.n_entries_held,
                "predictions_held": buf.n_predictions_held,
                "buffer_pickle_bytes": len(pickle.dumps(buf, protocol=pickle.HIGHEST_PROTOCOL)),
                "buffer_deep_bytes": deep_sizeof(buf),
                "rss_bytes": (proc_status_kib("self", "VmRSS") or 0) * 1024,
            }
        )
        excluded += time.perf_counter() - t

    def run() -> dict[str, Any]:
        dataset, cfg = prepare(config, job.get("data_dir"))
        n_total = dataset.n_instances if cfg.limit is None else min(dataset.n_instances, cfg.limit)
        exp = Experiment(cfg)
        seen: set[tuple[str, int]] = set()
        n_events = 0
        for event in schedule(cfg, dataset):
            exp.process(event)
            n_events += 1
            pending = len(exp.buffer)
            if exp.n_labelled == 0:
                phase = "fill"
            elif exp.n_instances >= n_total:
                phase = "drain"
            else:
                phase = "steady"
            if phase != "steady" and pending in levels and (phase, pending) not in seen:
                seen.add((phase, pending))
                sample(exp, phase, n_events)
            elif phase == "steady" and n_events % every == 0:
                sample(exp, phase, n_events)
        results = exp.results()
        results["runtime"] = {"events": n_events}
        return results

    start, cpu = time.perf_counter(), time.process_time()
    results = _profiled(job, run)
    seconds = time.perf_counter() - start - excluded
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu - excluded,
        "sampling_seconds": excluded,
        "events": results["runtime"]["events"],
        "n_instances": results["n_instances"],
        "accuracy": {k: v.get("accuracy") for k, v in results["learners"].items()},
        "overhead": results["overhead"],
        "samples": samples,
    }


class _TimedX(dict):
    """Features carrying their event time and label due time (river's ``moment``/``delay``)."""

    ts: float
    due: float


def _peer_converter(dataset: Any) -> tuple[Callable[[dict], dict] | None, dict[str, str]]:
    """How the peer sees ``x``: river's GaussianNB takes numbers only.

    A string feature whose values are numbers (electricity ``day``, airlines
    ``DayOfWeek``) becomes a float; one that is not (airlines ``Airline``) is
    left out. Returns ``(convert or None, {feature: what was done})``.
    """
    first = next(iter(dataset.iter_instances(1)))
    to_float, drop = [], []
    for name, value in first.x.items():
        if isinstance(value, str):
            try:
                float(value)
                to_float.append(name)
            except ValueError:
                drop.append(name)
    notes = {**{n: "str -> float" for n in to_float}, **{n: "dropped (not a number)" for n in drop}}
    if not to_float and not drop:
        return None, notes
    dropped = frozenset(drop)
    floats = frozenset(to_float)

    def convert(x: dict) -> dict:
        return {k: (float(v) if k in floats else v) for k, v in x.items() if k not in dropped}

    return convert, notes


def _river_model(spec: str) -> Any:
    if spec == "nb":
        from river import naive_bayes

        return naive_bayes.GaussianNB()
    if spec == "ht":
        from river import tree

        return tree.HoeffdingTreeClassifier()
    raise ValueError(f"no river peer for learner {spec!r}")


def child_river(job: dict[str, Any]) -> dict[str, Any]:
    """``river.evaluate.progressive_val_score`` on the same stream, delay and learner."""
    from river import evaluate as river_evaluate
    from river import metrics

    from streameval.pipeline.streams.datasets import load
    from streameval.pipeline.streams.delay import InstanceDelay, parse_delay

    def run() -> Any:
        dataset = load(job["dataset"], data_dir=job.get("data_dir"))
        delay = parse_delay(job["delay"], dataset)
        convert, notes = _peer_converter(dataset)
        instances = dataset.iter_instances(job.get("limit"))
        metric = metrics.Accuracy()
        model = _river_model(job["learner"])
        if isinstance(delay, InstanceDelay):
            if convert is None:
                data: Iterable = ((i.x, i.y) for i in instances)
            else:
                data = ((convert(i.x), i.y) for i in instances)
            moment, river_delay = None, (delay.n or None)
        else:

            def timed(inst: Any) -> _TimedX:
                x = _TimedX(convert(inst.x) if convert else inst.x)
                x.ts, x.due = inst.ts, delay.due(inst)
                return x

            data = ((timed(i), i.y) for i in instances)
            moment = _moment
            river_delay = _due_after
        river_evaluate.progressive_val_score(data, model, metric, moment=moment, delay=river_delay)
        return metric, notes

    start, cpu = time.perf_counter(), time.process_time()
    metric, notes = _profiled(job, run)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "n_instances": metric.cm.n_samples if hasattr(metric, "cm") else None,
        "accuracy": metric.get(),
        "peer_features": notes,
    }


def _moment(x: _TimedX) -> float:
    return x.ts


def _due_after(x: _TimedX, y: Any) -> float:
    return x.due - x.ts


def _kafka_settings(job: dict[str, Any]) -> Any:
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
    from confluent_kafka import Consumer, Producer, TopicPartition

    from streameval.agents.replay import PRODUCER_DEFAULTS, OneEventPerMessage, PackedMessages
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare, schedule

    settings = _kafka_settings(job)
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

    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    parts = []
    for topic in topic_of.values():
        meta = consumer.list_topics(topic, timeout=10)
        parts += [TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions]
    decoded = 0
    got = 0
    deadline = time.monotonic() + 300
    start = time.perf_counter()
    consumer.assign(parts)
    loads = json.loads
    while got < len(messages):
        if time.monotonic() > deadline:
            raise TimeoutError(f"raw consume: {got} of {len(messages)} messages after 300 s")
        # ask for exactly what is left (at most 10,000): consume() returns when the batch is
        # full or the timeout passes, so a larger batch would add the timeout at the end
        for msg in consumer.consume(min(10_000, len(messages) - got), 0.5):
            if msg.error():
                continue
            value = loads(msg.value())
            decoded += len(value) if isinstance(value, list) else 1
            got += 1
    consume_seconds = time.perf_counter() - start
    consumer.close()
    return {
        "seconds": consume_seconds,
        "produce_seconds": produce_seconds,
        "events": n_events,
        "events_decoded": decoded,  # the end marker travels to both topics
        "messages": len(messages),
        "bytes": sum(len(m.value) for m in messages),
    }


_FAUST_TS = "%Y-%m-%d %H:%M:%S,%f"


def _log_time(log: Path, needle: str, last: bool = False) -> float | None:
    """Wall time (epoch s) of the first (or last) line of a Faust log containing ``needle``."""
    from datetime import datetime

    found = None
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if needle in line and line.startswith("["):
            try:
                found = datetime.strptime(line[1:24], _FAUST_TS).timestamp()
            except ValueError:
                continue
            if not last:
                return found
    return found


#: The modules ``streameval run`` imports on first use (see :func:`child_kafka_run`).
RUN_MODULES = (
    "streameval.agents.broker",
    "streameval.agents.inline",
    "streameval.agents.replay",
    "streameval.agents.topics",
    "streameval.agents.worker",
    "streameval.pipeline.evaluate",
)


def child_kafka_run(job: dict[str, Any]) -> dict[str, Any]:
    """``streameval.cli.kafka.run_through_kafka`` as ``streameval run`` does it, on the bench
    broker.

    Timed around the whole call. Hooks (wrapping, not replacing, the functions
    ``run_through_kafka`` calls) read the worker's peak RSS and CPU time just
    before it is stopped and the wall time the results arrived; the worker log
    (``--loglevel info``) gives the moment its consumer was ready, so the row
    can split start-up from processing.
    """
    from streameval.cli import kafka as commands
    from streameval.pipeline.config import ExperimentConfig

    # What run_through_kafka imports on first use, imported before the clock starts, as
    # child_evaluate imports streameval.pipeline.evaluate before its own (~0.85 s of imports that
    # were inside this timing and outside evaluate's).
    for module in RUN_MODULES:
        importlib.import_module(module)

    settings = _kafka_settings(job)
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
    ready = _log_time(seen["log"], "Worker ready", last=True) if "log" in seen else None
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


def _partitions_of(key: str, partitions: int) -> tuple[int, int]:
    """Partitions of ``key`` under librdkafka's ``murmur2_random`` and default partitioners.

    The replay producer uses ``murmur2_random`` (Java's default); a producer
    left at librdkafka's default (``consistent_random``, CRC32 of the key) --
    ``streameval.cli.kafka.submit_experiment`` at the time of writing -- puts the
    same key on another partition for about half the keys (two partitions).
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
    measurement about throughput, whichever partitioner ``submit_experiment`` uses.
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
    from streameval.agents.topics import ensure_topics
    from streameval.cli.kafka import ResultsWaiter, start_worker, stop_worker, submit_experiment
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare, schedule

    settings = _kafka_settings(job)
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
        while not all(_log_time(log, "Worker ready") for log in logs):
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


CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "evaluate": child_evaluate,
    "river": child_river,
    "raw": child_raw,
    "kafka_run": child_kafka_run,
    "kafka_curve": child_kafka_curve,
}


def child_main() -> int:
    """Entry of a child: the job as JSON on stdin, the result as one tagged line on stdout."""
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    job = json.loads(sys.stdin.read())
    out = CHILDREN[job["kind"]](job)
    out["peak_rss_bytes"] = self_peak_rss()
    sys.stdout.write(CHILD_TAG + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


# -- the parent: jobs, repetitions, rows ---------------------------------------------------------


@dataclass(eq=False)
class Measured:
    """One configuration measured ``reps`` times (each rep a fresh child)."""

    key: str
    job: dict[str, Any]
    label: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def values(self, name: str) -> list[float]:
        return [r[name] for r in self.runs if r.get(name) is not None]

    def median(self, name: str = "seconds") -> float | None:
        vals = self.values(name)
        return statistics.median(vals) if vals else None

    def peak(self, name: str = "peak_rss_bytes") -> float | None:
        vals = self.values(name)
        return max(vals) if vals else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "job": {k: v for k, v in self.job.items() if k not in ("bootstrap",)},
            "runs": self.runs,
            "errors": self.errors,
        }


class Bench:
    """Runs jobs in fresh children, caches them by job, keeps the log."""

    def __init__(self, *, data_dir: str | None, timeout: float, profile_dir: Path | None) -> None:
        self.data_dir = data_dir
        self.timeout = timeout
        self.profile_dir = profile_dir
        self.measured: dict[str, Measured] = {}
        self.started = time.perf_counter()

    def declare(self, label: str, job: dict[str, Any]) -> Measured:
        job = {**job, "data_dir": self.data_dir}
        key = json.dumps(job, sort_keys=True)
        if key not in self.measured:
            self.measured[key] = Measured(key, job, label)
        return self.measured[key]

    def run_reps(self, items: Sequence[Measured], reps: int) -> None:
        """``reps`` repetitions of every item, interleaved; items already measured are skipped."""
        todo = [m for m in dict.fromkeys(items) if not m.runs and not m.errors]
        for rep in range(reps):
            for m in todo:
                if len(m.errors) > 0 and not m.runs and rep > 0:
                    continue  # failed on its first repetition: do not insist
                self.run_one(m, f"rep {rep + 1}/{reps}")

    def run_one(self, m: Measured, note: str) -> None:
        job = dict(m.job)
        if self.profile_dir is not None and job["kind"] in ("evaluate", "river"):
            name = "".join(c if c.isalnum() else "_" for c in m.label)[:80]
            job["profile"] = str(self.profile_dir / f"{name}.txt")
        job.setdefault("timeout", max(30.0, self.timeout - 60.0))  # inner waits end first
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        if self.data_dir:
            env["STREAMEVAL_DATA_DIR"] = str(self.data_dir)
        t0 = time.perf_counter()
        elapsed = t0 - self.started
        print(f"[{elapsed:6.0f} s] {m.label} ({note}) ...", file=sys.stderr, flush=True)
        # its own session: on a timeout the whole group goes (the child's workers too)
        proc = subprocess.Popen(
            [sys.executable, "-m", "streameval.bench", "--child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(json.dumps(job), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc)
            m.errors.append(f"timed out after {self.timeout:.0f} s")
            print(f"    timed out after {self.timeout:.0f} s", file=sys.stderr, flush=True)
            return
        except BaseException:
            _end_group(proc)
            raise
        result = None
        for line in stdout.splitlines():
            if line.startswith(CHILD_TAG):
                result = json.loads(line[len(CHILD_TAG) :])
        took = time.perf_counter() - t0
        if proc.returncode != 0 or result is None:
            tail = (stderr or "")[-2000:]
            m.errors.append(f"exit {proc.returncode}: {tail}")
            print(f"    FAILED ({took:.1f} s): {tail}", file=sys.stderr, flush=True)
            return
        result["child_wall_seconds"] = took
        m.runs.append(result)
        secs = result.get("seconds")
        shown = f"{secs:.2f} s measured, " if isinstance(secs, (int, float)) else ""
        print(f"    {shown}{took:.1f} s in the child", file=sys.stderr, flush=True)


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group (the child and its workers), then SIGKILL the rest."""
    import contextlib
    import signal

    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        gone = False
        while not gone and time.monotonic() < deadline:
            proc.poll()  # reap the child, or its zombie keeps the group alive
            try:
                os.killpg(proc.pid, 0)
                time.sleep(0.2)
            except ProcessLookupError:
                gone = True
        if gone:
            break
    with contextlib.suppress(Exception):
        proc.communicate(timeout=5)


@dataclass
class Row:
    """One line of the table."""

    id: str
    target: str
    what: str
    workload: str
    rate: str
    rss: str
    reference: str
    ratio: float | None
    goal: str
    result: str
    inputs: str
    data: dict[str, Any] = field(default_factory=dict)


def _fmt_rate(n: float | None, seconds: float | None, unit: str) -> str:
    if not n or not seconds:
        return "-"
    return f"{n / seconds:,.0f} {unit}"


def _fmt_mib(b: float | None) -> str:
    return "-" if not b else f"{b / MIB:,.0f} MiB"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _reps_text(m: Measured, name: str = "seconds") -> str:
    vals = m.values(name)
    return "[" + ", ".join(f"{v:.2f}" for v in vals) + "]"


def _ratio_text(a: Measured, b: Measured, name: str) -> str:
    x, y = a.median(name), b.median(name)
    return f"{x / y:.2f}" if x and y else "-"


def _error_row(rid: str, target: str, what: str, workload: str, m: Measured) -> Row:
    err = (m.errors[-1] if m.errors else "no result").strip().splitlines()
    return Row(
        rid,
        target,
        what,
        workload,
        "-",
        "-",
        "-",
        None,
        "-",
        "ERROR",
        f"{m.label}: {err[-1] if err else ''}",
    )


# -- the targets ------------------------------------------------------------------------------


def _config(
    dataset: str, learners: Sequence[str], *, limit: int | None, delay: str = "0", **kw: Any
) -> dict[str, Any]:
    from streameval.pipeline.config import ExperimentConfig

    return ExperimentConfig(
        stream=f"bench-{dataset}",
        learners=list(learners),
        dataset=dataset,
        limit=limit,
        delay=delay,
        **kw,
    ).to_dict()


def plan_target1(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    pairs = []
    for dataset, limit, delay in plan.t1:
        for learner in plan.t1_learners:
            ours = b.declare(
                f"T1 evaluate {learner}+window+fading {dataset} delay {delay}",
                {
                    "kind": "evaluate",
                    "config": _config(dataset, [learner], limit=limit, delay=delay, **NB_METRICS),
                },
            )
            peer = b.declare(
                f"T1 river progressive_val_score {learner} {dataset} delay {delay}",
                {
                    "kind": "river",
                    "dataset": dataset,
                    "limit": limit,
                    "delay": delay,
                    "learner": learner,
                },
            )
            pairs.append((dataset, limit, delay, learner, ours, peer))
    b.run_reps([m for p in pairs for m in p[4:]], plan.reps)

    def rows() -> list[Row]:
        out = []
        for i, (dataset, limit, delay, learner, ours, peer) in enumerate(pairs):
            rid = f"1{chr(ord('a') + i)}"
            workload = f"{stream_label(dataset, limit)}, delay {delay}"
            peer_name = "GaussianNB" if learner == "nb" else "HoeffdingTreeClassifier"
            what = f"evaluate {learner}, window(1000)+fading(0.999), all metrics"
            if not ours.runs or not peer.runs:
                out.append(_error_row(rid, "1", what, workload, ours if not ours.runs else peer))
                continue
            n = n_of(dataset, limit)
            s_ours, s_peer = ours.median(), peer.median()
            ratio = s_peer / s_ours
            notes = dict(peer.runs[0].get("peer_features") or {})
            scored = peer.runs[0].get("n_instances")
            if scored is not None and scored != n:
                notes = {
                    **notes,
                    "scored": f"{scored:,} of {n:,} (river skips a prediction its empty model "
                    "cannot make and drops the labels still pending at the end; ours scores "
                    "all)",
                }
            c_ours, c_peer = ours.median("cpu_seconds"), peer.median("cpu_seconds")
            cpu_note = f"; CPU-time ratio {c_peer / c_ours:.2f}" if c_ours and c_peer else ""
            acc_ours = ours.runs[0]["accuracy"].get(learner)
            acc_peer = peer.runs[0]["accuracy"]
            out.append(
                Row(
                    rid,
                    "1",
                    what,
                    workload,
                    _fmt_rate(n, s_ours, "inst/s"),
                    _fmt_mib(ours.peak()),
                    f"river {peer_name} progressive_val_score: {_fmt_rate(n, s_peer, 'inst/s')}"
                    f" ({_fmt_mib(peer.peak())})",
                    ratio,
                    ">= 1.0",
                    _verdict(ratio >= 1.0),
                    f"{n:,} instances; seconds ours {_reps_text(ours)} median {s_ours:.2f}, "
                    f"river {_reps_text(peer)} median {s_peer:.2f}; ratio = {s_peer:.2f}/"
                    f"{s_ours:.2f}; accuracy ours {acc_ours:.4f}, river {acc_peer:.4f}"
                    + cpu_note
                    + (f"; river's features: {notes}" if notes else ""),
                    {"ours": ours.as_dict(), "peer": peer.as_dict()},
                )
            )
        return out

    return rows


def plan_kafka(
    b: Bench, plan: Plan, bootstrap: str, targets: Sequence[str] = ("2", "3")
) -> Callable[[], list[Row]]:
    """Targets 2 and 3 (and the raw references) on the bench broker."""

    def prefix() -> str:
        return f"bench-{uuid.uuid4().hex[:8]}."

    t2, t3, raws = [], [], {}
    for dataset, limit in plan.kafka:
        for learners in plan.kafka_learners if "2" in targets else ():
            kw = dict(NB_METRICS)
            cfg = _config(dataset, learners, limit=limit, **kw)
            ref = b.declare(
                f"T1/T2 evaluate {'+'.join(learners)}+window+fading {dataset} delay 0",
                {"kind": "evaluate", "config": cfg},
            )
            run = b.declare(
                f"T2 run_through_kafka {'+'.join(learners)}+window+fading {dataset}",
                {
                    "kind": "kafka_run",
                    "config": cfg,
                    "pack": 200,
                    "bootstrap": bootstrap,
                    "prefix": prefix(),
                },
            )
            t2.append((dataset, limit, learners, ref, run))
        if "3" not in targets:
            continue
        cfg = _config(dataset, BASELINES, limit=limit)
        ref = b.declare(
            f"T3 evaluate nochange+majority {dataset}", {"kind": "evaluate", "config": cfg}
        )
        for pack in plan.raw_packs:  # the limit; the run with pack 1 only with plan.pack1
            raw = raws.setdefault(
                (dataset, limit, pack),
                b.declare(
                    f"T3 raw produce + consume/json {dataset} pack {pack}",
                    {
                        "kind": "raw",
                        "dataset": dataset,
                        "limit": limit,
                        "pack": pack,
                        "bootstrap": bootstrap,
                        "prefix": prefix(),
                    },
                ),
            )
            run = None
            if pack == 200 or plan.pack1:
                run = b.declare(
                    f"T3 run_through_kafka nochange+majority {dataset} pack {pack}",
                    {
                        "kind": "kafka_run",
                        "config": cfg,
                        "pack": pack,
                        "bootstrap": bootstrap,
                        "prefix": prefix(),
                    },
                )
            t3.append((dataset, limit, pack, ref, raw, run))
    items = [m for x in t2 for m in x[3:]] + [m for x in t3 for m in x[3:] if m is not None]
    b.run_reps(items, plan.reps)

    def kafka_inputs(run: Measured) -> str:
        r = run.runs
        ups = [x["startup_seconds"] for x in r if "startup_seconds" in x]
        after = [x["after_ready_seconds"] for x in r if "after_ready_seconds" in x]
        cpu = [x["worker_cpu_seconds"] for x in r if x.get("worker_cpu_seconds")]
        text = f"run seconds {_reps_text(run)}"
        if ups:
            text += (
                f" = worker start-up (process + Faust + group join) median "
                f"{statistics.median(ups):.2f} s + processing after ready median "
                f"{statistics.median(after):.2f} s"
            )
        if cpu:
            who = "run process (replay thread included)" if r[0].get("inline") else "worker"
            text += f"; {who} CPU median {statistics.median(cpu):.2f} s"
        return text

    def rss(run: Measured) -> str:
        who = "run process" if run.runs[0].get("inline") else "worker"
        return f"{who} {_fmt_mib(run.peak('worker_peak_rss_bytes'))}"

    def steady(run: Measured) -> float | None:
        after = [x["after_ready_seconds"] for x in run.runs if "after_ready_seconds" in x]
        return statistics.median(after) if after else None

    def rows() -> list[Row]:
        out: list[Row] = []
        for i, (dataset, limit, learners, ref, run) in enumerate(t2):
            rid = f"2{chr(ord('a') + i)}"
            workload = f"{stream_label(dataset, limit)}, delay 0, pack 200"
            what = f"run_through_kafka {'+'.join(learners)}, window+fading (`streameval run`)"
            if not run.runs or not ref.runs:
                out.append(_error_row(rid, "2", what, workload, run if not run.runs else ref))
                continue
            ev = run.runs[0]["events"]
            s_run, s_ref = run.median(), ref.median()
            ratio = s_ref / s_run
            st = steady(run)
            note = (
                f"; steady state (after the worker is ready): {ev / st:,.0f} ev/s, "
                f"ratio {s_ref / st:.2f}"
                if st
                else ""
            )
            out.append(
                Row(
                    rid,
                    "2",
                    what,
                    workload,
                    _fmt_rate(ev, s_run, "ev/s"),
                    rss(run),
                    f"evaluate in-process: {_fmt_rate(ev, s_ref, 'ev/s')}",
                    ratio,
                    ">= 0.5",
                    _verdict(ratio >= 0.5),
                    f"{ev:,} events; {kafka_inputs(run)}; evaluate seconds {_reps_text(ref)}; "
                    f"ratio = {s_ref:.2f}/{s_run:.2f}{note}",
                    {"run": run.as_dict(), "reference": ref.as_dict()},
                )
            )
        seen_raw: set[int] = set()
        for i, (dataset, limit, pack, ref, raw, run) in enumerate(t3):
            rid = f"3{chr(ord('a') + i)}"
            workload = f"{stream_label(dataset, limit)}, delay 0, pack {pack}"
            if id(raw) not in seen_raw:
                seen_raw.add(id(raw))
                if raw.runs:
                    ev = raw.runs[0]["events"]
                    s_c, s_p = raw.median(), raw.median("produce_seconds")
                    out.append(
                        Row(
                            f"{rid}-ref",
                            "ref",
                            f"raw confluent-kafka produce; consume + "
                            f"json.loads ({raw.runs[0]['messages']:,} messages)",
                            workload,
                            f"consume {_fmt_rate(ev, s_c, 'ev/s')}",
                            _fmt_mib(raw.peak()),
                            f"produce {_fmt_rate(ev, s_p, 'ev/s')}",
                            None,
                            "-",
                            "ref",
                            f"{ev:,} events; consume+decode seconds {_reps_text(raw)}, produce "
                            f"seconds {_reps_text(raw, 'produce_seconds')}",
                            {"raw": raw.as_dict()},
                        )
                    )
            if run is None:
                continue
            what = "run_through_kafka nochange+majority"
            if not run.runs or not raw.runs:
                out.append(_error_row(rid, "3", what, workload, run if not run.runs else raw))
                continue
            ev = run.runs[0]["events"]
            s_run, s_raw = run.median(), raw.median()
            ratio = s_raw / s_run
            st = steady(run)
            s_ref = ref.median()
            note = f"; steady state {ev / st:,.0f} ev/s, ratio {s_raw / st:.3f}" if st else ""
            if s_ref:
                note += f"; in-process evaluate {_fmt_rate(ev, s_ref, 'ev/s')} {_reps_text(ref)}"
            plain = raws.get((dataset, limit, 1))
            if pack != 1 and plain is not None and plain.median():
                note += (
                    f"; vs raw consume+decode of plain messages "
                    f"{_fmt_rate(ev, plain.median(), 'ev/s')}: ratio {plain.median() / s_run:.3f}"
                )
            out.append(
                Row(
                    rid,
                    "3",
                    what,
                    workload,
                    _fmt_rate(ev, s_run, "ev/s"),
                    rss(run),
                    f"raw consume+decode pack {pack}: {_fmt_rate(ev, s_raw, 'ev/s')}",
                    ratio,
                    ">= 0.25",
                    _verdict(ratio >= 0.25),
                    f"{ev:,} events; {kafka_inputs(run)}; raw consume seconds "
                    f"{_reps_text(raw)}; ratio = {s_raw:.2f}/{s_run:.2f}{note}",
                    {"run": run.as_dict(), "raw": raw.as_dict(), "evaluate": ref.as_dict()},
                )
            )
        return out

    return rows


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b x``: (a, b, R^2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    r2 = (sxy * sxy / (sxx * syy)) if sxx and syy else 0.0
    return a, b, r2


def _fit2(p: list[float], e: list[float], y: list[float]) -> tuple[float, float, float]:
    """Least squares through the origin ``y = a p + b e``: (a, b, R^2)."""
    spp = sum(x * x for x in p)
    see = sum(x * x for x in e)
    spe = sum(x * z for x, z in zip(p, e, strict=True))
    spy = sum(x * z for x, z in zip(p, y, strict=True))
    sey = sum(x * z for x, z in zip(e, y, strict=True))
    det = spp * see - spe * spe
    if not det:
        return 0.0, 0.0, 0.0
    a = (spy * see - sey * spe) / det
    b = (sey * spp - spy * spe) / det
    my = sum(y) / len(y)
    ss_tot = sum((v - my) ** 2 for v in y)
    ss_res = sum((v - a * x - b * z) ** 2 for v, x, z in zip(y, p, e, strict=True))
    return a, b, (1 - ss_res / ss_tot) if ss_tot else 0.0


def _buffer_row(
    pts: list[dict[str, Any]],
    samples: list[dict[str, Any]],
    workload: str,
    delay: int,
    prefix_note: str,
) -> Row:
    """Target 5b: pending-buffer memory (deep size in memory, and pickle) vs pending count."""
    xs = [float(s["pending"]) for s in pts]
    deep = [float(s.get("buffer_deep_bytes") or s["buffer_pickle_bytes"]) for s in pts]
    pick = [float(s["buffer_pickle_bytes"]) for s in pts]
    es = [float(s["entries_held"]) for s in pts]
    a, slope, r2 = _fit(xs, deep)
    _, slope_p, r2_p = _fit(xs, pick)
    per_inst, per_entry, r2_2 = _fit2(xs, es, deep)
    big = [(x, y / x) for x, y in zip(xs, deep, strict=True) if x >= 0.1 * max(xs)]
    per = [v for _, v in big]
    spread = max(per) / min(per)
    ok = spread <= 1.5 and r2 >= 0.9
    keys = (
        max(round(s["entries_held"] / s["pending"]) for s in pts if s["phase"] == "fill")
        if any(s["phase"] == "fill" for s in pts)
        else None
    )
    table = "; ".join(
        f"{s['phase']} {s['pending']}: {s.get('buffer_deep_bytes', 0) / 1024:,.0f} KiB "
        f"({s['entries_held']:,} entries)"
        for s in pts
    )
    bound = (
        f" Entries per pending instance are at most keys x (1 + delay/K) = {keys} x "
        f"{1 + delay // 10} (learners + the two reference baselines), so the worst case is "
        f"{per_inst + keys * (1 + delay // 10) * per_entry:,.0f} B per pending instance."
        if keys
        else ""
    )
    return Row(
        "5b",
        "5",
        "pending-buffer memory vs pending instances (deep size in memory; pickle)",
        workload,
        f"{slope:,.0f} B per pending inst",
        "-",
        f"fit bytes = {a:,.0f} + {slope:,.0f} x pending (R^2 {r2:.3f}); pickle "
        f"{slope_p:,.0f} B/inst (R^2 {r2_p:.3f})",
        spread,
        "bytes/pending constant: spread <= 1.5 and R^2 >= 0.9",
        _verdict(ok),
        f"{len(pts)} samples over fill (no label yet), steady and drain (no features left) "
        f"phases: {table}. Bytes per pending instance {min(per):,.0f}..{max(per):,.0f} "
        f"(spread {spread:.2f} over samples with >= 10% of the max pending). What the memory "
        f"follows: bytes = {per_inst:,.0f} x pending + {per_entry:,.0f} x held prediction "
        f"entries (R^2 {r2_2:.3f}).{bound}{prefix_note}",
        {
            "samples": samples,
            "intercept": a,
            "slope": slope,
            "r2": r2,
            "pickle_slope": slope_p,
            "pickle_r2": r2_p,
            "bytes_per_pending": per_inst,
            "bytes_per_entry": per_entry,
            "r2_pending_and_entries": r2_2,
            "spread": spread,
        },
    )


def plan_targets45(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    delay = int(plan.cov_delay)
    base = {"limit": plan.cov_limit, "delay": plan.cov_delay}
    plain = b.declare(
        f"T4 evaluate 4 learners covtype delay {delay} no re-evaluation",
        {"kind": "evaluate", "config": _config("covtype", FOUR_LEARNERS, **base)},
    )
    levels = sorted({max(1, round(delay * f)) for f in (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)})
    n = n_of("covtype", plan.cov_limit)
    reeval_config = _config("covtype", FOUR_LEARNERS, reeval_k=10, bins=50, **base)
    reeval = b.declare(
        f"T4/T5 evaluate 4 learners covtype delay {delay} K=10 B=50",
        {"kind": "evaluate", "config": reeval_config},
    )
    # The buffer's memory is sampled in a run of its own: sizing it (a deep walk and a
    # pickle) churns memory and slows the rest of the loop, so it stays out of the timings.
    sampled = b.declare(
        f"T5b evaluate 4 learners covtype delay {delay} K=10 B=50, buffer sampled",
        {
            "kind": "evaluate",
            "config": reeval_config,
            "sample_buffer": True,
            "sample_levels": levels,
            "sample_every": max(2, (2 * n) // 7),
        },
    )
    b.run_reps([plain, reeval], plan.reps)
    b.run_reps([sampled], 1)

    def rows() -> list[Row]:
        workload = f"{plan.cov_label}, delay {delay}, learners {'+'.join(FOUR_LEARNERS)}"
        if not plain.runs or not reeval.runs:
            bad = plain if not plain.runs else reeval
            return [
                _error_row("4", "4", "re-evaluation cost", workload, bad),
                _error_row("5", "5", "memory", workload, bad),
            ]
        s_plain, s_re = plain.median(), reeval.median()
        ratio = s_re / s_plain
        ov = reeval.runs[0]["overhead"]
        prefix_note = (
            ""
            if plan.cov_limit is None
            else f" PREFIX: first {plan.cov_limit:,} of 581,012 instances (the steady state of "
            f"{plan.cov_limit - delay:,} labels past the delay, filling and draining included, "
            "fits a 15-minute bench; --full runs the whole stream)."
        )
        out = [
            Row(
                "4",
                "4",
                "evaluate with re-evaluation K=10, B=50",
                workload,
                _fmt_rate(n, s_re, "inst/s"),
                _fmt_mib(reeval.peak()),
                f"same without re-evaluation: {_fmt_rate(n, s_plain, 'inst/s')}",
                ratio,
                "<= 3.0 (cost)",
                _verdict(ratio <= 3.0),
                f"{n:,} instances; seconds with {_reps_text(reeval)}, without "
                f"{_reps_text(plain)} (the buffer is sampled in another run); "
                f"cost ratio = {s_re:.2f}/{s_plain:.2f} "
                f"(CPU time {_ratio_text(reeval, plain, 'cpu_seconds')});"
                f" re-predictions {ov['n_predictions_made']:,} (N_R {ov['N_R']:.1f} per label)."
                + prefix_note,
                {"reeval": reeval.as_dict(), "plain": plain.as_dict()},
            )
        ]
        peak = reeval.peak()
        out.append(
            Row(
                "5a",
                "5",
                "peak RSS, evaluate with re-evaluation K=10, B=50",
                workload,
                _fmt_rate(n, s_re, "inst/s"),
                _fmt_mib(peak),
                "limit 1 GiB",
                peak / GIB,
                "< 1.0 (of 1 GiB)",
                _verdict(peak < GIB),
                f"peak RSS (VmHWM) per repetition {[round(v / MIB) for v in reeval.values('peak_rss_bytes')]} "  # noqa: E501
                f"MiB; max pending {ov['max_pending']:,}, max predictions held "
                f"{ov['max_predictions_held']:,}." + prefix_note,
                {},
            )
        )
        samples = (sampled.runs[0].get("samples") or []) if sampled.runs else []
        pts = [s for s in samples if s["pending"] > 0]
        if len(pts) >= 3:
            out.append(_buffer_row(pts, samples, workload, delay, prefix_note))
        elif not sampled.runs:
            out.append(_error_row("5b", "5", "pending-buffer memory", workload, sampled))
        return out

    return rows


def plan_target6(b: Bench, plan: Plan, bootstrap: str) -> Callable[[], list[Row]]:
    cfg = _config("electricity", ["nb"], limit=plan.curve_limit, **NB_METRICS)
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
                out.append(_error_row(rid, "6", what, workload, m))
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
                    "worker " + " + ".join(_fmt_mib(h) for h in hwm),
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


# -- output -----------------------------------------------------------------------------------

COLUMNS = (
    "#",
    "target",
    "what ran",
    "workload",
    "rate",
    "peak RSS",
    "reference (same run)",
    "ratio",
    "goal",
    "result",
)


def markdown_table(rows: Sequence[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
        vals = (
            r.id,
            r.target,
            r.what,
            r.workload,
            r.rate,
            r.rss,
            r.reference,
            ratio,
            r.goal,
            f"**{r.result}**" if r.result in ("PASS", "FAIL", "ERROR") else r.result,
        )
        lines.append("| " + " | ".join(cell(v) for v in vals) + " |")
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        for pkg in ("river", "confluent-kafka", "faust-streaming", "numpy"):
            info[pkg] = version(pkg)
    except Exception:  # pragma: no cover - metadata is best effort
        pass
    try:
        root = Path(__file__).resolve().parents[1]
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--",
                "pipeline",
                "agents",
                "schemas",
            ],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.split("\n")
        info["git"] = head + (" (+ uncommitted changes)" if any(dirty) else "")
        info["uncommitted"] = [d[3:] for d in dirty if d.strip()]
    except Exception:  # pragma: no cover
        pass
    return info


def write_outputs(out_dir: Path, doc: dict[str, Any], rows: Sequence[Row]) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    m = doc["machine"]
    header = [
        f"# streameval bench ({doc['mode']}, median of {doc['reps']} repetition(s))",
        "",
        f"Run {doc['started']}, {doc['wall_seconds']:.0f} s wall; {m.get('cpus')} CPUs "
        f"({m.get('cpu', '?')}), Python {m.get('python')}, river {m.get('river')}, "
        f"confluent-kafka {m.get('confluent-kafka')}; git {m.get('git', '?')}; "
        f"broker {doc.get('broker', '-')}. Load average (1, 5, 15 min) at the start "
        f"{m.get('loadavg_start')}, at the end {m.get('loadavg_end')}: anything above 0 "
        "besides the bench competes for the same cores.",
        "",
        "",
    ]
    table = markdown_table(rows)
    inputs = ["", "## Inputs of every figure", ""]
    inputs += [f"- **{r.id}** {r.inputs}" for r in rows]
    targets = ["", "## Targets", ""] + [f"{k}. {v}" for k, v in TARGETS.items()]
    summary = ["", "## Verdicts", ""]
    for k in TARGETS:
        got = [r.result for r in rows if r.target == k]
        if got:
            summary.append(f"- target {k}: " + ", ".join(got))
    text = "\n".join(header) + table + "\n" + "\n".join(summary + targets + inputs) + "\n"
    (out_dir / "results.md").write_text(text)
    return table


# -- command line ------------------------------------------------------------------------------


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--quick",
        action="store_true",
        help="tiny prefixes, one repetition: a smoke test (one to two minutes)",
    )
    g.add_argument(
        "--full",
        action="store_true",
        help="whole streams everywhere, more learners (hours on 2 cores)",
    )
    p.add_argument(
        "--reps",
        type=int,
        default=None,
        help="repetitions of every configuration (default 3; --quick 1)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=None,
        metavar="T",
        help="run only these targets (1..6, repeatable or comma-separated)",
    )
    p.add_argument(
        "--out",
        default="bench",
        metavar="DIR",
        help="where results.json and results.md go (default bench/)",
    )
    p.add_argument(
        "--data-dir", default=None, help="directory of the datasets (default: $STREAMEVAL_DATA_DIR)"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="run the in-process configurations under cProfile (DIR/profiles/); "
        "the timings then include the profiler's overhead",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 1 when a target fails (default: only on errors)",
    )


def add_bench_command(sub: Any) -> argparse.ArgumentParser:
    """Register ``streameval bench`` on the subparsers of ``streameval.cli.main``."""
    p = sub.add_parser(
        "bench",
        help="speed and memory against River, raw Kafka and in-process (bench/results.md)",
        description="Speed and memory, every figure a ratio to a reference measured in the "
        "same run (River's progressive_val_score, raw confluent-kafka on the same broker, "
        "in-process evaluate), median of 3 repetitions, each configuration in a fresh "
        "process. Prints the table and writes DIR/results.json and DIR/results.md; "
        "see bench/README.md.",
    )
    add_bench_arguments(p)
    p.set_defaults(handler=cmd_bench)
    return p


def _targets(only: list[str] | None) -> list[str]:
    if not only:
        return list(TARGETS)
    wanted = [t.strip().lower().lstrip("t") for item in only for t in item.split(",")]
    bad = [t for t in wanted if t not in TARGETS]
    if bad:
        raise ValueError(f"unknown targets {bad}; known: {', '.join(TARGETS)}")
    return [t for t in TARGETS if t in wanted]


def cmd_bench(args: argparse.Namespace) -> int:
    import contextlib
    from datetime import datetime, timezone

    plan = PLANS["quick" if args.quick else "full" if args.full else "default"]
    reps = args.reps or plan.reps
    if reps < 1:
        raise ValueError("--reps must be >= 1")
    plan = Plan(**{**plan.__dict__, "reps": reps})
    targets = _targets(args.only)
    data_dir = args.data_dir or os.environ.get("STREAMEVAL_DATA_DIR")
    out_dir = Path(args.out)
    bench = Bench(
        data_dir=data_dir,
        timeout=plan.timeout,
        profile_dir=(out_dir / "profiles") if args.profile else None,
    )
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_start = os.getloadavg()
    print(
        f"streameval bench: mode {plan.mode}, {reps} repetition(s), targets {', '.join(targets)}",
        file=sys.stderr,
    )
    builders: list[Callable[[], list[Row]]] = []
    broker_note = "-"
    with contextlib.ExitStack() as stack:
        if "1" in targets:
            builders.append(plan_target1(bench, plan))
        if "4" in targets or "5" in targets:
            builders.append(plan_targets45(bench, plan))
        if any(t in targets for t in ("2", "3", "6")):
            from streameval.agents.broker import EmbeddedBroker, wait_for_broker
            from streameval.agents.config import KafkaSettings

            settings = KafkaSettings.from_env()
            if settings.bootstrap_servers:
                conf = settings.confluent_config()
                bootstrap = conf.pop("bootstrap.servers")
                wait_for_broker(bootstrap, 10.0, config=conf)
                broker_note = f"configured ({bootstrap})"
                broker = None
            else:
                broker = stack.enter_context(EmbeddedBroker())
                bootstrap = broker.bootstrap
                broker_note = "embedded Tansu (memory storage), one for the whole bench"
            if "2" in targets or "3" in targets:
                builders.append(plan_kafka(bench, plan, bootstrap, targets))
            if "6" in targets:
                builders.append(plan_target6(bench, plan, bootstrap))
            if broker is not None and broker.pid:
                hwm = proc_status_kib(broker.pid)
                if hwm:
                    broker_note += f", broker peak RSS {hwm / 1024:,.0f} MiB"
    rows: list[Row] = []
    for build in builders:
        rows.extend(build())
    order = {"1": 1, "2": 2, "ref": 3, "3": 3, "4": 4, "5": 5, "6": 6}
    rows.sort(key=lambda r: order.get(r.target, 9))  # stable: a reference before its rows
    wall = time.perf_counter() - bench.started
    doc = {
        "mode": plan.mode,
        "reps": reps,
        "started": started,
        "wall_seconds": round(wall, 1),
        "targets": {k: TARGETS[k] for k in targets},
        "plan": {k: v for k, v in plan.__dict__.items()},
        "machine": {
            **machine_info(),
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
        "broker": broker_note,
        "rows": [r.__dict__ for r in rows],
        "measured": {m.label: m.as_dict() for m in bench.measured.values()},
    }
    table = write_outputs(out_dir, doc, rows)
    print(table)
    print(
        f"\n{len(bench.measured)} configurations, bench wall time {wall:.0f} s; "
        f"written to {out_dir}/results.json and {out_dir}/results.md",
        file=sys.stderr,
    )
    for k in targets:
        got = [r.result for r in rows if r.target == k]
        print(f"target {k}: {', '.join(got) or 'no rows'}  -- {TARGETS[k]}")
    if any(r.result == "ERROR" for r in rows):
        return 1
    if args.strict and any(r.result == "FAIL" for r in rows):
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return child_main()
    parser = argparse.ArgumentParser(prog="streameval bench", description=__doc__)
    add_bench_arguments(parser)
    args = parser.parse_args(argv)
    return cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
