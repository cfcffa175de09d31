"""How often a worker lets Python's cyclic garbage collector run.

A worker allocates thousands of short-lived objects per input message -- the decoded JSON,
an event per item, the merge's queue entries -- which reference counting frees as soon as
they are done with. Each allocation still counts towards the collector's first threshold
(700 by default), and every tenth pass of the youngest generation scans the older ones:
every learner's model, every pending instance, the ingest guard's window of labelled ids.
In a worker evaluating Electricity that scanning took 12-15 % of the CPU with ``nb`` and a
quarter with the two baselines, against 4 % in ``evaluate``, which allocates far less per
event. :func:`collecting_less` raises the first threshold while ``streameval run`` consumes
its one stream (the older generations' thresholds stay): cycles are still collected, in
batches of :data:`FIRST_THRESHOLD` allocations. A replay (``run``'s child,
``streameval replay``) does the same: it makes events and frees each at once, and with the
default thresholds 3 replays of Electricity in 8 took 0.31-0.32 s instead of 0.245 s.

The long-running ``streameval worker`` keeps the default thresholds: with the raised one,
its resident size in the 10-minute soak (``tests/test_soak.py``) rose by ~4 MB a minute
(Theil-Sen) and once passed the soak's growth bound. That the threshold is the cause was
not isolated; full collections 14 times rarer are a risk a service that runs for days need
not take.

>>> import gc
>>> before = gc.get_threshold()
>>> with collecting_less():
...     gc.get_threshold()[0] == FIRST_THRESHOLD
True
>>> gc.get_threshold() == before
True
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations (net of deallocations) between two collections of the youngest generation.
FIRST_THRESHOLD = 10_000


@contextmanager
def collecting_less() -> Iterator[None]:
    """Run the body with the youngest generation collected every :data:`FIRST_THRESHOLD`
    allocations (never more often than the process already does); restore the thresholds
    after."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], FIRST_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
