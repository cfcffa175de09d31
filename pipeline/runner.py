"""One stream behind the Kafka topics: merge, guard, experiment -- all pure.

The Kafka worker keeps one :class:`StreamRunner` per stream and hands it the
events it decodes from the feature and label topics, in whatever order the
consumer delivers them. The runner restores the schedule order
(:class:`~streameval.pipeline.merge.EventMerger`), applies the bad-input rules
(:class:`~streameval.pipeline.ingest.IngestGuard`) and feeds the same experiment as
``streameval evaluate``: the columnar core
(:class:`~streameval.pipeline.columnar.experiment.ColumnarExperiment`) for every experiment
it evaluates (:func:`~streameval.pipeline.columnar.supports`), else the per-event
:class:`~streameval.pipeline.experiment.Experiment`. Both give the same outputs and results
document. It is picklable: a pickle is the checkpoint of the stream, including the position
(Kafka offset, index within a packed message) reached on each topic, so a
restored runner drops the messages it has already seen when they are
delivered again.

A packed message is taken at once (:meth:`StreamRunner.push_message`): when none of its
events can be refused at the door (the stream and the worker have room for all of them),
they are queued together and the merge releases them in one pass -- the events it releases,
and their order, do not depend on when it is asked. The outputs, rejections, counts and
results are those of its events pushed one by one (:meth:`StreamRunner.push`;
``tests/test_columnar_worker.py``).

Outputs are numbered: the runner counts every output it has produced
(``n_outputs``), so the outputs of one call carry the consecutive sequence
numbers ``n_outputs - len(outputs)`` to ``n_outputs - 1``. The numbers depend
only on the input events and their order, so a runner restored from a
checkpoint numbers the outputs it produces again exactly as the crashed one
did: downstream consumers deduplicate by ``(stream, seq)``.

An exception raised by the experiment on an admitted event (a learner that
fails on a value, a bug) does not propagate: the event is reported as an
``experiment_error`` rejection with the exception text, the stream is marked
``failed`` and takes no further event, since an experiment interrupted half-way through an
event holds inconsistent state and no result computed from it could be trusted. The events
it held for the experiment (released by the merge and not evaluated yet, queued in the
merge, orphan labels) are dropped, their bytes given back, and counted with every later
one in ``after_failure``.
A worker therefore never crashes on the same message again and again, and the
other streams go on.

Memory is bounded in bytes (:mod:`streameval.pipeline.memory`). Each event is measured
once as it enters (:func:`~streameval.pipeline.memory.footprint`); the runner holds it
in its merge queue, then as an orphan label or a pending instance's features, and
``held`` is their total. An event is refused at the door, before the merge, with a
rejection of kind ``too_long`` when a string value (feature or label) is longer than
``max_string`` characters, and of kind ``over_budget`` when its bytes would take the
stream beyond ``stream_bytes`` or the worker's :class:`~streameval.pipeline.memory.BytePool`
beyond its limit. Nothing admitted is ever evicted to make room: the budget refuses new
instances, it does not change the evaluation of those already in. Two exceptions keep a
full budget from locking itself: a label whose instance's features the stream holds
(pending, or queued in the merge) is always admitted, as it frees them, and so is the end
of the stream; the labels so admitted may take ``held`` beyond the budget by their own
few hundred bytes each. The label of an
instance whose features were refused is rejected at once with the same kind
(:meth:`~streameval.pipeline.ingest.IngestGuard.refuse`), not left to wait as an orphan.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from streameval.pipeline.columnar import ColumnarExperiment, supports
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent, Output
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.failure import describe
from streameval.pipeline.ingest import IngestGuard, Rejection
from streameval.pipeline.memory import BytePool, budget_refusal, footprint
from streameval.pipeline.merge import FEATURES, EventMerger, Queued, Source
from streameval.pipeline.paired import PairedAdmission

# The layout of a pickled StreamRunner and what it holds; a checkpoint of another layout is
# refused at restore (its stream restarts), never restored into objects that fail later.
# Format 4 holds the input events as msgspec Structs (streameval.pipeline.events) and the
# experiment as a ColumnarExperiment wherever the columnar core applies.
CHECKPOINT_FORMAT = 4


class StreamRunner:
    """Merge, check and evaluate the events of one stream.

    ``pairs`` (a class attribute): evaluate runs of immediate pairs in bulk
    (:mod:`~streameval.pipeline.paired`) where they apply; the tests compare both ways.

    >>> from streameval.pipeline.events import FeatureEvent, LabelEvent, EndOfStream
    >>> r = StreamRunner(ExperimentConfig("s", ["nochange"]))
    >>> r.push("labels", LabelEvent("s", "0", 0.0, "a", 1))
    ([], [])
    >>> outputs, _ = r.push("features", FeatureEvent("s", "0", 0.0, {"x": 1.0}, 0))
    >>> [o.kind for o in outputs]  # the label waits until the features pass its time
    ['first']
    >>> outputs, _ = r.push("features", FeatureEvent("s", "1", 1.0, {"x": 2.0}, 2))
    >>> [(o.kind, o.id) for o in outputs]  # instance 1 waits for the label topic to pass ts 1
    [('final', '0')]
    >>> r.n_outputs  # outputs numbered 0 ('first') and 1 ('final')
    2
    """

    pairs = True

    def __init__(
        self,
        config: ExperimentConfig,
        *,
        emit_predictions: bool = True,
        orphan_ttl: float = 3600.0,
        stream_bytes: int | None = None,
        max_string: int | None = None,
        pool: BytePool | None = None,
    ) -> None:
        self.checkpoint_format = CHECKPOINT_FORMAT
        self.config = config
        self.stream_bytes = stream_bytes
        self.max_string = max_string
        self.pool = pool  # the worker's budget: not part of a checkpoint
        self.charged = 0  # what this runner counts in ``pool``
        self.merger = EventMerger()
        self.guard = IngestGuard(
            orphan_ttl=orphan_ttl, feature_names=config.features, task=config.task
        )
        self.experiment = experiment_for(config, emit_predictions=emit_predictions)
        self.n_pushed = 0
        self.n_refused = 0  # events refused before the merge (over a budget, too long)
        self.n_redelivered = 0
        self.positions: dict[tuple[str, int], tuple[int, int]] = {}
        self.finished = False
        self.n_outputs = 0
        self.failed: str | None = None
        self.n_after_failure = 0
        self.n_duplicates_marked = 0  # outputs the Kafka worker flagged as already delivered
        self.n_restores = 0  # times a worker resumed this runner from a checkpoint
        # where the worker found this stream's outputs (kind -> partition, offset) when the
        # checkpoint was written: a restored worker reads the output topics from there on
        self.output_marks: dict[str, tuple[int, int]] = {}

    def push(
        self, topic: str, event: InputEvent, position: tuple[int, int, int] | None = None
    ) -> tuple[list[Output], list[Rejection]]:
        """Take one event read from ``topic``; return the outputs and the rejections.

        ``position`` (partition, offset, index in the message) is where the event
        was read: an event at or before the last position taken from that
        partition of that topic is a redelivery and is dropped. A rejection
        names the position of the message that carried the rejected event.
        """
        source: Source | None = None
        if position is not None:
            where, at = (topic, position[0]), (position[1], position[2])
            if at <= self.positions.get(where, (-1, -1)):
                self.n_redelivered += 1
                return [], []
            self.positions[where] = at
            source = (topic, position[0], position[1])
        outputs: list[Output] = []
        rejections: list[Rejection] = []
        self._take(topic, event, source, outputs, rejections)
        return outputs, rejections

    def push_message(
        self, topic: str, events: list[InputEvent], partition: int, offset: int, first: int = 0
    ) -> tuple[list[Output], list[Rejection]]:
        """:meth:`push` each of ``events``, read from one message (``partition``,
        ``offset``) at the indexes ``first``, ``first + 1``...: the same outputs and
        rejections, in order, for one call.
        """
        where = (topic, partition)
        last = self.positions.get(where, (-1, -1))
        if last >= (offset, first):  # redelivered, the whole message or its start
            skip = len(events) if last[0] > offset else min(len(events), last[1] - first + 1)
            self.n_redelivered += skip
            events, first = events[skip:], first + skip
        outputs: list[Output] = []
        rejections: list[Rejection] = []
        if not events:
            return outputs, rejections
        self.positions[where] = (offset, first + len(events) - 1)
        source = (topic, partition, offset)
        if not self._take_all(topic, events, source, outputs, rejections):
            take = self._take
            for event in events:
                take(topic, event, source, outputs, rejections)
        return outputs, rejections

    def _take_all(
        self,
        topic: str,
        events: list[InputEvent],
        source: Source,
        outputs: list[Output],
        rejections: list[Rejection],
    ) -> bool:
        """Take ``events`` at once, queued together and released in one merge, when that
        gives what :meth:`_take` gives one by one: none is refused (the stream and the
        worker have room for all of them, no string is too long, no label's features
        were refused), none is an end marker. False (nothing done) otherwise.

        Queueing them together releases the same events in the same order (the merge
        releases each event once the other topic passes it, whenever it is asked).
        """
        if self.failed is not None or self.finished or not self.merger.accepts(topic):
            return False
        sizes = []
        total = longest = 0
        for event in events:
            if event.__class__ is EndOfStream:
                return False
            nbytes, most = footprint(event)
            sizes.append(nbytes)
            total += nbytes
            if most > longest:
                longest = most
        limit, pool = self.stream_bytes, self.pool
        if (self.max_string is not None and longest > self.max_string) or (
            limit is not None and self.held + total > limit
        ):
            return False
        if pool is not None and pool.limit is not None and pool.held + total > pool.limit:
            return False
        if self.guard.any_refused() and any(
            isinstance(e, LabelEvent) and self.guard.was_refused(e.id) for e in events
        ):
            return False
        self.merger.push_many(topic, events, source, sizes)
        self.n_pushed += len(events)
        self._settle()
        try:
            ready = self.merger.ready_items()
            if ready:
                self._admit(ready, outputs, rejections)
        finally:
            self._settle()
        return True

    def _take(
        self,
        topic: str,
        event: InputEvent,
        source: Source | None,
        outputs: list[Output],
        rejections: list[Rejection],
    ) -> None:
        """Take an event that is not a redelivery: refuse it, or queue it and let through
        what the merge releases; its outputs and rejections go to the lists given."""
        merger = self.merger
        # a finished runner's topics have both ended: the merger drops (and counts) the event;
        # so it does on a topic that ended before the stream failed (the failure may be
        # the end's own: a positive class no label was)
        if self.finished or not merger.accepts(topic):
            merger.push(topic, event, source)
            return
        if self.failed is not None:
            self.n_after_failure += 1
            return
        if isinstance(event, LabelEvent) and self.guard.was_refused(event.id):
            self.n_refused += 1  # its features were refused: so is it, at once
            rejections.append(self.guard.refused_label(event, source))
            return
        nbytes, refused = self._measure(event)
        if refused is not None:
            kind, reason = refused
            pending = self.experiment.buffer.__contains__
            self.n_refused += 1
            rejections.extend(self.guard.refuse(kind, reason, event, pending, source))
            return
        merger.push(topic, event, source, nbytes)
        self.n_pushed += 1
        self._settle()  # the pool's peak counts the event while it is queued
        try:
            ready = merger.ready_items()
            if ready:
                self._admit(ready, outputs, rejections)
        finally:
            self._settle()

    def _measure(self, event: InputEvent) -> tuple[int, tuple[str, str] | None]:
        """``event``'s bytes, and the kind and reason of its refusal if it is refused."""
        if isinstance(event, EndOfStream):
            return 0, None
        nbytes, longest = footprint(event)
        if self.max_string is not None and longest > self.max_string:
            what = "label" if isinstance(event, LabelEvent) else "feature value"
            return nbytes, (
                "too_long",
                f"{what} of {longest} characters in id {event.id!r}: the limit is "
                f"{self.max_string} per string",
            )
        held, limit, pool = self.held, self.stream_bytes, self.pool
        if (limit is None or held + nbytes <= limit) and (
            pool is None or pool.limit is None or pool.held + nbytes <= pool.limit
        ):
            return nbytes, None  # within both budgets (budget_refusal's test, at a glance)
        if isinstance(event, LabelEvent) and (
            event.id in self.experiment.buffer or event.id in self.merger.feature_ids
        ):
            return nbytes, None  # it frees its instance's features
        refusal = budget_refusal(nbytes, held, limit, pool, f"stream {event.stream!r}")
        if refusal is None:
            return nbytes, None
        return nbytes, ("over_budget", f"event of id {event.id!r} refused: {refusal}")

    @property
    def held(self) -> int:
        """The bytes of the events this stream holds: queued, orphan labels, pending."""
        return self.merger.nbytes + self.guard.orphan_nbytes + self.experiment.buffer.nbytes

    def _settle(self) -> None:
        """Bring the worker's pool up to date with what this stream holds now."""
        held = self.held
        if self.pool is not None:
            self.pool.charge(held - self.charged)
        self.charged = held

    def bind(self, pool: BytePool | None, stream_bytes: int | None, max_string: int | None) -> None:
        """Count this stream's bytes in ``pool`` (a worker's), under these limits."""
        if self.pool is not None:
            self.pool.charge(-self.charged)
        self.pool, self.stream_bytes, self.max_string = pool, stream_bytes, max_string
        self.charged = 0
        self._settle()

    def release_idle(self, topic: str) -> tuple[list[Output], list[Rejection]]:
        """Let ``topic``'s queued events through although the other topic is silent."""
        if self.failed is not None:
            return [], []
        return self._drain(self.merger.release_idle_items(topic))

    def _drain(self, events: list[Queued]) -> tuple[list[Output], list[Rejection]]:
        outputs: list[Output] = []
        rejections: list[Rejection] = []
        try:
            self._admit(events, outputs, rejections)
        finally:
            self._settle()
        return outputs, rejections

    def _admit(
        self, events: list[Queued], outputs: list[Output], rejections: list[Rejection]
    ) -> None:
        """Pass the released ``events`` through the guard to the experiment."""
        experiment = self.experiment
        if self.pairs and self._pairs_apply():
            n_before = len(outputs)
            PairedAdmission(self, events, outputs, rejections).admit_all()
            self.n_outputs += len(outputs) - n_before
            return
        process, admit = experiment.process, self.guard.admit
        pending = experiment.buffer.__contains__
        stops = self.config.stop_at_labels is not None
        # the columnar core's own entries, where process() would only dispatch to them
        direct = not stops and isinstance(experiment, ColumnarExperiment)
        features = experiment.features if direct else None  # type: ignore[union-attr]
        label = experiment.label if direct else None  # type: ignore[union-attr]
        n_before = len(outputs)
        for index, (event, source, nbytes) in enumerate(events):
            if stops and experiment.stopped and not isinstance(event, EndOfStream):
                # --stop-at-labels reached: the experiment counts the rest (after_stop), as
                # in evaluate, instead of their labels waiting as orphans for features
                process(event)
                continue
            admitted, rejected = admit(event, pending, source, nbytes)
            if rejected:
                rejections.extend(rejected)
            for ok in admitted:
                try:
                    if features is None:
                        out = process(ok, nbytes)
                    elif ok.__class__ is FeatureEvent:
                        out = features(ok.id, ok.ts, ok.x, nbytes)  # type: ignore[union-attr]
                    elif ok.__class__ is LabelEvent:
                        out = label(ok.id, ok.ts, ok.y)  # type: ignore[misc,union-attr]
                    else:
                        out = process(ok, nbytes)
                except Exception as exc:  # isolate the stream: see the module docstring
                    reason = describe(exc)
                    rejections.append(Rejection.experiment_error(ok, source, reason))
                    self.n_outputs += len(outputs) - n_before
                    # what this call took and will never evaluate: the rest of the
                    # admitted events, and of those the merge released
                    self.n_after_failure += len(admitted) - 1 - admitted.index(ok)
                    self.n_after_failure += len(events) - 1 - index
                    self.fail(reason)
                    return
                if out:
                    outputs.extend(out)
                if ok.__class__ is EndOfStream:
                    self.finished = True
        self.n_outputs += len(outputs) - n_before

    def _pairs_apply(self) -> bool:
        """Whether immediate pairs may be evaluated in bulk (:mod:`~streameval.pipeline.paired`):
        the columnar core in two passes, no prediction made per event."""
        experiment = self.experiment
        return (
            isinstance(experiment, ColumnarExperiment)
            and experiment.two_pass
            and not experiment.emit_predictions
        )

    def fail(self, reason: str) -> None:
        """Stop the stream: it takes no further event. The events it holds for the
        experiment (queued in the merge, orphan labels) are dropped, their bytes given
        back, and counted with the later ones in ``after_failure``."""
        self.failed = reason
        self.n_after_failure += self.merger.drop_queued() + self.guard.drop_orphans()
        self._settle()

    def __getstate__(self) -> dict[str, Any]:
        """The checkpoint: everything but the worker's pool (:meth:`bind` sets it again)."""
        return {**self.__dict__, "pool": None, "charged": 0}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        _count_bytes_of(self)

    @property
    def path(self) -> str | None:
        """``"columnar"`` when the columnar core evaluates the stream (as ``evaluate``'s
        ``runtime.path`` says), else ``None``."""
        return "columnar" if isinstance(self.experiment, ColumnarExperiment) else None

    def take_seq(self) -> int:
        """Number one more output produced outside :meth:`push` (the results message)."""
        self.n_outputs += 1
        return self.n_outputs - 1

    def results(self) -> dict[str, Any]:
        """The experiment's results document (identical to ``evaluate``'s)."""
        return self.experiment.results()

    def ingest_counts(self) -> dict[str, int]:
        """What the Kafka side dropped or held: duplicates, rejections by kind, orphans."""
        return {
            "redelivered": self.n_redelivered,
            "after_end": self.merger.n_after_end,
            "idle_released": self.merger.n_idle_released,
            "waiting": self.merger.n_waiting,
            "orphans_waiting": self.guard.n_orphans,
            "bytes_held": self.held,
            "refused": self.n_refused,
            "retimed": self.guard.n_retimed,
            "after_failure": self.n_after_failure,
            **{f"rejected_{k}": v for k, v in self.guard.counts.items()},
        }


