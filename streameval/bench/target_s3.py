"""Target ``s3`` (issue 15, target 3): ``run`` against the raw broker and against ``evaluate``.

Two rows, each a ratio of two things measured in the same run:

* **s3a**, the two baselines: ``run``'s evaluation side -- the inline consumer and
  :class:`~streameval.agents.worker.StreamWorker` of :mod:`streameval.agents.inline`, as
  ``streameval run`` uses them -- on a topic the replay has already filled, from the call
  to its results delivered on the metrics topic, against the raw consume + ``json.loads`` of
  the same messages (:func:`~streameval.bench.kafka_runs.consume_decode`): both sides read
  the same messages of the same broker in the same child, one after the other (which one
  first alternates with the repetition). The worker's side does what the reference does
  (consume, parse) and everything ``run`` adds: validation, the merge of the two topics,
  the ingest rules, the byte budgets, the evaluation, the results. Goal ``>= 0.25``.
* **s3b**, ``nb`` with window and fading: ``run`` end to end (``run_through_kafka``, the
  children of target 2) against ``evaluate`` in-process, end to end. Goal ``>= 0.8``.

Row 3a (target 3) keeps ``run`` end to end against the raw consume + decode: see
``bench/README.md`` for why the raw reference is compared with the evaluation of a filled
topic here.
"""

from __future__ import annotations

import importlib
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

from streameval.bench.harness import Bench, Measured
from streameval.bench.kafka_runs import RUN_MODULES, consume_decode, kafka_settings
from streameval.bench.plans import BASELINES, NB_METRICS, Plan, experiment_config, stream_label
from streameval.bench.rows import Row, error_row, fmt_mib, fmt_rate, reps_text, verdict

GOAL_A = 0.25
GOAL_B = 0.8


def child_kafka_filled(job: dict[str, Any]) -> dict[str, Any]:
    """Fill fresh topics with a replay (untimed), then time ``run``'s evaluation of them
    and the raw consume + decode of the same messages, in the order ``job["order"]``."""
    from streameval.agents.run import replay_dataset, submit_experiment
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare

    for module in RUN_MODULES:  # imported before any clock, as in the run child
        importlib.import_module(module)
    settings = kafka_settings(job)
    names = ensure_topics(
        settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix
    )
    config = ExperimentConfig.from_dict(
        {**job["config"], "stream": f"bench-{uuid.uuid4().hex[:10]}"}
    )
    _, config = prepare(config, job.get("data_dir"))
    worker = _worker(settings)  # its producer ready by the clock, as the raw side's consumer
    submit_experiment(settings, config)
    stats = replay_dataset(
        settings, config, speed=None, pack=int(job.get("pack", 200)), progress=False,
        data_dir=job.get("data_dir"),
    )  # fmt: skip
    out: dict[str, Any] = {"events": stats.n_events, "messages": stats.n_messages}
    for side in job.get("order", ("raw", "run")):
        cpu = time.thread_time()
        if side == "raw":
            seconds, decoded = consume_decode(
                settings, [names.features, names.labels], stats.n_messages
            )
            out.update(raw_seconds=seconds, events_decoded=decoded)
            out["raw_cpu_seconds"] = time.thread_time() - cpu
        else:
            out.update(_evaluate_filled(settings, worker, config, float(job.get("timeout", 600))))
            out["cpu_seconds"] = time.thread_time() - cpu
    return out


def _worker(settings: Any) -> Any:
    """``run``'s worker, made before the fill, as the raw side's consumer is made and has
    its metadata before its clock starts.

    A new idempotent producer delivered a message produced in its first moments only at
    librdkafka's next try for its producer id, 0.5 or 1.0 s after it was made: a worker made
    just before the clock had the baselines' results delivered at 0.5 s or 1.0 s in 4 runs of
    6. Every producer now asks for the cluster's metadata when made, which gets it its id at
    once (:mod:`streameval.agents.first_delivery`).
    """
    from streameval.agents.worker import StreamWorker

    return StreamWorker(
        settings, key=secrets.token_bytes(32), checkpoint_every=2**62, predictions=False,
        checkpoints=False,
    )  # fmt: skip


def _evaluate_filled(settings: Any, worker: Any, config: Any, timeout: float) -> dict[str, Any]:
    """``run``'s ``worker`` on the filled input topics, read from their start."""
    from streameval.agents.inline import consume_stream
    from streameval.agents.topics import INPUT_KINDS, TopicNames

    names = TopicNames.for_prefix(settings.topic_prefix)
    start = {
        (topic, p): 0 for topic in names.kinds(INPUT_KINDS) for p in range(settings.partitions)
    }
    t0 = time.perf_counter()
    consume_stream(settings, worker, config.stream, start, timeout=timeout)
    seconds = time.perf_counter() - t0  # its results delivered to the metrics topic
    results = worker.runners[config.stream].results()
    worker.publisher.close(10.0)
    return {
        "seconds": seconds,
        "n_labelled": results["n_labelled"],
        "accuracy": {k: v.get("accuracy") for k, v in results["learners"].items()},
    }


