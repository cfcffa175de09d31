"""Target ``moa`` (issue 15, target 4): ``moa:`` learners against CapyMOA, and the peers.

For each of naive Bayes and the Hoeffding tree, on the same stream (immediate labels),
every row is a ratio to **CapyMOA's ``prequential_evaluation``** of MOA's learner (MOA's
own Java loop, :mod:`streameval.bench.moa_peer`), measured in the same run:

* streameval ``evaluate`` with ``moa:NaiveBayes`` / ``moa:HoeffdingTree`` and a
  window of 1000 (CapyMOA's windowed evaluator has one too): the target, time ratio
  ``>= 0.8`` and the same accuracy to 4 decimals;
* streameval ``evaluate`` with its own ``nb`` / ``ht`` (River inside);
* River's ``progressive_val_score`` with ``GaussianNB`` / ``HoeffdingTreeClassifier``;
* River's bare loop: ``predict_proba_one`` then ``learn_one``, no metric;
* the same bare loop over streameval's ``moa:`` learner: what the adapter costs
  without the experiment around it (where its time goes:
  :mod:`streameval.bench.moa_split`).

The JVM is started before the clock in the children that use MOA (CapyMOA's
``import`` starts it; streameval's child starts it the same way), so neither side pays
its start-up.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streameval.bench.harness import Bench, Measured
from streameval.bench.measure import profiled
from streameval.bench.plans import Plan, experiment_config, n_of, stream_label
from streameval.bench.rows import Row, error_row, fmt_mib, fmt_rate, reps_text, verdict

#: (streameval's own learner, the MOA class, River's class) of each family.
FAMILIES = (
    ("nb", "NaiveBayes", "GaussianNB"),
    ("ht", "HoeffdingTree", "HoeffdingTreeClassifier"),
)
GOAL = 0.8


def child_capymoa(job: dict[str, Any]) -> dict[str, Any]:
    """CapyMOA's ``prequential_evaluation`` of MOA's ``job["learner"]`` (evaluation timed)."""
    import capymoa  # noqa: F401  (starts the JVM before the clock)

    from streameval.bench.moa_peer import capymoa_prequential, load_rows

    rows = load_rows(job["dataset"], job.get("limit"), job.get("data_dir"))
    with tempfile.TemporaryDirectory() as tmp:
        out = capymoa_prequential(rows, job["learner"], Path(tmp) / "stream.arff")
    return {k: v for k, v in out.items() if k != "predictions"}


def child_river_loop(job: dict[str, Any]) -> dict[str, Any]:
    """River's bare test-then-train loop (no metric), timed around loading and the loop;
    with ``job["moa"]``, the same loop over streameval's ``moa:`` learner (the adapter's
    cost alone, the JVM started before the clock)."""
    from streameval.bench.target1 import _peer_converter, _river_model
    from streameval.pipeline.streams.datasets import load

    if job.get("moa"):
        from streameval.pipeline.learners.moa_java import jvm

        jvm()

    def run() -> tuple[int, int]:
        dataset = load(job["dataset"], data_dir=job.get("data_dir"))
        if job.get("moa"):
            from streameval.pipeline.learners.spec import build_learner

            convert, model = None, build_learner(job["learner"], context=None)
        else:
            convert, _ = _peer_converter(dataset)
            model = _river_model(job["learner"])
        n = hits = 0
        for inst in dataset.iter_instances(job.get("limit")):
            x = convert(inst.x) if convert else inst.x
            proba = model.predict_proba_one(x)
            hits += bool(proba) and max(proba, key=proba.__getitem__) == inst.y
            model.learn_one(x, inst.y)
            n += 1
        return n, hits

    start, cpu = time.perf_counter(), time.process_time()
    n, hits = profiled(job, run)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "n_instances": n,
        "accuracy": hits / n if n else None,
    }


def plan_target_moa(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    dataset, limit = plan.moa_stream
    cases = []
    for ours, moa_name, river_name in FAMILIES:
        peer = b.declare(
            f"moa CapyMOA prequential_evaluation {moa_name} {dataset}",
            {"kind": "capymoa", "dataset": dataset, "limit": limit, "learner": moa_name},
        )
        config = {"limit": limit, "delay": "0", "window": 1000}
        runs = {
            f"moa:{moa_name}": b.declare(
                f"moa evaluate moa:{moa_name} {dataset}",
                {
                    "kind": "evaluate",
                    "warm_jvm": True,
                    "config": experiment_config(dataset, [f"moa:{moa_name}"], **config),
                },
            ),
            ours: b.declare(
                f"moa evaluate {ours} {dataset}",
                {"kind": "evaluate", "config": experiment_config(dataset, [ours], **config)},
            ),
            "pvs": b.declare(
                f"T1 river progressive_val_score {ours} {dataset} delay 0",
                {
                    "kind": "river",
                    "dataset": dataset,
                    "limit": limit,
                    "delay": "0",
                    "learner": ours,
                },
            ),
            "loop": b.declare(
                f"moa river bare loop {ours} {dataset}",
                {"kind": "river_loop", "dataset": dataset, "limit": limit, "learner": ours},
            ),
            "moa_loop": b.declare(
                f"moa bare loop moa:{moa_name} {dataset}",
                {
                    "kind": "river_loop",
                    "moa": True,
                    "dataset": dataset,
                    "limit": limit,
                    "learner": f"moa:{moa_name}",
                },
            ),
        }
        cases.append((ours, moa_name, river_name, peer, runs))
    b.run_reps([m for c in cases for m in (c[3], *c[4].values())], plan.reps)

    def rows() -> list[Row]:
        out: list[Row] = []
        n = n_of(dataset, limit)
        workload = f"{stream_label(dataset, limit)}, immediate labels"
        for i, (ours, moa_name, river_name, peer, runs) in enumerate(cases):
            what = {
                f"moa:{moa_name}": f"evaluate moa:{moa_name}, window(1000)",
                ours: f"evaluate {ours} (River inside), window(1000)",
                "pvs": f"River progressive_val_score {river_name}",
                "loop": f"River bare loop {river_name} (predict_proba_one + learn_one)",
                "moa_loop": f"bare loop of streameval's moa:{moa_name} (the adapter alone)",
            }
            for j, (key, m) in enumerate(runs.items()):
                rid = f"m{i + 1}{chr(ord('a') + j)}"
                out.append(_row(rid, what[key], workload, n, m, peer, moa_name, key))
        return out

    return rows


def _accuracy(m: Measured, key: str) -> float | None:
    acc = m.runs[0].get("accuracy")
    return acc.get(key) if isinstance(acc, dict) else acc


def _row(
    rid: str,
    what: str,
    workload: str,
    n: int,
    m: Measured,
    peer: Measured,
    moa_name: str,
    key: str,
) -> Row:
    if not m.runs or not peer.runs:
        return error_row(rid, "moa", what, workload, m if not m.runs else peer)
    s_m, s_peer = m.median(), peer.median()
    ratio = s_peer / s_m
    acc = _accuracy(m, key)
    acc_peer = peer.runs[0]["accuracy"]
    target = key.startswith("moa:")
    same = acc is not None and round(acc, 4) == round(acc_peer, 4)
    goal = f">= {GOAL} and accuracy = CapyMOA's to 4 decimals" if target else "-"
    result = verdict(ratio >= GOAL and same) if target else "n/a"
    c_m, c_peer = m.median("cpu_seconds"), peer.median("cpu_seconds")
    cpu = f"; CPU-time ratio {c_peer / c_m:.2f}" if c_m and c_peer else ""
    acc_text = "-" if acc is None else f"{acc:.4f}"
    return Row(
        rid,
        "moa",
        what,
        workload,
        fmt_rate(n, s_m, "inst/s"),
        fmt_mib(m.peak()),
        f"CapyMOA prequential_evaluation MOA {moa_name}: {fmt_rate(n, s_peer, 'inst/s')}"
        f" ({fmt_mib(peer.peak())})",
        ratio,
        goal,
        result,
        f"{n:,} instances; seconds {reps_text(m)} median {s_m:.2f}, CapyMOA "
        f"{reps_text(peer)} median {s_peer:.2f}; ratio = {s_peer:.2f}/{s_m:.2f}{cpu}; "
        f"accuracy {acc_text}, CapyMOA {acc_peer:.4f}",
        {"run": m.as_dict(), "peer": peer.as_dict()},
    )
