"""``run``'s replay in a child process, beside the evaluation rather than in its way.

``streameval run`` evaluates its stream in its own process (:mod:`streameval.agents.inline`)
while the replay produces it. The replay is Python work too -- reading the CSV, building the
events, encoding their JSON: 0.4 s of CPU for Electricity -- and in a thread it holds the
interpreter lock the evaluation needs. :class:`ReplayProcess` runs it in a child process
instead, forked at the start of the run while this process has no Kafka client: librdkafka's
threads do not survive a fork, and a client made in a child forked while one of them held a
lock can hang. A process with any thread but its main one and those marked ``fork_safe`` is
therefore not forked (:func:`can_fork`): ``run`` then replays in a thread.

The child makes its producer at once when the broker's address is already known (a
configured cluster), else as soon as the run tells it the address of the broker it started
(:meth:`ReplayProcess.connect`): an idempotent producer that is given a message before it
has its producer id delivers it 0.5-1 s later, one given its first message 0.1-0.3 s after
it was made delivers at once (on the embedded broker), so the wait overlaps the run's own
set-up. It produces nothing before the run
says that the topics exist and that their start offsets were read (:meth:`ReplayProcess.produce`
sends it ``go``); then the experiment's definition, then the replay, with that one producer.
The child runs at a lower scheduling priority (:data:`NICENESS`, its producer's threads
included): the evaluation is the run's slower side and the replay only has to stay ahead of
it, so where the two, the broker and anything else share too few cores, the evaluation gets
them first. On 2 cores, Electricity with naive Bayes through the embedded broker (holding 700
topics, as in ``make bench``), the run took 1.36-1.46 s (median 1.36, five runs) with the
child at niceness 10, against 1.38-1.44 s (median 1.42) at the run's own.
It reports its progress (events produced), then its
:class:`~streameval.agents.replay.ReplayStats` or its exception, through a pipe. Setting the
``stop`` event given to :meth:`~ReplayProcess.produce` ends it early: it stops at its next
event, delivers what it produced and reports, as the thread does.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import threading
import time
import warnings
from typing import Any

from streameval.agents.collection import collecting_less
from streameval.agents.config import KafkaSettings

#: Seconds between two progress reports of the child.
PROGRESS_EVERY = 0.25
#: Seconds the child gets to stop once told to (then it is killed).
STOP_GRACE = 10.0
#: How much lower the child's scheduling priority is than the run's (``nice``).
NICENESS = 10


def can_fork() -> bool:
    """Whether this process may fork a replay now: it has ``fork``, no Python thread but
    the main one and those marked ``fork_safe`` (they hold no lock a child could need: the
    command line's reader of librdkafka's stderr, :class:`~streameval.cli.errors.QuietLibrdkafka`),
    and no native thread of another name than the process's (Linux lists them in ``/proc``:
    librdkafka's are ``rdk:...``, a JVM's have their own names; numpy's OpenBLAS pool keeps
    the process's name and stops itself around a fork)."""
    main = threading.main_thread()
    others = [t for t in threading.enumerate() if t is not main]
    if not hasattr(os, "fork") or any(not getattr(t, "fork_safe", False) for t in others):
        return False
    if threading.current_thread() is not main:
        return False
    try:
        with open("/proc/self/comm") as f:
            name = f.read()
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/comm") as f:
                if f.read() != name:
                    return False
    except OSError:  # no /proc: nothing tells what runs
        return False
    return True


