"""``streameval bench``: the options, the run of the chosen targets, the exit status.

:func:`add_bench_command` registers the command on ``streameval``'s subparsers;
:func:`main` is ``python -m streameval.bench`` (and, with ``--child``, a child).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streameval.bench.child import child_main
from streameval.bench.harness import Bench
from streameval.bench.measure import proc_status_kib
from streameval.bench.plans import PLANS, TARGETS, Plan
from streameval.bench.report import machine_info, write_outputs
from streameval.bench.rows import Row
from streameval.bench.speed import plan_speed1, plan_speed2
from streameval.bench.target1 import plan_target1
from streameval.bench.target6 import plan_target6
from streameval.bench.target_moa import plan_target_moa
from streameval.bench.target_s3 import plan_target_s3
from streameval.bench.targets23 import plan_kafka
from streameval.bench.targets45 import plan_targets45


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
        help="run only these targets (1..6, s1, s2, s3, moa; repeatable or comma-separated)",
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
        if "s1" in targets:
            builders.append(plan_speed1(bench, plan))
        if "s2" in targets:
            builders.append(plan_speed2(bench, plan))
        if "moa" in targets:
            builders.append(plan_target_moa(bench, plan))
        if any(t in targets for t in ("2", "3", "6", "s3")):
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
            if "s3" in targets:
                builders.append(plan_target_s3(bench, plan, bootstrap))
            if broker is not None and broker.pid:
                hwm = proc_status_kib(broker.pid)
                if hwm:
                    broker_note += f", broker peak RSS {hwm / 1024:,.0f} MiB"
    rows: list[Row] = []
    for build in builders:
        rows.extend(build())
    order = {
        "1": 1,
        "2": 2,
        "ref": 3,
        "3": 3,
        "4": 4,
        "5": 5,
        "6": 6,
        "s1": 7,
        "s2": 8,
        "s3": 9,
        "moa": 10,
    }
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
    from streameval import bench

    parser = argparse.ArgumentParser(prog="streameval bench", description=bench.__doc__)
    add_bench_arguments(parser)
    args = parser.parse_args(argv)
    return cmd_bench(args)
