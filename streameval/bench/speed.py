"""Speed target 2 of issue 15: ``evaluate`` with the two baselines, every metric on.

The columnar core (:mod:`streameval.pipeline.columnar`) evaluates No-Change and
Majority from arrays; the row gives its rate in labelled instances per second
(goal: 300,000 on Electricity) and, as the reference, the per-event core on the
same configuration in the same run (the ratio is per-event seconds / columnar
seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streameval.bench.harness import Bench
from streameval.bench.measure import profiled
from streameval.bench.plans import BASELINES, NB_METRICS, Plan, experiment_config, stream_label
from streameval.bench.rows import Row, error_row, fmt_mib, fmt_rate, reps_text, verdict

GOAL = 300_000  # labelled instances per second


def child_evaluate_per_event(job: dict[str, Any]) -> dict[str, Any]:
    """``evaluate``'s loop on the per-event core only (the reference of the row)."""
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import drive, expected_events, prepare, schedule
    from streameval.pipeline.experiment import Experiment

    def run() -> dict[str, Any]:
        dataset, config = prepare(ExperimentConfig.from_dict(job["config"]), job.get("data_dir"))
        total = expected_events(config, dataset)
        return drive(Experiment(config), schedule(config, dataset), total, False, None)

    start, cpu = time.perf_counter(), time.process_time()
    results = profiled(job, run)
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,
        "n_labelled": results["n_labelled"],
        "accuracy": {k: v.get("accuracy") for k, v in results["learners"].items()},
    }


def plan_speed2(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    """Columnar ``evaluate`` of the baselines on Electricity, and the per-event reference."""
    dataset, limit, _ = plan.t1[0]
    config = experiment_config(dataset, BASELINES, limit=limit, **NB_METRICS)
    ours = b.declare(
        f"S2 evaluate nochange+majority+window+fading {dataset} (columnar)",
        {"kind": "evaluate", "config": config},
    )
    ref = b.declare(
        f"S2 evaluate nochange+majority+window+fading {dataset} (per-event)",
        {"kind": "evaluate_per_event", "config": config},
    )
    b.run_reps([ours, ref], plan.reps)

    def rows() -> list[Row]:
        what = "evaluate nochange+majority, window(1000)+fading(0.999), all metrics"
        workload = f"{stream_label(dataset, limit)}, delay 0"
        if not ours.runs or not ref.runs:
            return [error_row("s2", "s2", what, workload, ours if not ours.runs else ref)]
        n = ref.runs[0]["n_labelled"]
        s_ours, s_ref = ours.median(), ref.median()
        rate = n / s_ours
        same = ours.runs[0]["accuracy"] == ref.runs[0]["accuracy"]
        return [
            Row(
                "s2",
                "s2",
                what,
                workload,
                fmt_rate(n, s_ours, "labelled/s"),
                fmt_mib(ours.peak()),
                f"per-event core: {fmt_rate(n, s_ref, 'labelled/s')} ({fmt_mib(ref.peak())})",
                s_ref / s_ours,
                f">= {GOAL:,} labelled/s",
                verdict(rate >= GOAL),
                f"{n:,} labelled; seconds (whole call, dataset read included) columnar "
                f"{reps_text(ours)} median {s_ours:.2f}, per-event {reps_text(ref)} median "
                f"{s_ref:.2f}; ratio = {s_ref:.2f}/{s_ours:.2f}; same accuracies: {same}",
                {"ours": ours.as_dict(), "reference": ref.as_dict()},
            )
        ]

    return rows
