"""Where a ``moa:`` learner's time goes, per instance: its Python, JPype's crossings, MOA.

The profile of target ``moa`` (bench/README.md), ``python -m streameval.bench.moa_split``.
Learners are warm (the first ``warm`` instances learnt), then ``predict_proba_one`` +
``learn_one`` run over the next ``n``, best of ``reps``, in main-thread CPU time
(:func:`time.thread_time`: the Java code the adapter calls runs on this thread, MOA's
JIT compiler and garbage collector on others):

* **python**: the adapter's Python code alone, its Java objects replaced by Python
  stand-ins (a list for the buffer, a fixed array of votes, a training that does nothing);
* **crossings**: ``moa:MajorityClass``, whose Java work is next to nothing, less *python*;
* **MOA**: each learner less ``moa:MajorityClass``.

:func:`crossings` times each call into Java alone, on a warm ``moa:MajorityClass``.
"""

from __future__ import annotations

import argparse
import array
import time
from collections.abc import Callable, Sequence
from typing import Any

from streameval.pipeline.learners.moa import MOAClassifier, _jvm
from streameval.pipeline.streams.base import Instance


def _run(model: Any, rows: Sequence[Instance]) -> None:
    for r in rows:
        model.predict_proba_one(r.x)
        model.learn_one(r.x, r.y)


def _best_us(fn: Callable[[], Any], per: int, reps: int) -> float:
    """Microseconds of main-thread CPU per unit (``per`` units a call), best of ``reps``."""
    best = float("inf")
    for _ in range(reps):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best / per * 1e6


def python_only(name: str, warm: Sequence[Instance]) -> MOAClassifier:
    """A warm ``moa:NAME`` whose Java objects are Python stand-ins (the adapter's Python alone)."""
    model = MOAClassifier(name)
    _run(model, warm)
    votes = array.array("d", memoryview(model._votes(model._instance)).tolist())
    model._buffer = [0.0] * (len(model._features) + 1)
    model._votes = lambda instance: votes
    model._train = lambda instance: None
    return model


def split(
    names: Sequence[str], rows: Sequence[Instance], warm: int, reps: int
) -> dict[str, dict[str, float]]:
    """Per learner of ``names``: microseconds per instance, total and its three parts."""
    _jvm()
    head, tail = rows[:warm], rows[warm:]
    per = len(tail)

    def timed(model: Any) -> float:
        return _best_us(lambda: _run(model, tail), per, reps)

    python = timed(python_only("NaiveBayes", head))
    base = MOAClassifier("MajorityClass")
    _run(base, head)
    floor = timed(base)
    out = {}
    for name in names:
        model = MOAClassifier(name)
        _run(model, head)
        total = floor if name == "MajorityClass" else timed(model)
        out[name] = {
            "total": total,
            "python": python,
            "crossings": floor - python,
            "MOA": total - floor,
        }
    return out


def crossings(rows: Sequence[Instance], reps: int = 5, n: int = 100_000) -> dict[str, float]:
    """Microseconds of each call into Java of one instance, alone (warm ``moa:MajorityClass``)."""
    model = MOAClassifier("MajorityClass")
    _run(model, rows)
    values = model._values(rows[-1].x)
    buffer, inst, votes_of, train = model._buffer, model._instance, model._votes, model._train
    votes = votes_of(inst)
    last = len(values) - 1

    def loop(step: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(n):
                step()

        return run

    steps: dict[str, Callable[[], Any]] = {
        "write the row (buffer[:] = values)": lambda: buffer.__setitem__(slice(None), values),
        "getVotesForInstance (MajorityClass)": lambda: votes_of(inst),
        "read the votes (memoryview.tolist)": lambda: memoryview(votes).tolist(),
        "set the class (buffer[n] = code)": lambda: buffer.__setitem__(last, 0),
        "trainOnInstance (MajorityClass)": lambda: train(inst),
    }
    return {label: _best_us(loop(step), n, reps) for label, step in steps.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m streameval.bench.moa_split")
    parser.add_argument("--dataset", default="electricity")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--warm", type=int, default=20_000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("learners", nargs="*", default=["NaiveBayes", "HoeffdingTree"])
    args = parser.parse_args(argv)
    from streameval.bench.moa_peer import load_rows

    rows = load_rows(args.dataset, args.warm + args.n, args.data_dir)
    print(f"us per instance (predict_proba_one + learn_one), {args.dataset} {args.warm:,} warm")
    for name, parts in split(args.learners, rows, args.warm, args.reps).items():
        print(f"  moa:{name:14s} " + ", ".join(f"{k} {v:5.2f}" for k, v in parts.items()))
    print("us per call into Java, alone:")
    for label, us in crossings(rows[: args.warm]).items():
        print(f"  {label:40s} {us:5.2f}")


if __name__ == "__main__":
    main()
