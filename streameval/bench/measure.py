"""Measurements a child takes of itself: peak RSS, CPU time, deep sizes, a profile.

Peak RSS is ``VmHWM`` of ``/proc/PID/status``, CPU time the user + system ticks of
``/proc/PID/stat``; both read another process as well (a Kafka worker, the broker).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def proc_status_kib(pid: int | str = "self", key: str = "VmHWM") -> int | None:
    """A ``kB`` field of ``/proc/PID/status`` (peak RSS by default); ``None`` if unreadable."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def proc_cpu_seconds(pid: int | str = "self") -> float | None:
    """User + system CPU seconds of a process (``/proc/PID/stat``)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def deep_sizeof(root: Any) -> int:
    """Bytes of every object reachable from ``root`` (``sys.getsizeof``, each object once).

    Follows containers, instance ``__dict__`` and ``__slots__``; never classes,
    functions or modules. What the buffer holds in memory, unlike its pickle.
    """
    import types
    from collections import deque

    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack.extend(obj)
        elif isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
            continue
        else:
            if hasattr(obj, "__dict__"):
                stack.append(obj.__dict__)
            for klass in type(obj).__mro__:
                for slot in getattr(klass, "__slots__", ()):
                    if hasattr(obj, slot):
                        stack.append(getattr(obj, slot))
    return total


def self_peak_rss() -> int:
    """Peak RSS of this process in bytes."""
    kib = proc_status_kib("self")
    if kib is None:
        import resource

        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024


def profiled(job: dict[str, Any], fn: Callable[[], Any]) -> Any:
    """Run ``fn``; with ``job["profile"]`` under cProfile, the top written to that file."""
    path = job.get("profile")
    if not path:
        return fn()
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    try:
        return prof.runcall(fn)
    finally:
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(out.getvalue())
