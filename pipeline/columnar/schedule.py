"""The replay schedule of a label-only experiment, as arrays.

Learners that look only at the labels need, of the schedule of
:func:`~streameval.pipeline.streams.schedule.replay_schedule`, only where each label
is released relative to the feature events. For a delay that does not read the
features it follows from the event times alone:

* :class:`~streameval.pipeline.streams.delay.InstanceDelay` ``N``: the label of
  instance ``i`` comes right after the features of ``i + N``, so ``max(0, i - N)``
  labels precede the features of ``i``, in instance order;
* :class:`~streameval.pipeline.streams.delay.TimeDelay`: labels leave in the order of
  their due time ``max(ts + s, ts)`` (ties in instance order), each before the first
  feature event with a later event time.

:class:`LabelSchedule` holds that, with the event time of every label; its
:meth:`~LabelSchedule.blocks` cut it into blocks (a range of instances with the labels
released among them) over which the baselines' predictions are computed, and
:meth:`~LabelSchedule.at_label` says where the stream stands after any label (what a
snapshot there reports).

>>> s = LabelSchedule.build(np.arange(4.0), InstanceDelay(2))
>>> s.seen.tolist(), s.order.tolist()  # F0 F1 F2 L0 F3 L1 L2 L3
([0, 0, 0, 1], [0, 1, 2, 3])
>>> [(b.start, b.seen.tolist(), b.labels.tolist()) for b in s.blocks(2)]
[(0, [0, 0], []), (2, [0, 1], [0, 1, 2, 3])]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from streameval.pipeline.streams.delay import DelayModel, InstanceDelay, TimeDelay


def applies(delay: DelayModel) -> bool:
    """Whether the schedule under ``delay`` follows from the event times alone."""
    return isinstance(delay, (InstanceDelay, TimeDelay))


@dataclass
class Block:
    """Instances ``start..start + len(seen) - 1`` and the labels released among them."""

    start: int
    seen: np.ndarray  # labels released before each instance's features
    labels: np.ndarray  # the instances whose labels are released, in release order


@dataclass
class LabelSchedule:
    """Where the labels of ``n`` instances are released among their feature events."""

    seen: np.ndarray  # per instance: labels released before its features
    order: np.ndarray  # instances in the order their labels are released
    last_ts: float  # event time of the last event
    ts: np.ndarray  # per instance: the event time of its features
    label_ts: np.ndarray  # in release order: the event time of each label

    @classmethod
    def build(cls, ts: np.ndarray, delay: DelayModel) -> LabelSchedule:
        n = len(ts)
        if n > 1 and bool((np.diff(ts) < 0).any()):
            i = int(np.flatnonzero(np.diff(ts) < 0)[0]) + 1
            raise ValueError(
                f"instance {i} has ts {ts[i]} < {ts[i - 1]}: event time must not decrease"
            )
        last = float(ts[-1]) if n else 0.0
        if isinstance(delay, InstanceDelay):
            seen = np.maximum(np.arange(n) - delay.n, 0)
            # right after the features of i + N; the last N after the last features
            label_ts = np.concatenate((ts[min(n, delay.n) :], np.full(min(n, delay.n), last)))
            return cls(seen, np.arange(n), last, ts, label_ts)
        if not isinstance(delay, TimeDelay):
            raise TypeError(f"the label schedule needs the features under {delay}")
        due = np.maximum(ts + delay.seconds, ts)
        order = np.argsort(due, kind="stable")
        seen = np.searchsorted(due[order], ts, side="left")
        return cls(seen, order, max(last, float(due.max())) if n else last, ts, due[order])

    def at_label(self, c: int) -> tuple[int, float]:
        """Right after the ``c``-th label (``c >= 1``): how many feature events came
        before it, and the latest event time so far."""
        f = int(np.searchsorted(self.seen, c, side="left"))
        return f, max(float(self.ts[f - 1]) if f else 0.0, float(self.label_ts[c - 1]))

    @property
    def max_pending(self) -> int:
        """The most instances waiting for their label at once (right after a feature)."""
        n = len(self.seen)
        return int((np.arange(1, n + 1) - self.seen).max()) if n else 0

    def blocks(self, size: int) -> Iterator[Block]:
        """Blocks of ``size`` instances each; the last one takes the labels left."""
        n = len(self.seen)
        for start in range(0, n, size):
            stop = min(n, start + size)
            first = int(self.seen[start])
            last = int(self.seen[stop]) if stop < n else n
            yield Block(start, self.seen[start:stop], self.order[first:last])
