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

from streameval.pipeline.learners.moa import MOAClassifier
from streameval.pipeline.learners.moa_java import jvm
from streameval.pipeline.streams.base import Instance


def _run(model: Any, rows: Sequence[Instance]) -> None:
    for r in rows:
        model.predict_proba_one(r.x)
        model.learn_one(r.x, r.y)


def _best_of(fns: dict[str, Callable[[], Any]], per: int, reps: int) -> dict[str, float]:
    """Microseconds of main-thread CPU per unit (``per`` units a call) of each of ``fns``,
    best of ``reps``, the repetitions interleaved (a burst of load hits them all alike)."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(reps):
        for key, fn in fns.items():
            start = time.thread_time()
            fn()
            best[key] = min(best[key], time.thread_time() - start)
    return {key: seconds / per * 1e6 for key, seconds in best.items()}


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
    jvm()
    head, tail = rows[:warm], rows[warm:]
    models = {"python": python_only("NaiveBayes", head)}
    for name in ["MajorityClass", *names]:
        models[name] = MOAClassifier(name)
        _run(models[name], head)
    timed = _best_of(
        {key: (lambda m=model: _run(m, tail)) for key, model in models.items()}, len(tail), reps
    )
    python, floor = timed["python"], timed["MajorityClass"]
    return {
        name: {
            "total": timed[name],
            "python": python,
            "crossings": floor - python,
            "MOA": timed[name] - floor,
        }
        for name in names
    }


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
    return _best_of({label: loop(step) for label, step in steps.items()}, n, reps)


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
