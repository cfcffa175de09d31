"""The replay schedule: instances and a delay model become an ordered event stream.

:func:`replay_schedule` turns the instances of a stream into
:class:`~streameval.pipeline.events.FeatureEvent` and
:class:`~streameval.pipeline.events.LabelEvent`
events in non-decreasing event time (for event-time delays, at equal event
time features come before labels), numbers them with consecutive ``seq``
from 0 and closes with an :class:`~streameval.pipeline.events.EndOfStream` whose ``ts``
is the last event's and whose ``n_events`` counts the feature and label
events before it.

It streams: memory holds only the labels not yet due (a heap keyed by due
time, then by instance order), never the features of past instances.

* :class:`~streameval.pipeline.streams.delay.InstanceDelay` ``N``: the label of instance
  ``i`` is released, at ``ts_{i+N}``, right after the features of ``i + N``
  (also when later instances share that event time: delay 0 is test-then-train
  on every stream). The
  labels of the last ``N`` instances are released after the last features,
  at the last event time, in stream order.
* :class:`~streameval.pipeline.streams.delay.EventTimeDelay`: the features are
  released at ``delay.release(instance)`` (the instance's own ``ts`` except for
  ``day-ahead``), the label is due at ``delay.due(instance)`` (never before the
  release) and is
  released before the first feature event with a later event time; labels
  still pending after the last instance follow in due order.

Labels due at the same time leave in stream order of their instances.

With ``labels_first`` (MOA's order, :mod:`streameval.pipeline.protocol`) a label due
at the event time of a later instance's features comes before them: under
``InstanceDelay`` ``N >= 1`` the label of ``i`` right *before* the features of
``i + N``; under an event-time delay before the features at its due time. A label
never comes before its own instance's features (delay 0 stays test-then-train).

>>> from streameval.pipeline.streams.base import Instance
>>> from streameval.pipeline.streams.delay import InstanceDelay
>>> rows = [Instance(str(i), float(i), {}, "a") for i in range(4)]
>>> events = list(replay_schedule("s", rows, InstanceDelay(2)))
>>> " ".join(e.kind[0].upper() + getattr(e, "id", "") for e in events)
'F0 F1 F2 L0 F3 L1 L2 L3 E'
>>> events[-1]
EndOfStream(stream='s', ts=3.0, seq=8, n_events=8)
>>> events = replay_schedule("s", rows, InstanceDelay(2), labels_first=True)
>>> " ".join(e.kind[0].upper() + getattr(e, "id", "") for e in events)
'F0 F1 L0 F2 L1 F3 L2 L3 E'
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator

from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
from streameval.pipeline.streams.base import Instance, Target
from streameval.pipeline.streams.delay import DelayModel, EventTimeDelay, InstanceDelay

#: Kinds of a step of :func:`schedule_steps`.
FEATURES, LABEL = 0, 1
Step = tuple  # (FEATURES, instance, ts) or (LABEL, id, ts, y)


def replay_schedule(
    stream: str, instances: Iterable[Instance], delay: DelayModel, *, labels_first: bool = False
) -> Iterator[FeatureEvent | LabelEvent | EndOfStream]:
    """Yield the events of ``stream`` for ``instances`` under ``delay``, in replay order.

    Raises ``ValueError`` if the instances' event times decrease.
    """
    seq = 0
    last_ts = 0.0
    for step in schedule_steps(instances, delay, labels_first=labels_first):
        if step[0] == FEATURES:
            inst, last_ts = step[1], step[2]
            yield FeatureEvent(stream, inst.id, last_ts, inst.x, seq)
        else:
            last_ts = step[2]
            yield LabelEvent(stream, step[1], last_ts, step[3], seq)
        seq += 1
    yield EndOfStream(stream, last_ts, seq, seq)


def decreasing(inst: Instance, ts: float, last_ts: float) -> ValueError:
    """The error of an instance whose event time goes back."""
    return ValueError(f"instance {inst.id} has ts {ts} < {last_ts}: event time must not decrease")


def schedule_steps(
    instances: Iterable[Instance], delay: DelayModel, *, labels_first: bool = False
) -> Iterator[Step]:
    """The replay order of :func:`replay_schedule` as plain tuples, no event objects:
    ``(FEATURES, instance, ts)`` and ``(LABEL, id, ts, y)``; the event time of the last
    step is the end of the stream's.

    >>> from streameval.pipeline.streams.base import Instance
    >>> rows = [Instance(str(i), float(i), {}, "a") for i in range(2)]
    >>> [(kind, ts) for kind, _, ts, *_ in schedule_steps(rows, InstanceDelay(1))]
    [(0, 0.0), (0, 1.0), (1, 1.0), (1, 1.0)]
    """
    timed = delay if isinstance(delay, EventTimeDelay) else None
    if timed is None and not isinstance(delay, InstanceDelay):
        raise TypeError(f"unsupported delay model {delay!r}")
    lag = delay.n if isinstance(delay, InstanceDelay) else 0
    pending: list[tuple[float, int, str, Target]] = []  # heap: (due ts, order, id, y)
    waiting: deque[tuple[str, Target]] = deque()  # count delay: labels not yet due
    order = 0
    last_ts: float | None = None
    last_event_ts = 0.0
    push, pop = heapq.heappush, heapq.heappop
    for inst in instances:
        ts = inst.ts if timed is None else timed.release(inst)
        if last_ts is not None and ts < last_ts:
            raise decreasing(inst, ts, last_ts)
        while pending and (pending[0][0] < ts or (labels_first and pending[0][0] == ts)):
            due, _, id_, y = pop(pending)
            yield (LABEL, id_, due, y)
        if labels_first and lag and len(waiting) == lag:
            id_, y = waiting.popleft()  # due now: before the features of i + N
            yield (LABEL, id_, ts, y)
        yield (FEATURES, inst, ts)
        last_ts = last_event_ts = ts
        if timed is not None:
            due = timed.due(inst)
            push(pending, (due if due > ts else ts, order, inst.id, inst.y))
            order += 1
        else:
            waiting.append((inst.id, inst.y))
            if len(waiting) > lag:
                # positional: right after the features of i + N, even when the
                # next instances share this event time (airlines departures)
                id_, y = waiting.popleft()
                yield (LABEL, id_, ts, y)
    for id_, y in waiting:
        push(pending, (last_event_ts, order, id_, y))
        order += 1
    while pending:
        due, _, id_, y = pop(pending)
        yield (LABEL, id_, due, y)
