"""What streameval's Java loops save a ``moa:`` learner: ``python -m streameval.bench.moa_loops``.

In one process, each experiment runs with the loops of
:func:`~streameval.pipeline.learners.moa_java.loops` (a block of rows in one crossing
into Java) and without them (the same rows call by call, as when the Java class cannot
be loaded), alternated after a warm-up run (the JVM's JIT, the dataset's cache); the
medians of the wall times, and whether the two results documents are equal (they must
be). The profile of target ``moa`` in bench/README.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.learners import moa, moa_java

#: The experiments compared: immediate labels (blocks of test-then-train) and delayed
#: labels with continuous re-evaluation (batches of predictions).
CASES = {
    "electricity, delay 0, moa:HoeffdingTree": ExperimentConfig(
        "a", ["moa:HoeffdingTree"], dataset="electricity", delay="0", window=1000
    ),
    "electricity, delay 0, moa:NaiveBayes": ExperimentConfig(
        "a", ["moa:NaiveBayes"], dataset="electricity", delay="0", window=1000
    ),
    "covtype 8,000, delay 1000, K=10, B=50, baselines + moa:HoeffdingTree + moa:NaiveBayes": (
        ExperimentConfig(
            "b",
            ["nochange", "majority", "moa:HoeffdingTree", "moa:NaiveBayes"],
            dataset="covtype",
            delay="1000",
            limit=8000,
            reeval_k=10,
            bins=50,
        )
    ),
}


def compare(cfg: ExperimentConfig, reps: int, data_dir: str | None) -> dict[str, Any]:
    """Seconds with and without the loops (``reps`` each, alternated) and equal results."""
    real = moa_java.loops
    seconds: dict[bool, list[float]] = {True: [], False: []}
    documents: dict[bool, Any] = {}
    evaluate_config(cfg, data_dir=data_dir)  # warm-up
    try:
        for rep in range(reps):
            for on in (True, False) if rep % 2 == 0 else (False, True):
                moa.loops = real if on else _none
                start = time.perf_counter()
                document = evaluate_config(cfg, data_dir=data_dir)
                seconds[on].append(time.perf_counter() - start)
                document.pop("runtime", None)
                documents[on] = document
    finally:
        moa.loops = real
    return {
        "loops": statistics.median(seconds[True]),
        "call by call": statistics.median(seconds[False]),
        "equal": documents[True] == documents[False],
    }


def _none() -> None:
    return None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m streameval.bench.moa_loops")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args(argv)
    moa_java.jvm()
    if moa_java.loops() is None:
        raise SystemExit("moa_loops: the Java class streameval.moa.Loops does not load")
    for name, cfg in CASES.items():
        got = compare(cfg, args.reps, args.data_dir)
        gain = got["call by call"] / got["loops"]
        print(
            f"{name}: loops {got['loops']:.2f} s, call by call {got['call by call']:.2f} s "
            f"(x{gain:.2f}); results equal: {got['equal']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
