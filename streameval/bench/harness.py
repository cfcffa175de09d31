"""The parent's machinery: every job in a fresh child, repetitions interleaved, medians.

:class:`Bench` declares jobs (one :class:`Measured` per distinct job), runs
them ``reps`` times in fresh children (``python -m streameval.bench --child``,
each in its own session so that a timeout ends its workers too) and keeps every
repetition; :class:`Measured` gives their medians and peaks.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The prefix of the one stdout line that carries a child's result.
CHILD_TAG = "@@streameval-bench-result "
#: How a child is started (``streameval/bench/__main__.py``, see :mod:`streameval.bench.child`).
CHILD_COMMAND = ("-m", "streameval.bench", "--child")


@dataclass(eq=False)
class Measured:
    """One configuration measured ``reps`` times (each rep a fresh child)."""

    key: str
    job: dict[str, Any]
    label: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def values(self, name: str) -> list[float]:
        return [r[name] for r in self.runs if r.get(name) is not None]

    def median(self, name: str = "seconds") -> float | None:
        vals = self.values(name)
        return statistics.median(vals) if vals else None

    def peak(self, name: str = "peak_rss_bytes") -> float | None:
        vals = self.values(name)
        return max(vals) if vals else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "job": {k: v for k, v in self.job.items() if k not in ("bootstrap",)},
            "runs": self.runs,
            "errors": self.errors,
        }


class Bench:
    """Runs jobs in fresh children, caches them by job, keeps the log."""

    def __init__(self, *, data_dir: str | None, timeout: float, profile_dir: Path | None) -> None:
        self.data_dir = data_dir
        self.timeout = timeout
        self.profile_dir = profile_dir
        self.measured: dict[str, Measured] = {}
        self.started = time.perf_counter()

    def declare(self, label: str, job: dict[str, Any]) -> Measured:
        job = {**job, "data_dir": self.data_dir}
        key = json.dumps(job, sort_keys=True)
        if key not in self.measured:
            self.measured[key] = Measured(key, job, label)
        return self.measured[key]

    def run_reps(self, items: Sequence[Measured], reps: int) -> None:
        """``reps`` repetitions of every item, interleaved; items already measured are skipped."""
        todo = [m for m in dict.fromkeys(items) if not m.runs and not m.errors]
        for rep in range(reps):
            for m in todo:
                if len(m.errors) > 0 and not m.runs and rep > 0:
                    continue  # failed on its first repetition: do not insist
                self.run_one(m, f"rep {rep + 1}/{reps}")

    def run_one(self, m: Measured, note: str) -> None:
        job = dict(m.job)
        if self.profile_dir is not None and job["kind"] in ("evaluate", "river", "river_loop"):
            name = "".join(c if c.isalnum() else "_" for c in m.label)[:80]
            job["profile"] = str(self.profile_dir / f"{name}.txt")
        job.setdefault("timeout", max(30.0, self.timeout - 60.0))  # inner waits end first
        env = dict(os.environ)
        if self.data_dir:
            env["STREAMEVAL_DATA_DIR"] = str(self.data_dir)
        t0 = time.perf_counter()
        elapsed = t0 - self.started
        print(f"[{elapsed:6.0f} s] {m.label} ({note}) ...", file=sys.stderr, flush=True)
        # its own session: on a timeout the whole group goes (the child's workers too)
        proc = subprocess.Popen(
            [sys.executable, *CHILD_COMMAND],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(json.dumps(job), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc)
            m.errors.append(f"timed out after {self.timeout:.0f} s")
            print(f"    timed out after {self.timeout:.0f} s", file=sys.stderr, flush=True)
            return
        except BaseException:
            _end_group(proc)
            raise
        result = None
        for line in stdout.splitlines():
            if line.startswith(CHILD_TAG):
                result = json.loads(line[len(CHILD_TAG) :])
        took = time.perf_counter() - t0
        if proc.returncode != 0 or result is None:
            tail = (stderr or "")[-2000:]
            m.errors.append(f"exit {proc.returncode}: {tail}")
            print(f"    FAILED ({took:.1f} s): {tail}", file=sys.stderr, flush=True)
            return
        result["child_wall_seconds"] = took
        m.runs.append(result)
        secs = result.get("seconds")
        shown = f"{secs:.2f} s measured, " if isinstance(secs, (int, float)) else ""
        print(f"    {shown}{took:.1f} s in the child", file=sys.stderr, flush=True)


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group (the child and its workers), then SIGKILL the rest."""
    import contextlib
    import signal

    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        gone = False
        while not gone and time.monotonic() < deadline:
            proc.poll()  # reap the child, or its zombie keeps the group alive
            try:
                os.killpg(proc.pid, 0)
                time.sleep(0.2)
            except ProcessLookupError:
                gone = True
        if gone:
            break
    with contextlib.suppress(Exception):
        proc.communicate(timeout=5)
