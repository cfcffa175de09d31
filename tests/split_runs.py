"""Run one configuration with ``jobs=1`` and ``jobs=2`` in a fresh process (a fork must
not copy a test session's threads); print both runs as JSON. Used by ``test_split.py``.

``python tests/split_runs.py CONFIG_JSON [FAIL_AT]``: the config's ``_data_dir`` is the
datasets' directory, ``_outputs`` asks for the output events too; with ``FAIL_AT``, River's
``HoeffdingTreeClassifier.learn_one`` raises at its ``FAIL_AT``-th call in whichever
process learns the tree (counted by process).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from river import tree
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.failure import describe


def _fail_at(n: int) -> None:
    original = tree.HoeffdingTreeClassifier.learn_one
    calls: dict[int, int] = {}  # by process: the helper counts its own from 0

    def learn_one(self: Any, x: Any, y: Any, **kw: Any) -> Any:
        pid = os.getpid()
        calls[pid] = calls.get(pid, 0) + 1
        if calls[pid] == n:
            raise ArithmeticError("the tree broke")
        return original(self, x, y, **kw)

    tree.HoeffdingTreeClassifier.learn_one = learn_one  # type: ignore[method-assign]


def run(config: dict[str, Any], jobs: int, data_dir: str | None, emit: bool) -> dict[str, Any]:
    outputs: list[Any] = []
    try:
        results = evaluate_config(
            ExperimentConfig.from_dict(config),
            data_dir=data_dir,
            on_output=outputs.append if emit else None,
            jobs=jobs,
        )
    except Exception as exc:  # the test compares the failures
        return {"error": describe(exc)}
    runtime = results.pop("runtime")
    return {
        "results": results,
        "outputs": [o.to_dict() for o in outputs],
        "processes": runtime.get("processes", 1),
        "helper": (runtime.get("helper") or {}).get("learners"),
    }


def main() -> None:
    config = json.loads(sys.argv[1])
    if len(sys.argv) > 2:
        _fail_at(int(sys.argv[2]))
    data_dir = config.pop("_data_dir", None)
    emit = config.pop("_outputs", False)
    out = {str(jobs): run(config, jobs, data_dir, emit) for jobs in (1, 2)}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