class ReplayProcess:
    """A forked child that replays ``config``'s dataset once told where (see the module
    docstring). ``settings`` are the run's Kafka settings as known now (the child makes its
    producer at once when they name the broker)."""

    def __init__(
        self,
        config: Any,
        settings: KafkaSettings,
        *,
        data_dir: str | None,
        speed: float | None,
        pack: int,
    ) -> None:
        from streameval.agents.broker import death_signal_preexec

        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        dies = death_signal_preexec(os.getpid(), signal.SIGKILL)  # it dies with this process
        self.process = context.Process(
            target=_child,
            args=(child, self._conn, dies, config, settings, data_dir, speed, pack),
            name="streameval-replay",
            daemon=True,
        )
        with warnings.catch_warnings():  # Python >= 3.12 warns of any thread (OpenBLAS's)
            warnings.filterwarnings("ignore", "This process .* is multi-threaded")
            self.process.start()
        child.close()

    def connect(self, settings: KafkaSettings) -> None:
        """Tell the child the broker's address as soon as it is known (an embedded broker's):
        it makes its producer then, so that the producer id is there by the first event."""
        self._conn.send(("broker", settings))

    def produce(self, settings: KafkaSettings, progress: Any, stop: threading.Event) -> Any:
        """Let the child produce to ``settings``' topics; return its replay's stats.

        ``progress`` (``advance(n)``, ``close()``) follows the events it produced. Raises
        what the child raised, or :class:`RuntimeError` if it ended without a word.
        """
        self._conn.send(("go", settings))
        stopping = False
        while True:
            if stop.is_set() and not stopping:
                stopping = True
                self.process.terminate()  # SIGTERM: it stops at its next event
            if self._conn.poll(0.1):
                try:
                    kind, payload = self._conn.recv()
                except EOFError:
                    raise self._died() from None
                if kind == "progress":
                    progress.advance(payload)
                    continue
                progress.close()
                if kind == "done":
                    return payload
                raise payload
            if not self.process.is_alive() and not self._conn.poll(0):
                raise self._died()

    def _died(self) -> RuntimeError:
        self.process.join(1.0)
        code = self.process.exitcode
        return RuntimeError(f"the replay process ended (exit code {code}) without a report")

    def close(self) -> None:
        """End the child if it still runs (the run failed before it was done); reap it."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_GRACE)
            if self.process.is_alive():
                self.process.kill()
        self.process.join(5.0)
        self._conn.close()


class _Progress:
    """The child's side of the progress: counts sent through the pipe, a few per second."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.n = 0
        self.sent = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.sent >= PROGRESS_EVERY:
            self.conn.send(("progress", self.n))
            self.n, self.sent = 0, now

    def close(self) -> None:
        if self.n:
            self.conn.send(("progress", self.n))
            self.n = 0


def _child(
    conn: Any,
    parents_end: Any,
    die_with_parent: Any,
    config: Any,
    settings: KafkaSettings,
    data_dir: str | None,
    speed: float | None,
    pack: int,
) -> None:
    """The child's whole life: producer, ``go``, definition and replay, report.

    It dies with the run (killed by the kernel: a run that exits at once, as one whose
    broker is lost does, leaves no replay behind holding its stderr), and closes its copy
    of the run's end of the pipe, so that a send to a run that is gone fails."""
    if die_with_parent is not None:
        die_with_parent()
    with contextlib.suppress(OSError):  # before its producer: librdkafka's threads inherit it
        os.nice(NICENESS)
    parents_end.close()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        producer = _producer(settings) if settings.bootstrap_servers else None
        message = _next_word(conn, stop)
        if message is not None and message[0] == "broker":  # the embedded broker is up
            if producer is None:
                producer = _producer(message[1])
                settings = message[1]
            message = _next_word(conn, stop)
        if message is None or message[0] != "go":
            return  # the run ended before its replay (no broker, a refused experiment)
        if producer is None or message[1].confluent_config() != settings.confluent_config():
            producer = _producer(message[1])
        with collecting_less():  # the child allocates an event per row and holds little
            stats = _replay(conn, config, message[1], producer, data_dir, speed, pack, stop)
        conn.send(("done", stats))
    except BaseException as exc:  # reported whole: the run raises it
        try:
            conn.send(("error", exc))
        except Exception:  # not picklable: its text then
            conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


def _next_word(conn: Any, stop: threading.Event) -> Any:
    """The run's next message; ``None`` once it said stop (``SIGTERM``) or went away."""
    while not stop.is_set():
        try:
            if conn.poll(0.1):
                return conn.recv()
        except (EOFError, OSError):
            return None
    return None


def _producer(settings: KafkaSettings) -> Any:
    """The replay's producer, its producer id asked for while the run sets up."""
    from streameval.agents.replay import replay_producer

    return replay_producer(settings)


def _replay(
    conn: Any,
    config: Any,
    settings: KafkaSettings,
    producer: Any,
    data_dir: str | None,
    speed: float | None,
    pack: int,
    stop: threading.Event,
) -> Any:
    """Produce the experiment's definition, then replay its dataset (as ``submit`` and
    :func:`~streameval.agents.run.replay_dataset` do, with one producer)."""
    from streameval.agents.replay import OneEventPerMessage, PackedMessages, replay
    from streameval.agents.run import experiment_message
    from streameval.agents.topics import TopicNames
    from streameval.pipeline.evaluate import expected_events, prepare, schedule

    dataset, config = prepare(config, data_dir)
    topic = TopicNames.for_prefix(settings.topic_prefix).experiments
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer.produce(
        topic, experiment_message(config), config.stream.encode("utf-8"), on_delivery=delivered
    )
    events = itertools.takewhile(lambda _: not stop.is_set(), schedule(config, dataset))
    stats = replay(
        events,
        settings,
        speed=speed,
        progress=_Progress(conn),
        total=expected_events(config, dataset),
        message_format=PackedMessages(pack) if pack > 1 else OneEventPerMessage(),
        producer=producer,
    )  # it delivers every message, the definition too
    if errors:
        raise RuntimeError(f"the experiment could not be written to {topic}: {errors[0]}")
    return stats
