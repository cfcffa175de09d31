"""Which experiments a worker takes on: admission by estimated cost, per stream and in all.

Before a stream is defined, :class:`Admission` estimates its experiment's memory and
per-event work (:func:`~streameval.pipeline.cost.estimate`, arithmetic on the config,
nothing allocated) and refuses it when it exceeds the budget of one stream, or when the
streams this worker holds would together exceed the worker's memory budget. A refused
experiment is dead-lettered (kind ``over_budget``) with the estimate and the limit; the
stream is not defined. Streams restored from a checkpoint are charged without a check:
they were admitted once, and refusing them now would lose their history.

A stream's state stays in memory after it finished (its runner answers redeliveries),
so it stays charged.

>>> from streameval.pipeline.config import ExperimentConfig
>>> admission = Admission(Budget(stream_memory=64 * MiB, worker_memory=100 * MiB))
>>> reason = admission.refusal(ExperimentConfig("a", ["nochange", "ht"], window=10**6))
>>> reason[: reason.index(" (")]
"stream 'a' refused: its experiment needs an estimated 356.7 MiB"
>>> reason[reason.index("over") :]
'over the per-stream memory budget of 64.0 MiB'
>>> for stream in "bcde":  # 32.1 MiB each: three fit in 100 MiB, not four
...     config = ExperimentConfig(stream, ["nochange"], window=1000)
...     if admission.refusal(config) is None:
...         admission.charge(config)
>>> sorted(admission.charged), size_text(admission.memory)
(['b', 'c', 'd'], '96.4 MiB')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.cost import Cost, GiB, KiB, MiB, estimate, size_text

#: Default memory budget of a worker: what all its streams together may hold.
WORKER_MEMORY = 1 * GiB
#: Default memory budget of one stream (a quarter of the worker's).
STREAM_MEMORY = 256 * MiB
#: Default work budget of one stream: updates per labelled instance.
STREAM_WORK = 10_000_000


@dataclass(frozen=True)
class Budget:
    """The most one stream and all of a worker's streams may cost."""

    stream_memory: int = STREAM_MEMORY
    worker_memory: int = WORKER_MEMORY
    stream_work: int = STREAM_WORK

    def __post_init__(self) -> None:
        for name in ("stream_memory", "worker_memory", "stream_work"):
            if getattr(self, name) < 1:
                raise ValueError(f"budget {name} must be >= 1, got {getattr(self, name)}")


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(|k|m|g|t|kib|mib|gib|tib|kb|mb|gb|tb)\s*$", re.I)
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1024 * GiB}


def parse_size(value: Any) -> int:
    """A byte count from ``512MiB``, ``1.5 GiB``, ``2g`` or a plain number (binary units).

    >>> parse_size("256MiB") == 256 * MiB, parse_size("1.5g") == 3 * GiB // 2, parse_size(4096)
    (True, True, 4096)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.match(str(value))
    if m is None:
        raise ValueError(f"not a size: {value!r} (use bytes, or a number with KiB, MiB, GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()[:1]])


class Admission:
    """The estimated cost of every stream a worker holds, and the check of a new one."""

    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.charged: dict[str, Cost] = {}

    @property
    def memory(self) -> int:
        """The estimated memory of every stream charged."""
        return sum(c.memory_bytes for c in self.charged.values())

    def refusal(self, config: ExperimentConfig) -> str | None:
        """Why ``config`` may not be defined here, or ``None`` if it fits the budget."""
        cost = estimate(config)
        budget = self.budget
        what = f"stream {config.stream!r} refused: its experiment needs an estimated"
        if cost.memory_bytes > budget.stream_memory:
            return (
                f"{what} {cost.describe()} of memory, over the per-stream memory budget of "
                f"{size_text(budget.stream_memory)}"
            )
        if cost.work_per_event > budget.stream_work:
            return (
                f"{what} {cost.work_per_event:,} updates per labelled instance, over the "
                f"per-stream work budget of {budget.stream_work:,}"
            )
        held = self.memory - self._charge_of(config.stream)
        if held + cost.memory_bytes > budget.worker_memory:
            return (
                f"{what} {cost.describe()} of memory; with the {len(self.charged)} stream(s) "
                f"this worker holds ({size_text(held)}) that is over the worker memory "
                f"budget of {size_text(budget.worker_memory)}"
            )
        return None

    def charge(self, config: ExperimentConfig) -> None:
        """Count ``config``'s stream as held by this worker."""
        self.charged[config.stream] = estimate(config)

    def _charge_of(self, stream: str) -> int:
        cost = self.charged.get(stream)
        return cost.memory_bytes if cost is not None else 0
