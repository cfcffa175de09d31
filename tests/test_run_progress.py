"""Progress that follows the evaluation, not only the replay.

``streameval run`` (not on a terminal: plain lines) prints its replay's lines and its
evaluation's; the evaluation's last line comes after the replay's last and counts every
labelled instance of the results. ``evaluate`` counts labels, pending instances and
re-predictions the same way. On a terminal both lines are redrawn in place.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config
from streameval.pipeline.labels_progress import LabelProgress

ROOT = Path(__file__).resolve().parents[1]
COUNT = re.compile(r"([\d,]+)/([\d,]+) (labels|events)")


def counts(line: str) -> tuple[int, int]:
    done, total, _ = COUNT.search(line).groups()
    return int(done.replace(",", "")), int(total.replace(",", ""))


@pytest.mark.kafka
def test_run_progress_reaches_the_labelled_instances_after_the_replay(
    kafka_bootstrap: str, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "STREAMEVAL_TOPIC_PREFIX": f"prog{uuid.uuid4().hex[:8]}.",
        "STREAMEVAL_DATA_DIR": str(data_dir),
    }
    cmd = [sys.executable, "-m", "streameval.cli", "run", "--dataset", "electricity",
           "--limit", "6000", "--delay", "48", "--learner", "nochange", "--learner", "nb",
           "--reeval-k", "10", "--bins", "5", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    lines = done.stderr.splitlines()
    replayed = [i for i, line in enumerate(lines) if line.startswith("replay: ")]
    evaluated = [i for i, line in enumerate(lines) if line.startswith("evaluated: ")]
    assert replayed and evaluated, done.stderr[-3000:]
    assert evaluated[-1] > replayed[-1], done.stderr[-3000:]
    assert counts(lines[replayed[-1]]) == (12_001, 12_001)  # 2 events per instance + the end
    last = lines[evaluated[-1]]
    assert counts(last) == (results["n_labelled"], 6000) == (6000, 6000), last
    made = results["overhead"]["n_predictions_made"]
    assert made > 0 and f"{made:,} re-predictions" in last, last
    assert f"{results['overhead']['pending']:,} pending" in last, last
    assert "\r" not in done.stderr and "\x1b" not in done.stderr  # plain: not a terminal


def test_evaluate_progress_counts_labels_pending_and_repredictions(capsys) -> None:
    config = ExperimentConfig(
        "s", ["nochange"], dataset="electricity", limit=2000, delay="24", reeval_k=5, bins=5
    )
    results = evaluate_config(config, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err and all(line.startswith("evaluated: ") for line in err), err
    assert counts(err[-1]) == (results["n_labelled"], 2000) == (2000, 2000)
    made = results["overhead"]["n_predictions_made"]
    assert made > 0 and f"{made:,} re-predictions" in err[-1], err[-1]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_both_lines_are_redrawn_in_place() -> None:
    screen = Terminal()
    progress = LabelProgress(10, replay_total=21, stream=screen)
    progress.replayed(21)
    progress.replay_done()
    progress.update(10, pending=2, repredictions=0)
    progress.close()
    text = screen.getvalue()
    # each draw writes both lines; every draw after the first goes back up one line first
    draws = text.count("evaluated: ")
    assert draws >= 2 and text.count("\x1b[1A") == draws - 1, repr(text)
    assert text.endswith("evaluated: " + text.rsplit("evaluated: ", 1)[1])
    assert "21/21 events" in text and "10/10 labels, 2 pending" in text and text.endswith("\n")
