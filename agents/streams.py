"""The streams of one worker: a :class:`~streameval.pipeline.runner.StreamRunner` per stream id.

A stream gets its runner when its experiment is defined on the experiments topic
(:meth:`StreamRegistry.define`), or, on a restarted worker, from its newest checkpoint
when it is first touched (:meth:`StreamRegistry.restore`), so that checkpoints of other
experiments on the same topics, written with another key, are never read.
"""

from __future__ import annotations

from typing import Any

from streameval.agents.checkpoint import StreamCheckpoints
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.memory import BytePool
from streameval.pipeline.runner import StreamRunner


class StreamConflict(ValueError):
    """A definition of a stream that is already defined with another experiment."""


class StreamRegistry:
    """The runners by stream id, and which streams have published their last output.

    Parameters
    ----------
    checkpoints
        Where a stream not in memory is restored from.
    predictions
        Whether the streams defined here make and publish predictions (a restored
        stream keeps the choice of the worker that defined it, and so its output
        numbering).
    orphan_ttl
        Event-time seconds a label waits for its features, in the streams defined here.
    pool, stream_bytes, max_string
        The byte budgets of every stream here, defined or restored: the worker's pool,
        the bytes per stream, the longest string value (see
        :class:`~streameval.pipeline.runner.StreamRunner`).
    """

    def __init__(
        self,
        checkpoints: StreamCheckpoints,
        *,
        predictions: bool = True,
        orphan_ttl: float = 3600.0,
        pool: BytePool | None = None,
        stream_bytes: int | None = None,
        max_string: int | None = None,
    ) -> None:
        self.budgets = (pool, stream_bytes, max_string)
        self.checkpoints = checkpoints
        self.predictions = predictions
        self.orphan_ttl = orphan_ttl
        self.runners: dict[str, StreamRunner] = {}
        self.concluded: set[str] = set()  # streams whose results (or failure) went out

    def get(self, stream: str) -> StreamRunner | None:
        """The runner of ``stream`` in memory, else ``None``."""
        return self.runners.get(stream)

    def restore(self, stream: str) -> StreamRunner | None:
        """The runner of ``stream`` from its checkpoint (if it has one), now in memory."""
        runner = self.checkpoints.take(stream)
        if runner is None:
            return None
        self.runners[stream] = runner
        runner.bind(*self.budgets)
        runner.n_restores += 1
        if runner.finished or runner.failed is not None:  # its results (or failure) went out
            self.concluded.add(stream)
        return runner

    def define(self, config: ExperimentConfig) -> StreamRunner | None:
        """A new runner for ``config``; ``None`` if the stream has this very experiment.

        The caller restores the stream first (:meth:`restore`), if it has a checkpoint.
        Raises :class:`StreamConflict` if the stream has another experiment, and
        :class:`~streameval.pipeline.spec.SpecError` or ``ValueError`` for an experiment
        the runner refuses (only allow-listed learners and detectors).
        """
        existing = self.runners.get(config.stream)
        if existing is not None:
            if existing.config.to_dict() != config.to_dict():
                raise StreamConflict(
                    f"stream {config.stream!r} is already defined with another experiment"
                )
            return None
        runner = StreamRunner(config, emit_predictions=self.predictions, orphan_ttl=self.orphan_ttl)
        runner.bind(*self.budgets)
        self.runners[config.stream] = runner
        return runner

    def status(self) -> dict[str, dict[str, Any]]:
        """Per stream: labels, pending predictions, state, outputs and ingest counts."""
        return {
            s: {
                "n_labelled": r.experiment.n_labelled,
                "pending": len(r.experiment.buffer),
                "finished": r.finished,
                "failed": r.failed,
                "outputs": r.n_outputs,
                "duplicates_marked": r.n_duplicates_marked,
                **r.ingest_counts(),
            }
            for s, r in self.runners.items()
        }
