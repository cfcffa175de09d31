"""Targets 2 and 3: ``streameval run`` through Kafka against in-process and raw Kafka.

Target 2 compares a run through the bench broker with ``evaluate`` in-process on
the same configuration; target 3 compares the run with the two baselines with
the raw consume + decode rate of the same messages on the same broker (a).
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable, Sequence

from streameval.bench.harness import Bench, Measured
from streameval.bench.plans import BASELINES, NB_METRICS, Plan, experiment_config, stream_label
from streameval.bench.rows import Row, error_row, fmt_mib, fmt_rate, reps_text, verdict
from streameval.bench.target_s3 import t2_pair


def plan_kafka(
    b: Bench, plan: Plan, bootstrap: str, targets: Sequence[str] = ("2", "3")
) -> Callable[[], list[Row]]:
    """Targets 2 and 3 (and the raw references) on the bench broker."""

    def prefix() -> str:
        return f"bench-{uuid.uuid4().hex[:8]}."

    t2, t3, raws = [], [], {}
    for dataset, limit in plan.kafka:
        for learners in plan.kafka_learners if "2" in targets else ():
            cfg = experiment_config(dataset, learners, limit=limit, **NB_METRICS)
            ref, run = t2_pair(b, cfg, bootstrap)
            t2.append((dataset, limit, learners, ref, run))
        if "3" not in targets:
            continue
        cfg = experiment_config(dataset, BASELINES, limit=limit)
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
        text = f"run seconds {reps_text(run)}"
        if ups:
            text += (
                f" = worker start-up (process + Faust + group join) median "
                f"{statistics.median(ups):.2f} s + processing after ready median "
                f"{statistics.median(after):.2f} s"
            )
        if cpu:
            who = "worker"
            if r[0].get("inline"):
                forked = r[0]["runtime"].get("replay") == "process"
                who = "run process (replay " + ("child excluded)" if forked else "thread included)")
            text += f"; {who} CPU median {statistics.median(cpu):.2f} s"
        return text

    def rss(run: Measured) -> str:
        who = "run process" if run.runs[0].get("inline") else "worker"
        return f"{who} {fmt_mib(run.peak('worker_peak_rss_bytes'))}"

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
                out.append(error_row(rid, "2", what, workload, run if not run.runs else ref))
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
                    fmt_rate(ev, s_run, "ev/s"),
                    rss(run),
                    f"evaluate in-process: {fmt_rate(ev, s_ref, 'ev/s')}",
                    ratio,
                    ">= 0.5",
                    verdict(ratio >= 0.5),
                    f"{ev:,} events; {kafka_inputs(run)}; evaluate seconds {reps_text(ref)}; "
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
                            f"consume {fmt_rate(ev, s_c, 'ev/s')}",
                            fmt_mib(raw.peak()),
                            f"produce {fmt_rate(ev, s_p, 'ev/s')}",
                            None,
                            "-",
                            "ref",
                            f"{ev:,} events; consume+decode seconds {reps_text(raw)}, produce "
                            f"seconds {reps_text(raw, 'produce_seconds')}",
                            {"raw": raw.as_dict()},
                        )
                    )
            if run is None:
                continue
            what = "run_through_kafka nochange+majority"
            if not run.runs or not raw.runs:
                out.append(error_row(rid, "3", what, workload, run if not run.runs else raw))
                continue
            ev = run.runs[0]["events"]
            s_run, s_raw = run.median(), raw.median()
            ratio = s_raw / s_run
            st = steady(run)
            s_ref = ref.median()
            note = f"; steady state {ev / st:,.0f} ev/s, ratio {s_raw / st:.3f}" if st else ""
            if s_ref:
                note += f"; in-process evaluate {fmt_rate(ev, s_ref, 'ev/s')} {reps_text(ref)}"
            note += _replay_ceiling(run, s_raw)
            plain = raws.get((dataset, limit, 1))
            if pack != 1 and plain is not None and plain.median():
                note += (
                    f"; vs raw consume+decode of plain messages "
                    f"{fmt_rate(ev, plain.median(), 'ev/s')}: ratio {plain.median() / s_run:.3f}"
                )
            out.append(
                Row(
                    rid,
                    "3",
                    what,
                    workload,
                    fmt_rate(ev, s_run, "ev/s"),
                    rss(run),
                    f"raw consume+decode pack {pack}: {fmt_rate(ev, s_raw, 'ev/s')}",
                    ratio,
                    ">= 0.25",
                    verdict(ratio >= 0.25),
                    f"{ev:,} events; {kafka_inputs(run)}; raw consume seconds "
                    f"{reps_text(raw)}; ratio = {s_raw:.2f}/{s_run:.2f}{note}",
                    {"run": run.as_dict(), "raw": raw.as_dict(), "evaluate": ref.as_dict()},
                )
            )
        return out

    return rows


def _replay_ceiling(run: Measured, s_raw: float) -> str:
    """The part of the row's text on the replay inside the run: producing the stream takes
    that long whatever the evaluation costs, so the raw consume over it bounds the ratio."""
    replays = [
        r["runtime"]["replay_seconds"] for r in run.runs if r["runtime"].get("replay_seconds")
    ]
    if not replays:
        return ""
    s_replay = statistics.median(replays)
    return (
        f"; the replay alone (producing the stream, inside the run) {s_replay:.2f} s median: "
        f"a run that evaluated for free would stay at or below {s_raw / s_replay:.2f}"
    )
