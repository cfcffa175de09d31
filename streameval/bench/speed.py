"""Speed targets 1 and 2 of issue 15: what the evaluation costs around the learners.

* **s1** -- ``evaluate`` with ``nb`` and with ``ht``, every default metric (the prequential
  AUC on binary streams, the kappa family against both reference baselines, the
  temporal-dependence diagnostics, a snapshot every 1 % of the stream), against River's
  bare loop over *the same model* (the River model inside streameval's learner, built
  from the same spec): ``predict_proba_one`` then ``learn_one`` for each instance, no
  metric at all, on the same rows read by the same reader. Both sides are timed around
  the whole call, the dataset read included. Goal: >= 0.9.
* **s2** -- ``evaluate`` with the two baselines, every metric on, window and fading: its
  rate in labelled instances per second (goal: 300,000 on Electricity) and, as the
  reference, the per-event core on the same configuration in the same run (the ratio
  is per-event seconds / columnar seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streameval.bench.harness import Bench, Measured
from streameval.bench.measure import profiled
from streameval.bench.plans import (
    BASELINES,
    NB_METRICS,
    Plan,
    experiment_config,
    n_of,
    stream_label,
)
from streameval.bench.rows import Row, error_row, fmt_mib, fmt_rate, reps_text, verdict

GOAL = 300_000  # labelled instances per second
GOAL_S1 = 0.9  # of River's bare loop


def child_river_bare(job: dict[str, Any]) -> dict[str, Any]:
    """River's bare test-then-train loop over the River model of streameval's learner
    ``job["learner"]`` (no metric), timed around the dataset read and the loop."""
    from streameval.pipeline.learners.spec import build_learner
    from streameval.pipeline.streams.datasets import load

    def run() -> int:
        model = build_learner(job["learner"], context=None).model
        predict, learn = model.predict_proba_one, model.learn_one
        n = 0
        dataset = load(job["dataset"], data_dir=job.get("data_dir"))
        for inst in dataset.iter_instances(job.get("limit")):
            predict(inst.x)
            learn(inst.x, inst.y)
            n += 1
        return n

    start, cpu = time.perf_counter(), time.process_time()
    n = profiled(job, run)
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,
        "n_instances": n,
    }


def plan_speed1(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    """``evaluate`` with the CLI's default metrics against River's bare loop, same model."""
    cases = []
    for dataset, limit in plan.s1:
        for learner in ("nb", "ht"):
            ours = b.declare(
                f"S1 evaluate {learner} {dataset} default metrics",
                {
                    "kind": "evaluate",
                    "config": experiment_config(
                        dataset, [learner], limit=limit, snapshot_every=None
                    ),
                },
            )
            peer = b.declare(
                f"S1 river bare loop {learner} {dataset}",
                {"kind": "river_bare", "dataset": dataset, "limit": limit, "learner": learner},
            )
            cases.append((dataset, limit, learner, ours, peer))
    b.run_reps([m for c in cases for m in c[3:]], plan.reps)

    def rows() -> list[Row]:
        return [_speed1_row(f"s1{chr(ord('a') + i)}", *case) for i, case in enumerate(cases)]

    return rows


def _speed1_row(
    rid: str, dataset: str, limit: int | None, learner: str, ours: Measured, peer: Measured
) -> Row:
    what = f"evaluate {learner}, default metrics (AUC, kappa family, diagnostics, snapshots 1 %)"
    workload = f"{stream_label(dataset, limit)}, immediate labels"
    if not ours.runs or not peer.runs:
        return error_row(rid, "s1", what, workload, ours if not ours.runs else peer)
    n = n_of(dataset, limit)
    s_ours, s_peer = ours.median(), peer.median()
    ratio = s_peer / s_ours
    c_ours, c_peer = ours.median("cpu_seconds"), peer.median("cpu_seconds")
    cpu = f"; CPU-time ratio {c_peer / c_ours:.2f}" if c_ours and c_peer else ""
    model = "MixedNB" if learner == "nb" else "HoeffdingTreeClassifier"
    return Row(
        rid,
        "s1",
        what,
        workload,
        fmt_rate(n, s_ours, "inst/s"),
        fmt_mib(ours.peak()),
        f"River bare loop, {model} (the same model): {fmt_rate(n, s_peer, 'inst/s')}"
        f" ({fmt_mib(peer.peak())})",
        ratio,
        f">= {GOAL_S1}",
        verdict(ratio >= GOAL_S1),
        f"{n:,} instances; seconds ours {reps_text(ours)} median {s_ours:.2f}, bare loop "
        f"{reps_text(peer)} median {s_peer:.2f}; ratio = {s_peer:.2f}/{s_ours:.2f}{cpu}; "
        f"accuracy {ours.runs[0]['accuracy'].get(learner):.4f}; path "
        f"{ours.runs[0].get('path', '-')}",
        {"ours": ours.as_dict(), "peer": peer.as_dict()},
    )


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
