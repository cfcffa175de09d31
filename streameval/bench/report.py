"""What the bench writes: ``results.json`` (every repetition) and ``results.md`` (the table).

The header of ``results.md`` names the machine and the load on it
(:func:`machine_info`), then come the table, the verdicts per target, the
targets and the inputs of every figure.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streameval.bench.plans import TARGETS
from streameval.bench.rows import Row

COLUMNS = (
    "#",
    "target",
    "what ran",
    "workload",
    "rate",
    "peak RSS",
    "reference (same run)",
    "ratio",
    "goal",
    "result",
)


def markdown_table(rows: Sequence[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
        vals = (
            r.id,
            r.target,
            r.what,
            r.workload,
            r.rate,
            r.rss,
            r.reference,
            ratio,
            r.goal,
            f"**{r.result}**" if r.result in ("PASS", "FAIL", "ERROR") else r.result,
        )
        lines.append("| " + " | ".join(cell(v) for v in vals) + " |")
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        for pkg in ("river", "confluent-kafka", "faust-streaming", "numpy"):
            info[pkg] = version(pkg)
    except Exception:  # pragma: no cover - metadata is best effort
        pass
    try:
        root = Path(__file__).resolve().parents[2]  # the repository
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--",
                "pipeline",
                "agents",
                "schemas",
            ],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.split("\n")
        info["git"] = head + (" (+ uncommitted changes)" if any(dirty) else "")
        info["uncommitted"] = [d[3:] for d in dirty if d.strip()]
    except Exception:  # pragma: no cover
        pass
    return info


def write_outputs(out_dir: Path, doc: dict[str, Any], rows: Sequence[Row]) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    m = doc["machine"]
    header = [
        f"# streameval bench ({doc['mode']}, median of {doc['reps']} repetition(s))",
        "",
        f"Run {doc['started']}, {doc['wall_seconds']:.0f} s wall; {m.get('cpus')} CPUs "
        f"({m.get('cpu', '?')}), Python {m.get('python')}, river {m.get('river')}, "
        f"confluent-kafka {m.get('confluent-kafka')}; git {m.get('git', '?')}; "
        f"broker {doc.get('broker', '-')}. Load average (1, 5, 15 min) at the start "
        f"{m.get('loadavg_start')}, at the end {m.get('loadavg_end')}: anything above 0 "
        "besides the bench competes for the same cores.",
        "",
        "",
    ]
    table = markdown_table(rows)
    inputs = ["", "## Inputs of every figure", ""]
    inputs += [f"- **{r.id}** {r.inputs}" for r in rows]
    targets = ["", "## Targets", ""] + [f"{k}. {v}" for k, v in TARGETS.items()]
    summary = ["", "## Verdicts", ""]
    for k in TARGETS:
        got = [r.result for r in rows if r.target == k]
        if got:
            summary.append(f"- target {k}: " + ", ".join(got))
    text = "\n".join(header) + table + "\n" + "\n".join(summary + targets + inputs) + "\n"
    (out_dir / "results.md").write_text(text)
    return table
