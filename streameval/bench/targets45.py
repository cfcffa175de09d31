"""Targets 4 and 5: the cost of re-evaluation, peak RSS, the pending buffer's memory, and
the whole-covtype time of issue 15.

Target 4 is the time ratio of a run with re-evaluation to the same run without
it; target 5 the peak RSS of that run (5a), the pending buffer's size,
sampled in a run of its own, fitted against the pending count (5b), and (``--full``, the
whole stream) the wall time of that run against issue 15's five minutes (5c).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streameval.bench.harness import Bench
from streameval.bench.plans import FOUR_LEARNERS, Plan, experiment_config, n_of
from streameval.bench.rows import (
    GIB,
    MIB,
    Row,
    error_row,
    fmt_mib,
    fmt_rate,
    ratio_text,
    reps_text,
    verdict,
)


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
        verdict(ok),
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


#: Issue 15, target 5: the whole covtype run with re-evaluation, in seconds of wall time.
WHOLE_COVTYPE_SECONDS = 300.0


def _time_row(
    reeval: Any, plain: Any, floors: dict[str, Any], workload: str, n: int, whole: bool
) -> Row:
    """Target 5c: the re-evaluation run's wall time against five minutes (whole stream only:
    a prefix has no verdict, the cost per instance grows with the tree). ``floors``: River's
    bare loops of the run's learners alone, the part of the five minutes no evaluation
    can give back."""
    s_re, s_plain = reeval.median(), plain.median()
    cpu = reeval.median("cpu_seconds")
    floor = _floor_text(floors)
    return Row(
        "5c",
        "5",
        "wall time, evaluate with re-evaluation K=10, B=50" + _processes_note(reeval),
        workload,
        f"{s_re:,.1f} s ({fmt_rate(n, s_re, 'inst/s')})",
        fmt_mib(reeval.peak()),
        f"limit {WHOLE_COVTYPE_SECONDS:.0f} s; the same run without re-evaluation "
        f"{s_plain:,.1f} s{floor}",
        s_re / WHOLE_COVTYPE_SECONDS if whole else None,
        f"<= 1.0 (of {WHOLE_COVTYPE_SECONDS:.0f} s, whole stream)",
        verdict(s_re <= WHOLE_COVTYPE_SECONDS) if whole else verdict(None),
        f"seconds (wall) {reps_text(reeval)}, CPU seconds {reps_text(reeval, 'cpu_seconds')} "
        f"(median {cpu or 0:,.1f}); "
        + ("whole stream." if whole else "PREFIX: no verdict; --full runs the whole stream."),
        {},
    )


def _processes_note(reeval: Any) -> str:
    """How many processes the re-evaluation run used (``evaluate``'s default: two when the
    machine has two CPUs, :mod:`streameval.pipeline.split`); CPU time and peak RSS are
    those of both."""
    n = reeval.runs[0].get("processes", 1) if reeval.runs else 1
    return "" if n == 1 else f", on {n} processes (CPU time and peak RSS of both)"


def _floor_text(floors: dict[str, Any]) -> str:
    """River's bare loops (``predict_proba_one`` then ``learn_one``, no metric) of the
    learners that have a River model, in seconds, and their sum."""
    done = {name: m.median() for name, m in floors.items() if m.runs}
    if not done:
        return ""
    parts = " + ".join(f"{name} {s:,.1f} s" for name, s in done.items())
    return f"; River's bare loops of the same models alone: {parts} = {sum(done.values()):,.1f} s"


def plan_targets45(b: Bench, plan: Plan) -> Callable[[], list[Row]]:
    delay = int(plan.cov_delay)
    base = {"limit": plan.cov_limit, "delay": plan.cov_delay}
    plain = b.declare(
        f"T4 evaluate 4 learners covtype delay {delay} no re-evaluation",
        {"kind": "evaluate", "config": experiment_config("covtype", FOUR_LEARNERS, **base)},
    )
    levels = sorted({max(1, round(delay * f)) for f in (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)})
    n = n_of("covtype", plan.cov_limit)
    reeval_config = experiment_config("covtype", FOUR_LEARNERS, reeval_k=10, bins=50, **base)
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
    floors = {
        learner: b.declare(
            f"T5 river bare loop {learner} covtype",
            {
                "kind": "river_bare",
                "dataset": "covtype",
                "limit": plan.cov_limit,
                "learner": learner,
            },
        )
        for learner in ("nb", "ht")
    }
    b.run_reps([plain, reeval, *floors.values()], plan.reps)
    b.run_reps([sampled], 1)

    def rows() -> list[Row]:
        workload = f"{plan.cov_label}, delay {delay}, learners {'+'.join(FOUR_LEARNERS)}"
        if not plain.runs or not reeval.runs:
            bad = plain if not plain.runs else reeval
            return [
                error_row("4", "4", "re-evaluation cost", workload, bad),
                error_row("5", "5", "memory", workload, bad),
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
                "evaluate with re-evaluation K=10, B=50" + _processes_note(reeval),
                workload,
                fmt_rate(n, s_re, "inst/s"),
                fmt_mib(reeval.peak()),
                f"same without re-evaluation: {fmt_rate(n, s_plain, 'inst/s')}",
                ratio,
                "<= 3.0 (cost)",
                verdict(ratio <= 3.0),
                f"{n:,} instances; seconds with {reps_text(reeval)}, without "
                f"{reps_text(plain)} (the buffer is sampled in another run); "
                f"cost ratio = {s_re:.2f}/{s_plain:.2f} "
                f"(CPU time {ratio_text(reeval, plain, 'cpu_seconds')});"
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
                "peak RSS, evaluate with re-evaluation K=10, B=50" + _processes_note(reeval),
                workload,
                fmt_rate(n, s_re, "inst/s"),
                fmt_mib(peak),
                "limit 1 GiB",
                peak / GIB,
                "< 1.0 (of 1 GiB)",
                verdict(peak < GIB),
                f"peak RSS (VmHWM) per repetition {[round(v / MIB) for v in reeval.values('peak_rss_bytes')]} "  # noqa: E501
                f"MiB; max pending {ov['max_pending']:,}, max predictions held "
                f"{ov['max_predictions_held']:,}." + prefix_note,
                {},
            )
        )
        out.append(_time_row(reeval, plain, floors, workload, n, plan.cov_limit is None))
        samples = (sampled.runs[0].get("samples") or []) if sampled.runs else []
        pts = [s for s in samples if s["pending"] > 0]
        if len(pts) >= 3:
            out.append(_buffer_row(pts, samples, workload, delay, prefix_note))
        elif not sampled.runs:
            out.append(error_row("5b", "5", "pending-buffer memory", workload, sampled))
        return out

    return rows
