"""One stream behind the Kafka topics: merge, guard, experiment -- all pure.

The Kafka worker keeps one :class:`StreamRunner` per stream and hands it the
events it decodes from the feature and label topics, in whatever order the
consumer delivers them. The runner restores the schedule order
(:class:`~streameval.pipeline.merge.EventMerger`), applies the bad-input rules
(:class:`~streameval.pipeline.ingest.IngestGuard`) and feeds the same
:class:`~streameval.pipeline.experiment.Experiment` as ``streameval evaluate``. It is
picklable: a pickle is the checkpoint of the stream, including the position
(Kafka offset, index within a packed message) reached on each topic, so a
restored runner drops the messages it has already seen when they are
delivered again.

Outputs are numbered: the runner counts every output it has produced
(``n_outputs``), so the outputs of one call carry the consecutive sequence
numbers ``n_outputs - len(outputs)`` to ``n_outputs - 1``. The numbers depend
only on the input events and their order, so a runner restored from a
checkpoint numbers the outputs it produces again exactly as the crashed one
did: downstream consumers deduplicate by ``(stream, seq)``.

An exception raised by the experiment on an admitted event (a learner that
fails on a value, a bug) does not propagate: the event is reported as an
``experiment_error`` rejection with the exception text, the stream is marked
``failed`` and takes no further event (they are counted in
``after_failure``), since an experiment interrupted half-way through an event
holds inconsistent state and no result computed from it could be trusted.
A worker therefore never crashes on the same message again and again, and the
other streams go on.
"""

from __future__ import annotations

from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import EndOfStream, InputEvent, Output
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.ingest import IngestGuard, Rejection
from streameval.pipeline.merge import EventMerger, Source


class StreamRunner:
    """Merge, check and evaluate the events of one stream.

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

    def __init__(
        self,
        config: ExperimentConfig,
        *,
        emit_predictions: bool = True,
        orphan_ttl: float = 3600.0,
    ) -> None:
        self.config = config
        self.merger = EventMerger()
        self.guard = IngestGuard(
            orphan_ttl=orphan_ttl, feature_names=config.features, task=config.task
        )
        self.experiment = Experiment(config, emit_predictions=emit_predictions)
        self.n_pushed = 0
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
        if self.failed is not None:
            self.n_after_failure += 1
            return [], []
        # a finished runner's topics have both ended: the merger drops (and counts) the event
        if not self.merger.push(topic, event, source) or self.finished:
            return [], []
        self.n_pushed += 1
        return self._drain(self.merger.ready_sourced())

    def release_idle(self, topic: str) -> tuple[list[Output], list[Rejection]]:
        """Let ``topic``'s queued events through although the other topic is silent."""
        if self.failed is not None:
            return [], []
        return self._drain(self.merger.release_idle_sourced(topic))

    def _drain(
        self, events: list[tuple[InputEvent, Source | None]]
    ) -> tuple[list[Output], list[Rejection]]:
        outputs: list[Output] = []
        rejections: list[Rejection] = []
        pending = self.experiment.buffer.__contains__
        for event, source in events:
            admitted, rejected = self.guard.admit(event, pending, source)
            rejections.extend(rejected)
            for ok in admitted:
                try:
                    outputs.extend(self.experiment.process(ok))
                except Exception as exc:  # isolate the stream: see the module docstring
                    self.failed = f"{type(exc).__name__}: {exc}"
                    rejections.append(
                        Rejection(
                            "experiment_error",
                            f"the experiment failed on this event and stream {event.stream!r} "
                            f"was stopped: {self.failed}",
                            ok,
                            source,
                        )
                    )
                    self.n_outputs += len(outputs)
                    return outputs, rejections
                if isinstance(ok, EndOfStream):
                    self.finished = True
        self.n_outputs += len(outputs)
        return outputs, rejections

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
            "retimed": self.guard.n_retimed,
            "after_failure": self.n_after_failure,
            **{f"rejected_{k}": v for k, v in self.guard.counts.items()},
        }