def experiment_for(
    config: ExperimentConfig, *, emit_predictions: bool
) -> ColumnarExperiment | Experiment:
    """The core that evaluates ``config``: the columnar one where it applies.

    >>> type(experiment_for(ExperimentConfig("s", ["nb"]), emit_predictions=False)).__name__
    'ColumnarExperiment'
    >>> config = ExperimentConfig("s", ["nb"], reeval_k=10)
    >>> type(experiment_for(config, emit_predictions=False)).__name__
    'Experiment'
    """
    if supports(config):
        return ColumnarExperiment(config, emit_predictions=emit_predictions)
    return Experiment(config, emit_predictions=emit_predictions)


def _count_bytes_of(runner: StreamRunner) -> None:
    """Give a runner unpickled from a checkpoint without byte counts its counters (zero:
    the events it holds were never measured, and leave uncounted)."""
    if "stream_bytes" in runner.__dict__:
        return
    runner.stream_bytes = runner.max_string = None
    runner.pool, runner.charged, runner.n_refused = None, 0, 0
    runner.merger.nbytes = 0
    runner.merger.feature_ids = {}
    for event in runner.merger.sides[FEATURES].queue:
        runner.merger.feature_ids[event.id] = runner.merger.feature_ids.get(event.id, 0) + 1
    for side in runner.merger.sides.values():
        side.sizes = deque([0] * len(side.queue))
    guard = runner.guard
    guard.orphan_nbytes, guard._orphan_bytes, guard._refused = 0, {}, OrderedDict()
    runner.experiment.buffer.nbytes, runner.experiment.buffer._sizes = 0, {}
