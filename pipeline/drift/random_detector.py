"""A detector that ignores the data and alarms at random: the DDM-random experiment.

``temporal-dependence-evaluation-journal.txt``, sect. 6.9 (the effect of false
alarms argued in sect. 5.2): the change detector of DDM is replaced by one that
alarms with probability ``p`` at every step, keeping DDM's warm-up of 30
instances during which no alarm is allowed, so that with ``p = 1`` a change is
alarmed at every 30th instance.

Counting instances from 1 after each (re)start, instances ``1 .. warmup - 1``
never alarm and every later one alarms with probability ``p``. With ``p = 1``
the alarms fall on instances ``warmup, 2 warmup, 3 warmup, ...`` of the stream:
every 30th instance for the default ``warmup = 30``, as sect. 6.9 states.
``warmup = 0`` and ``warmup = 1`` both allow an alarm on every instance.

The random generator is seeded once and is *not* reseeded by a restart, so
successive segments draw fresh random numbers; it is only drawn on instances
that may alarm.
"""

from __future__ import annotations

import random

from streameval.pipeline.drift.base import RestartingDetector, spec_name

#: DDM's warm-up, kept in sect. 6.9.
DDM_WARMUP = 30


class RandomDetector(RestartingDetector):
    """Alarms with probability ``p`` per instance once ``warmup`` instances have passed.

    ``statistic`` is the number of instances seen since the last (re)start.

    >>> d = RandomDetector(p=1.0, warmup=3)
    >>> [i for i in range(1, 11) if d.update(0.0)]
    [3, 6, 9]
    >>> RandomDetector(p=0.01).name
    'random[p=0.01,warmup=30]'
    """

    def __init__(self, p: float, warmup: int = DDM_WARMUP, seed: int = 0) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"alarm probability must be in [0, 1], got {p}")
        if warmup < 0:
            raise ValueError(f"warm-up must be >= 0, got {warmup}")
        super().__init__()
        self.p = float(p)
        self.warmup = int(warmup)
        self.seed = seed
        self.rng = random.Random(seed)
        self.count = 0

    @property
    def name(self) -> str:
        return spec_name("random", {"p": self.p, "warmup": self.warmup})

    @property
    def statistic(self) -> float:
        return float(self.count)

    def _step(self, error: float) -> bool:
        self.count += 1
        if self.count < self.warmup:
            return False
        return self.rng.random() < self.p

    def _restart(self) -> None:
        self.count = 0
