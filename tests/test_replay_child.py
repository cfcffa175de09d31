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
from pathlib import Path

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config

ROOT = Path(__file__).resolve().parents[1]


#: Run in a fresh interpreter: pytest's own process may hold threads (and librdkafka's)
#: left by earlier tests, which would decide ``can_fork`` before the thread under test.
PROBE = """
import sys, threading
from streameval.agents.replay_process import can_fork
mark, where = sys.argv[1], sys.argv[2]
release, seen = threading.Event(), []
def body():
    if where == "thread":
        seen.append(can_fork())
    release.wait()
thread = threading.Thread(target=body, daemon=True)
if mark == "marked":
    thread.fork_safe = True
before = can_fork()
thread.start()
if where == "main":
    seen.append(can_fork())
else:
    while not seen:
        threading.Event().wait(0.01)
release.set()
thread.join()
print(before, seen[0])
"""


def _probe(mark: str, where: str) -> tuple[bool, bool]:
    """``can_fork()`` in a fresh process, before a second thread starts and while it runs
    (asked from the main thread or from that thread)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mark, where],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    before, during = done.stdout.split()
    return before == "True", during == "True"


def test_a_thread_not_marked_fork_safe_forbids_the_fork() -> None:
    assert _probe("unmarked", "main") == (True, False)
    assert _probe("marked", "main") == (True, True)


def test_no_fork_from_another_thread_than_the_main_one() -> None:
    assert _probe("marked", "thread") == (True, False)


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


NICE_PROBE = """
import os, time
from streameval.agents.config import KafkaSettings
from streameval.agents.replay_process import NICENESS, ReplayProcess
from streameval.pipeline.config import ExperimentConfig

def nice(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])

child = ReplayProcess(ExperimentConfig("s", ["nochange"], dataset="electricity", limit=10),
                      KafkaSettings(), data_dir=None, speed=None, pack=1)
deadline, seen = time.monotonic() + 20, nice(child.process.pid)
while seen == nice(os.getpid()) and time.monotonic() < deadline:  # until it has set it
    time.sleep(0.01)
    seen = nice(child.process.pid)
child.process.terminate()
child.process.join(10)
print(nice(os.getpid()), seen, NICENESS)
"""


def test_the_replay_child_yields_the_cores_to_the_evaluation() -> None:
    """The forked replay runs at a lower priority than the run (its niceness read from
    ``/proc``), so that the evaluation, the slower side, gets the cores first."""
    done = subprocess.run(
        [sys.executable, "-c", NICE_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    parent, child, niceness = map(int, done.stdout.split())
    assert child == min(19, parent + niceness) and niceness > 0
