"""One re-evaluation run on two cores: some learners answer from a helper process.

With re-evaluation (``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1)
most of a run is its learners' work: every label, each learner learns once and
re-predicts the ~N/K pending instances that are due. The learners are independent of
each other and of the metrics, so the work splits without changing a number:

- a **helper** process runs the same experiment on the same schedule with only the
  *offloaded* learners, and sends every answer they give (each call that
  :class:`~streameval.pipeline.calls.LearnerCalls` makes of them: the first prediction
  of an instance, a round's batched predictions) down a pipe, in order. It scores
  nothing (``Experiment(scoring=False)``: no reference, record, metric or comparison),
  unless a drift reset needs its learners' scores;
- the **main** process runs the whole experiment with each offloaded learner replaced
  by an :class:`Offloaded` stand-in, which learns nothing and whose answers
  :class:`ReplayingCalls` reads from the pipe.

Both processes make the same calls in the same order, because when an experiment asks
its learners (and what it asks) depends on the events, the configuration and each
learner's own answers, never on the other learners. So the main process receives the
answers the learners would have given it in one process, and its results are the
one-process results, number for number (``tests/test_split.py``). The helper runs
ahead of the main process by up to the pipe's capacity; a failure in the helper
(a learner's exception) is raised in the main process where its answer was due.

>>> from streameval.pipeline.config import ExperimentConfig
>>> config = ExperimentConfig("s", ["nochange", "majority", "nb", "ht"], reeval_k=10)
>>> offloaded_learners(config)
['ht']
>>> offloaded_learners(ExperimentConfig("s", ["nochange", "nb"], reeval_k=10))
['nb']
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import resource
import sys
import threading
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from streameval.pipeline.calls import LearnerCalls
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.failure import LearnerFailed

#: Learners cheap enough that moving them saves nothing (the references' own kind).
BASELINES = frozenset({"nochange", "majority"})
#: Answers the helper gathers before it writes them to the pipe (one write per batch).
BATCH = 64
#: The pipe's capacity asked of the kernel, so the helper can run ahead (Linux).
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031


def offloaded_learners(config: ExperimentConfig) -> list[str]:
    """The learners a split run gives the helper: the later half of the model learners
    (all of them when there is one), so that each process has a share of the models.

    The baselines stay in the main process, whose share is also every metric.
    """
    models = [name for name in config.learners if name not in BASELINES]
    return models[len(models) // 2 :]


def why_not_split(config: ExperimentConfig) -> str | None:
    """Why ``config`` cannot run on two processes here, or ``None`` when it can."""
    if not config.reeval:
        return "only a run with re-evaluation (--reeval-k) splits"
    if not offloaded_learners(config):
        return "no learner besides the baselines (nochange, majority) to move"
    if any(name.startswith("moa:") for name in config.learners):
        return "moa: learners run in a Java VM, which a forked process cannot share"
    if "fork" not in multiprocessing.get_all_start_methods():
        return "this platform cannot fork a process"
    if threading.active_count() > 1 or _jvm_started():
        return "this process runs other threads, which a fork would not copy"
    return None


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _jvm_started() -> bool:
    jpype = sys.modules.get("jpype")
    return bool(jpype is not None and jpype.isJVMStarted())


class Offloaded:
    """The main process's stand-in for a learner that the helper process runs.

    It learns nothing (the helper's copy learns), and :class:`ReplayingCalls` answers
    for it; a drift reset keeps it (the helper resets its copy on the same label).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def learn_one(self, x: Any, y: Any, **kwargs: Any) -> None:
        """The helper's copy learns ``y``."""

    def clone(self) -> Offloaded:
        """Itself: the helper makes the untrained clone."""
        return self

    def __repr__(self) -> str:
        return f"Offloaded({self.name!r})"


class ReplayingCalls(LearnerCalls):
    """:class:`LearnerCalls` that read an :class:`Offloaded` learner's answers from the helper."""

    def __init__(self, calls: LearnerCalls, answers: Answers) -> None:
        super().__init__(calls.protocol, calls.classification, calls.slots)
        self.answers = answers

    def predict(self, learner: Any, x: Any, at: int) -> tuple[Any, dict | None]:
        if isinstance(learner, Offloaded):
            return self.answers.next("one", 1)
        return super().predict(learner, x, at)

    def predict_many(self, learner: Any, xs: list, ats: list[int]) -> list[Any]:
        if isinstance(learner, Offloaded):
            return self.answers.next("many", len(xs))
        return super().predict_many(learner, xs, ats)


class RecordingCalls(LearnerCalls):
    """The helper's :class:`LearnerCalls`: each answer is also sent to the main process."""

    def __init__(self, calls: LearnerCalls, sink: Sink) -> None:
        super().__init__(calls.protocol, calls.classification, calls.slots)
        self.sink = sink

    def predict(self, learner: Any, x: Any, at: int) -> tuple[Any, dict | None]:
        answer = super().predict(learner, x, at)
        self.sink.put(("one", answer))
        return answer

    def predict_many(self, learner: Any, xs: list, ats: list[int]) -> list[Any]:
        answer = super().predict_many(learner, xs, ats)
        self.sink.put(("many", answer))
        return answer


class Sink:
    """The helper's end of the pipe: answers in batches of :data:`BATCH`, then the end."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.batch: list[tuple[str, Any]] = []

    def put(self, answer: tuple[str, Any]) -> None:
        self.batch.append(answer)
        if len(self.batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.conn.send(("answers", self.batch))
            self.batch = []

    def finish(self, kind: str, payload: Any) -> None:
        """Send what is left, then ``("done", stats)`` or ``("failed", error)``."""
        self.flush()
        self.conn.send((kind, payload))


class Answers:
    """The main process's end of the pipe: the helper's answers, in the order given."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.queue: deque[tuple[str, Any]] = deque()
        self.stats: dict[str, Any] | None = None

    def next(self, kind: str, n: int) -> Any:
        """The next answer, which must be of ``kind`` and for ``n`` instances."""
        while not self.queue:
            if self.stats is not None:
                raise RuntimeError("the helper process finished before the main process")
            self._receive()
        got, answer = self.queue.popleft()
        size = 1 if got == "one" else len(answer)
        if got != kind or size != n:
            raise RuntimeError(
                f"the helper process answered a {got} call for {size} instance(s) where the "
                f"main process asked a {kind} call for {n}: the two runs diverged"
            )
        return answer

    def close(self) -> dict[str, Any]:
        """Read the helper's end; its CPU time and peak memory."""
        while self.stats is None:
            if self.queue:
                raise RuntimeError("the helper process gave more answers than were asked")
            self._receive()
        return self.stats

    def _receive(self) -> None:
        """One message: answers join the queue, a failure is raised, the end's stats kept."""
        kind, payload = self._message()
        if kind == "answers":
            self.queue.extend(payload)
        elif kind == "failed":
            raise _rebuilt(payload)
        else:
            self.stats = payload

    def _message(self) -> tuple[str, Any]:
        try:
            return self.conn.recv()
        except EOFError:
            raise RuntimeError("the helper process ended without its answers") from None


def _portable(exc: BaseException) -> tuple[Any, ...]:
    """``exc`` as a tuple that pickles: a learner's failure by its parts."""
    cause = exc.cause if isinstance(exc, LearnerFailed) else exc
    try:
        pickle.loads(pickle.dumps(cause))
    except Exception:
        cause = RuntimeError(f"{type(cause).__name__}: {cause}")
    if isinstance(exc, LearnerFailed):
        return ("learner", exc.name, exc.index, exc.step, cause)
    return ("other", cause)


def _rebuilt(parts: tuple[Any, ...]) -> BaseException:
    if parts[0] == "learner":
        return LearnerFailed(*parts[1:])
    return parts[1]


def _widen(conn: Connection) -> None:
    with contextlib.suppress(ImportError, OSError):  # elsewhere than Linux: as it is
        import fcntl

        fcntl.fcntl(conn.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)


def helper_config(config: ExperimentConfig) -> ExperimentConfig:
    """The helper's experiment: ``config`` with only the offloaded learners."""
    return ExperimentConfig.from_dict({**config.to_dict(), "learners": offloaded_learners(config)})


def _helper(
    conn: Connection,
    config: ExperimentConfig,
    dataset: Any,
    emit_predictions: bool,
    allow_import: bool,
) -> None:
    """The helper process: the offloaded learners' experiment, its answers to ``conn``."""
    from streameval.pipeline.evaluate import schedule
    from streameval.pipeline.experiment import Experiment

    sink = Sink(conn)
    try:
        experiment = Experiment(
            helper_config(config),
            emit_predictions=emit_predictions,
            allow_import=allow_import,
            scoring=config.drift_reset,  # a reset follows the learner's scores
        )
        experiment.calls = RecordingCalls(experiment.calls, sink)
        for event in schedule(config, dataset):
            experiment.process(event)
        if experiment.scoring:  # without, the end of the stream made the waiting firsts
            experiment.results()  # makes the first predictions still waiting, as the main's
    except BaseException as exc:  # every failure, an interrupt too, goes to the main process
        sink.finish("failed", _portable(exc))
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    sink.finish(
        "done",
        {
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * 1024,
            "learners": list(experiment.config.learners),
        },
    )


@contextlib.contextmanager
def helper_process(
    config: ExperimentConfig,
    dataset: Any,
    *,
    emit_predictions: bool,
    allow_import: bool,
) -> Iterator[Answers]:
    """Fork the helper for ``config`` on ``dataset`` (as ``evaluate.prepare`` gave them);
    yield its :class:`Answers`; stop it on leaving."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    _widen(send)
    process = ctx.Process(
        target=_helper,
        args=(send, config, dataset, emit_predictions, allow_import),
        name="streameval-helper",
        daemon=True,
    )
    process.start()
    send.close()
    try:
        yield Answers(receive)
    except BaseException:
        process.kill()  # it may be blocked on a full pipe that nobody reads any more
        raise
    finally:
        receive.close()
        process.join()


def offload(experiment: Any, answers: Answers) -> None:
    """Replace ``experiment``'s offloaded learners with stand-ins answered by ``answers``."""
    names = set(offloaded_learners(experiment.config))
    for slot in experiment.slots:
        if slot.name in names:
            slot.learner = Offloaded(slot.name)
    experiment.calls = ReplayingCalls(experiment.calls, answers)
