"""Results do not depend on the string-hash seed (``PYTHONHASHSEED``).

River's ``HoeffdingAdaptiveTreeClassifier`` and ``KNNClassifier`` keep their labels in a
``set`` and normalise their probabilities by a sum taken in that set's order, which for
``str`` labels changes with the hash seed (see
:mod:`streameval.pipeline.learners.labelset`). On LED's ten classes, the probabilities
differed in their last bits, and the prequential AUC of one class with them. Each case
runs the same thing in fresh interpreters under seeds 0, 1 and 2 and requires identical
output; the command line must not pin the seed by re-executing itself either.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SEEDS = ("0", "1", "2")


def _env(seed: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    if seed is not None:
        env["PYTHONHASHSEED"] = seed
    return env


def _run_per_seed(args: list[str], cwd: Path) -> dict[str, subprocess.CompletedProcess]:
    """``python args`` once per seed, side by side."""
    procs = {
        seed: subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd,
            env=_env(seed),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in SEEDS
    }
    done = {}
    for seed, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        done[seed] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        assert proc.returncode == 0, (seed, err[-2000:])
    return done


def test_evaluate_gives_the_same_json_under_every_hash_seed(tmp_path: Path) -> None:
    """A multiclass stream with str labels, the two learners that kept them in a set,
    the AUC of one class (it ranks the probabilities) and delayed labels (the batched
    tree predictions of the re-evaluation rounds)."""
    for seed in SEEDS:
        (tmp_path / seed).mkdir()
    args = ["-m", "streameval.cli", "evaluate", "--dataset", "led[n=700]",
            "--learner", "hat", "--learner", "knn", "--positive", "3",
            "--delay", "20", "--reeval-k", "5", "--bins", "4", "--no-progress",
            "--json", "{seed}/out.json"]  # fmt: skip
    procs = {
        seed: subprocess.Popen(
            [sys.executable, *(a.format(seed=seed) for a in args)],
            cwd=tmp_path,
            env=_env(seed),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in SEEDS
    }
    texts = {}
    for seed, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (seed, err[-2000:])
        results = json.loads((tmp_path / seed / "out.json").read_text())
        results.pop("runtime")
        assert results["learners"]["hat"]["auc"] > 0.8  # the AUC is computed
        texts[seed] = json.dumps(results)  # key order included
    assert texts["1"] == texts["0"]
    assert texts["2"] == texts["0"]


PROBE = """
from river import datasets, neighbors, tree
from streameval.pipeline.learners.river_adapter import RiverClassifier

stream = [(x, f"digit {y}") for x, y in datasets.synth.LED(seed=1, noise_percentage=0.1).take(300)]
xs = [x for x, _ in stream]
for model in (tree.HoeffdingAdaptiveTreeClassifier(grace_period=50, seed=0),
              neighbors.KNNClassifier()):
    learner = RiverClassifier(model)
    for i, (x, y) in enumerate(stream):
        print(repr(sorted(learner.predict_proba_one(x).items())))
        if i % 50 == 49:
            print(repr([sorted(p.items()) for p in learner.predict_proba_many(xs[:i])]))
        learner.learn_one(x, y)
"""


def test_river_probabilities_are_the_same_under_every_hash_seed(tmp_path: Path) -> None:
    """Every probability of river's adaptive tree and kNN (one at a time and batched),
    to the last bit: ten str labels, so a set's order would change the sums."""
    done = _run_per_seed(["-c", PROBE], tmp_path)
    lines = done["0"].stdout.splitlines()
    assert len(lines) == 2 * (300 + 6)
    assert any("0.1" in line for line in lines)  # probabilities, not only 0 and 1
    assert done["1"].stdout == done["0"].stdout
    assert done["2"].stdout == done["0"].stdout


def test_main_does_not_reexecute_to_pin_the_hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``PYTHONHASHSEED`` unset, ``main()`` runs the command in this process."""
    cli = importlib.import_module("streameval.cli.main")  # the module (streameval.cli.main
    # is the function the package exports)

    def execve(*args: object) -> None:
        raise AssertionError(f"main() re-executed the interpreter: {args!r}")

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(sys, "argv", ["streameval", "config", "show", "evaluate"])
    assert cli.main() == 0


def test_the_command_line_keeps_hash_randomisation(tmp_path: Path) -> None:
    """A fresh interpreter without ``PYTHONHASHSEED`` keeps randomised string hashes
    through ``main()`` (a re-executed one would run with the seed pinned and never
    print the line below)."""
    code = (
        "import sys; sys.argv = ['streameval', 'config', 'show', 'evaluate']\n"
        "from streameval.cli.main import main\n"
        "rc = main()\n"
        "print('flags', rc, sys.flags.hash_randomization)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "flags 0 1"
