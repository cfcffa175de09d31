"""The in-process child: ``streameval.pipeline.evaluate`` for one configuration, timed.

The reference (c) of every target, and the measured run of targets 4 and 5 (with
``sample_buffer`` the pending buffer's size is sampled as the run goes).
"""

from __future__ import annotations

import time
from typing import Any

from streameval.bench.measure import deep_sizeof, proc_status_kib, profiled


def child_evaluate(job: dict[str, Any]) -> dict[str, Any]:
    """``streameval.pipeline.evaluate.evaluate`` for one config (timed around the whole call)."""
    from streameval.pipeline.config import ExperimentConfig

    config = ExperimentConfig.from_dict(job["config"])
    if job.get("warm_jvm"):  # moa: learners: the JVM starts before the clock, as CapyMOA's
        from streameval.pipeline.learners.moa_java import jvm

        jvm()
    if job.get("sample_buffer"):
        return _evaluate_sampled(config, job)
    from streameval.pipeline.evaluate import evaluate_config

    start, cpu = time.perf_counter(), time.process_time()
    results = profiled(job, lambda: evaluate_config(config, data_dir=job.get("data_dir")))
    seconds = time.perf_counter() - start
    helper = results["runtime"].get("helper") or {}  # a split run's second process
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu + helper.get("cpu_seconds", 0.0),
        "helper_peak_rss_bytes": helper.get("peak_rss_bytes", 0),
        "processes": results["runtime"].get("processes", 1),
        "loop_seconds": results["runtime"]["seconds"],
        "events": results["runtime"]["events"],
        "n_instances": results["n_instances"],
        "accuracy": {k: v.get("accuracy") for k, v in results["learners"].items()},
        "overhead": results["overhead"],
        "path": results["runtime"].get("path", "per-event"),
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
    results = profiled(job, run)
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
