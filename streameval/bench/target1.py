"""Target 1: in-process ``evaluate`` against River's ``progressive_val_score`` (the peer).

The peer child runs ``river.evaluate.progressive_val_score`` with river's own
learner (``GaussianNB`` for ``nb``, ``HoeffdingTreeClassifier`` for ``ht``) and
``metrics.Accuracy`` on the same stream and delay; a time-based delay becomes
river's ``moment`` and ``delay`` callables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from streameval.bench.harness import Bench
from streameval.bench.measure import profiled
from streameval.bench.plans import NB_METRICS, Plan, experiment_config, n_of, stream_label
from streameval.bench.rows import Row, error_row, fmt_mib, fmt_rate, reps_text, verdict


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
    metric, notes = profiled(job, run)
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


def plan_target1(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    pairs = []
    for dataset, limit, delay in plan.t1:
        for learner in plan.t1_learners:
            ours = b.declare(
                f"T1 evaluate {learner}+window+fading {dataset} delay {delay}",
                {
                    "kind": "evaluate",
                    "config": experiment_config(
                        dataset, [learner], limit=limit, delay=delay, **NB_METRICS
                    ),
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
                out.append(error_row(rid, "1", what, workload, ours if not ours.runs else peer))
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
                    fmt_rate(n, s_ours, "inst/s"),
                    fmt_mib(ours.peak()),
                    f"river {peer_name} progressive_val_score: {fmt_rate(n, s_peer, 'inst/s')}"
                    f" ({fmt_mib(peer.peak())})",
                    ratio,
                    ">= 1.0",
                    verdict(ratio >= 1.0),
                    f"{n:,} instances; seconds ours {reps_text(ours)} median {s_ours:.2f}, "
                    f"river {reps_text(peer)} median {s_peer:.2f}; ratio = {s_peer:.2f}/"
                    f"{s_ours:.2f}; accuracy ours {acc_ours:.4f}, river {acc_peer:.4f}"
                    + cpu_note
                    + (f"; river's features: {notes}" if notes else ""),
                    {"ours": ours.as_dict(), "peer": peer.as_dict()},
                )
            )
        return out

    return rows
