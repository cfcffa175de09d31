"""A checkpoint carries its format; a worker of another format refuses it at restore.

The checkpoint records of a runner (as :meth:`StreamCheckpoints.parts` writes them to the
topic) are read back by a fresh reader: a runner of this format restores and goes on; one
whose recorded format differs (an older streameval, whose objects this version's code would
misread on its next event) is refused with :class:`CheckpointError` naming both formats,
which the worker turns into its loud ``checkpoint_refused`` path.
"""

from __future__ import annotations

import pytest
from streameval.agents.checkpoint import CheckpointReader, StreamCheckpoints
from streameval.agents.snapshot import CheckpointError
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import FeatureEvent, LabelEvent
from streameval.pipeline.runner import CHECKPOINT_FORMAT, StreamRunner

KEY = b"format-checkpoint-key-0123456789abcdef"


def runner_with_a_label() -> StreamRunner:
    runner = StreamRunner(ExperimentConfig("s", ["nochange"]))
    runner.push("labels", LabelEvent("s", "0", 0.0, "a", 1))
    runner.push("features", FeatureEvent("s", "0", 0.0, {"x": 1.0}, 0))
    runner.push("features", FeatureEvent("s", "1", 1.0, {"x": 2.0}, 2))
    return runner


def restored(runner: StreamRunner) -> StreamRunner | None:
    reader = CheckpointReader()
    for _, message in StreamCheckpoints(KEY).parts("s", runner):
        reader.add(message)
    checkpoints = StreamCheckpoints(KEY)
    checkpoints.reader = reader
    return checkpoints.take("s")


def test_a_checkpoint_of_this_format_restores() -> None:
    back = restored(runner_with_a_label())
    assert back is not None and back.checkpoint_format == CHECKPOINT_FORMAT
    assert back.experiment.n_labelled == 1


@pytest.mark.parametrize("other", [None, CHECKPOINT_FORMAT - 1, CHECKPOINT_FORMAT + 1])
def test_a_checkpoint_of_another_format_is_refused_naming_both(other: int | None) -> None:
    runner = runner_with_a_label()
    if other is None:  # written before checkpoints carried a format: format 1
        del runner.checkpoint_format
    else:
        runner.checkpoint_format = other
    with pytest.raises(CheckpointError) as refused:
        restored(runner)
    written = 1 if other is None else other
    assert str(refused.value) == (
        f"checkpoint of 's' has format {written}, this worker reads format "
        f"{CHECKPOINT_FORMAT} (written by another streameval version)"
    )


def test_a_checkpoint_holding_another_versions_events_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signed checkpoint whose objects this version cannot rebuild (the frozen dataclass
    events of format 3, pickled by reference to the same class name) is refused with
    :class:`CheckpointError`, the worker's ``checkpoint_refused`` path, not an unpickling
    error escaping the handler."""
    import dataclasses

    import streameval.pipeline.events as events

    @dataclasses.dataclass(frozen=True, slots=True)
    class LabelEvent:  # the layout of a format-3 label event
        stream: str
        id: str
        ts: float
        y: str
        seq: int = 0

    LabelEvent.__module__, LabelEvent.__qualname__ = events.__name__, "LabelEvent"
    runner = runner_with_a_label()
    monkeypatch.setattr(events, "LabelEvent", LabelEvent)
    runner.guard._orphans["9"] = (3600.0, LabelEvent("s", "9", 0.0, "a", 5))  # type: ignore[assignment]
    parts = list(StreamCheckpoints(KEY).parts("s", runner))
    monkeypatch.undo()
    reader = CheckpointReader()
    for _, message in parts:
        reader.add(message)
    checkpoints = StreamCheckpoints(KEY)
    checkpoints.reader = reader
    with pytest.raises(CheckpointError, match="cannot be read by this streameval version"):
        checkpoints.take("s")
