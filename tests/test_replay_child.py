"""``streameval run`` replays in a child process, as the command line runs it.

The replay holds the interpreter lock for as long as it builds and encodes events, so
``run`` forks it into a child (:mod:`streameval.agents.replay_process`) unless the process
has a thread that could hold a lock the child needs. The command line's reader of
librdkafka's stderr is such a thread only in name: it is marked ``fork_safe``, and
``run`` started from the command line must still fork. On an embedded broker the child
is told the broker's address as soon as it is up, and makes its producer then.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from streameval.agents.replay_process import can_fork
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config

ROOT = Path(__file__).resolve().parents[1]


def _with_thread(fork_safe: bool) -> bool:
    """:func:`can_fork` while a second thread waits."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    if fork_safe:
        thread.fork_safe = True  # type: ignore[attr-defined]
    thread.start()
    try:
        return can_fork()
    finally:
        release.set()
        thread.join()


def test_a_thread_not_marked_fork_safe_forbids_the_fork() -> None:
    assert can_fork()  # pytest's process has its main thread only here
    assert not _with_thread(fork_safe=False)
    assert _with_thread(fork_safe=True)


def test_no_fork_from_another_thread_than_the_main_one() -> None:
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(can_fork()))
    thread.fork_safe = True  # type: ignore[attr-defined]
    thread.start()
    thread.join()
    assert seen == [False]


@pytest.mark.kafka
def test_the_command_line_run_replays_in_a_child_on_its_embedded_broker(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    cmd = [sys.executable, "-m", "streameval.cli", "run", "--dataset", "electricity",
           "--limit", "3000", "--learner", "nochange", "--learner", "nb",
           "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["runtime"]["broker"] == "embedded"
    assert results["runtime"]["replay"] == "process"
    assert results["runtime"]["events"] == 2 * 3000 + 1
    alone = evaluate_config(
        ExperimentConfig("electricity", ["nochange", "nb"], dataset="electricity", limit=3000)
    )
    for name in ("nochange", "nb"):
        assert results["learners"][name]["accuracy"] == alone["learners"][name]["accuracy"]
        assert results["learners"][name]["kappa_per"] == alone["learners"][name]["kappa_per"]