def plan_target_s3(b: Bench, plan: Plan, bootstrap: str) -> Callable[[], list[Row]]:
    """Rows s3a and s3b (see the module docstring)."""
    filled, pairs = [], []
    for dataset, limit in plan.kafka:
        cfg = experiment_config(dataset, BASELINES, limit=limit)
        job = {"kind": "kafka_filled", "config": cfg, "pack": 200, "bootstrap": bootstrap}
        # one configuration per order, so that the repetitions alternate which side goes first
        sides = [
            b.declare(
                f"S3 run on a filled topic vs raw consume+decode, {dataset} ({' then '.join(o)})",
                {**job, "prefix": "bench-s3.", "order": list(o)},
            )
            for o in (("raw", "run"), ("run", "raw"))
        ]
        filled.append((dataset, limit, sides))
        nb = experiment_config(dataset, ["nb"], limit=limit, **NB_METRICS)
        pairs.append((dataset, limit, *t2_pair(b, nb, bootstrap)))
    b.run_reps([m for x in filled for m in x[2]] + [m for x in pairs for m in x[2:]], plan.reps)

    def rows() -> list[Row]:
        out = []
        for i, (dataset, limit, sides) in enumerate(filled):
            out.append(_row_a(f"s3{chr(ord('a') + 2 * i)}", dataset, limit, sides))
        for i, (dataset, limit, ref, run) in enumerate(pairs):
            out.append(_row_b(f"s3{chr(ord('b') + 2 * i)}", dataset, limit, ref, run))
        return out

    return rows


def t2_pair(b: Bench, cfg: dict[str, Any], bootstrap: str) -> tuple[Measured, Measured]:
    """Target 2's ``evaluate`` and ``run_through_kafka`` of ``cfg`` (the same measurements
    when both targets run)."""
    learners = "+".join(cfg["learners"])
    ref = b.declare(
        f"T1/T2 evaluate {learners}+window+fading {cfg['dataset']} delay 0",
        {"kind": "evaluate", "config": cfg},
    )
    run = b.declare(
        f"T2 run_through_kafka {learners}+window+fading {cfg['dataset']}",
        {"kind": "kafka_run", "config": cfg, "pack": 200, "bootstrap": bootstrap,
         "prefix": "bench-t2."},
    )  # fmt: skip
    return ref, run


def _row_a(rid: str, dataset: str, limit: int | None, sides: list[Measured]) -> Row:
    workload = f"{stream_label(dataset, limit)}, delay 0, pack 200, topic filled first"
    what = "`run`'s evaluation (inline consumer + worker) of a filled topic, nochange+majority"
    runs = [r for m in sides for r in m.runs]
    if not runs:
        return error_row(rid, "s3", what, workload, sides[0] if sides[0].errors else sides[1])
    merged = Measured("", {}, "", runs=runs)
    s_run, s_raw = merged.median(), merged.median("raw_seconds")
    ev = runs[0]["events"]
    ratio = s_raw / s_run
    pairs = ", ".join(f"{r['raw_seconds']:.3f}/{r['seconds']:.3f}" for r in runs)
    cpu = merged.median("raw_cpu_seconds"), merged.median("cpu_seconds")
    return Row(
        rid,
        "s3",
        what,
        workload,
        fmt_rate(ev, s_run, "ev/s"),
        fmt_mib(merged.peak()),
        f"raw consume+decode of the same messages: {fmt_rate(ev, s_raw, 'ev/s')}",
        ratio,
        f">= {GOAL_A}",
        verdict(ratio >= GOAL_A),
        f"{ev:,} events, {runs[0]['messages']:,} messages; raw/run seconds per repetition "
        f"[{pairs}]; ratio = {s_raw:.3f}/{s_run:.3f}; main-thread CPU medians raw "
        f"{cpu[0]:.2f} s, run {cpu[1]:.2f} s; accuracy {runs[0]['accuracy']}",
        {"sides": [m.as_dict() for m in sides]},
    )


def _row_b(rid: str, dataset: str, limit: int | None, ref: Measured, run: Measured) -> Row:
    workload = f"{stream_label(dataset, limit)}, delay 0, pack 200"
    what = "`run` nb, window+fading, end to end (run_through_kafka)"
    if not run.runs or not ref.runs:
        return error_row(rid, "s3", what, workload, run if not run.runs else ref)
    ev = run.runs[0]["events"]
    s_run, s_ref = run.median(), ref.median()
    ratio = s_ref / s_run
    replay = run.runs[0]["runtime"].get("replay", "thread")
    return Row(
        rid,
        "s3",
        what,
        workload,
        fmt_rate(ev, s_run, "ev/s"),
        f"run process {fmt_mib(run.peak('worker_peak_rss_bytes'))}",
        f"evaluate in-process: {fmt_rate(ev, s_ref, 'ev/s')}",
        ratio,
        f">= {GOAL_B}",
        verdict(ratio >= GOAL_B),
        f"{ev:,} events; run seconds {reps_text(run)} (replay in a {replay}), evaluate "
        f"seconds {reps_text(ref)}; ratio = {s_ref:.2f}/{s_run:.2f}; run process CPU "
        f"median {run.median('worker_cpu_seconds') or 0:.2f} s (the replay's child excluded), "
        f"evaluate CPU median {ref.median('cpu_seconds') or 0:.2f} s",
        {"run": run.as_dict(), "reference": ref.as_dict()},
    )
