"""The ``run`` job and its parts on a Kafka cluster: submit an experiment, replay a dataset,
start and stop a worker process, wait for results on the metrics topic.

``streameval run``, ``submit`` and ``replay`` call these; so do the bench and the tests, and
any program that drives streameval's topics from Python.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streameval.agents.config import FETCH_SETTINGS, KafkaSettings
from streameval.pipeline.labels_progress import LabelProgress

RESULTS_TIMEOUT = 600.0
#: ``run``'s worker checkpoints every this many events (the worker's default is 20,000): it
#: serves one run, which ends if it dies, so only its last checkpoint (written when it is idle
#: for a second, and after the results) could ever be read. Pickling the runner every 20,000
#: events stalls the agent for ~1 s of a 13 s electricity run.
RUN_CHECKPOINT_EVERY = 1_000_000


def experiment_message(config: Any) -> bytes:
    """The experiments-topic message of ``config``; ``ValueError`` if it does not fit its
    schema."""
    from streameval.agents.codec import encode
    from streameval.schemas import validate

    message = config.to_dict()
    reason = validate("experiments", message)
    if reason is not None:
        raise ValueError(f"experiment does not fit its schema: {reason}")
    return encode(message)


def submit_experiment(settings: KafkaSettings, config: Any) -> None:
    """Write ``config`` to the compacted experiments topic (key = stream id)."""
    from streameval.agents.first_delivery import ready_producer
    from streameval.agents.topics import PARTITIONER, TopicNames

    value = experiment_message(config)
    # a stream's definition must land on the same partition number as its events, or
    # another worker would own it
    # made ready, else the flush can wait a second (agents.first_delivery)
    producer = ready_producer(
        {**settings.confluent_config(), "enable.idempotence": True, **PARTITIONER}
    )
    names = TopicNames.for_prefix(settings.topic_prefix)
    producer.produce(names.experiments, value, config.stream.encode("utf-8"))
    if producer.flush(30):
        raise RuntimeError(f"the experiment could not be written to {names.experiments}")


def replay_dataset(
    settings: KafkaSettings,
    config: Any,
    *,
    speed: float | None,
    pack: int,
    progress: Any,
    data_dir: str | None = None,
    stop: threading.Event | None = None,
) -> Any:
    """Replay ``config``'s dataset schedule to the feature and label topics.

    Once ``stop`` is set the replay ends early (what was produced is flushed).
    ``progress`` is a bool (a bar of the replay's own, or none) or a counter of the
    caller's (see :func:`~streameval.agents.replay.replay`).
    """
    from streameval.agents.replay import OneEventPerMessage, PackedMessages, replay
    from streameval.pipeline.evaluate import expected_events, prepare, schedule

    dataset, config = prepare(config, data_dir)
    fmt = PackedMessages(pack) if pack > 1 else OneEventPerMessage()
    events = schedule(config, dataset)
    if stop is not None:
        events = itertools.takewhile(lambda _: not stop.is_set(), events)
    return replay(
        events,
        settings,
        speed=speed,
        progress=progress,
        total=expected_events(config, dataset),
        message_format=fmt,
    )


class ResultsWaiter:
    """Reads the metrics topic from its current end, waiting for the results of some streams.

    Create it before the experiments are submitted (it reads from the topic's end).
    :meth:`wait` returns the results document of a single stream; :meth:`wait_all`
    waits for every stream and tells when each results message was read.
    """

    def __init__(
        self, settings: KafkaSettings, *streams: str, progress: LabelProgress | None = None
    ) -> None:
        from confluent_kafka import Consumer, TopicPartition
        from streameval.agents.topics import TopicNames

        if not streams:
            raise ValueError("ResultsWaiter needs at least one stream")
        self.streams = streams
        self.stream = streams[0]
        topic = TopicNames.for_prefix(settings.topic_prefix).metrics
        self.consumer = Consumer(
            {
                **settings.confluent_config(),
                "group.id": f"streameval-run-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **FETCH_SETTINGS,  # the results are read as soon as they are out
            }
        )
        meta = self.consumer.list_topics(topic, timeout=10)
        parts = []
        for p in meta.topics[topic].partitions:
            _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            parts.append(TopicPartition(topic, p, high))
        self.consumer.assign(parts)
        self.snapshots = 0  # metric snapshots of the awaited streams read meanwhile
        self.progress = progress  # follows the snapshots' label counts, if given

    def wait(self, timeout: float, alive: Callable[[], bool]) -> dict[str, Any]:
        """The results document of the (single, or first) stream."""
        return self.wait_all(timeout, alive, streams=(self.stream,))[self.stream][1]

    def wait_all(
        self,
        timeout: float,
        alive: Callable[[], bool],
        *,
        streams: tuple[str, ...] | None = None,
    ) -> dict[str, tuple[float, dict[str, Any]]]:
        """``stream -> (time.perf_counter() when its results were read, results)`` for all.

        Raises :class:`TimeoutError` after ``timeout`` seconds, :class:`RuntimeError`
        when ``alive()`` turns false while nothing comes or when the worker says an
        awaited stream failed (:class:`~streameval.agents.codec.StreamFailed`, a ``failed``
        notice). Closes the consumer.
        """
        from streameval.agents.codec import parse, stream_outcome

        waiting = set(self.streams if streams is None else streams)
        done: dict[str, tuple[float, dict[str, Any]]] = {}
        deadline = time.monotonic() + timeout
        try:
            while waiting:
                if time.monotonic() > deadline:
                    names = ", ".join(repr(s) for s in sorted(waiting))
                    raise TimeoutError(f"no results for stream {names} within {timeout:.0f} s")
                msg = self.consumer.poll(0.2)
                if msg is None:
                    if not alive():
                        raise RuntimeError("the worker stopped before publishing the results")
                    continue
                if msg.error():
                    continue
                try:
                    value = parse(msg.value())
                except ValueError:
                    continue
                stream = value.get("stream") if isinstance(value, dict) else None
                if stream not in waiting:
                    continue
                results = stream_outcome(value, stream)  # StreamFailed on a failure notice
                if results is not None:
                    done[stream] = (time.perf_counter(), results)
                    waiting.discard(stream)
                else:
                    self.snapshots += 1
                if self.progress is not None:
                    follow_message(self.progress, value, results)
            return done
        finally:
            self.consumer.close()


def follow_message(
    progress: LabelProgress, message: dict[str, Any], results: dict[str, Any] | None
) -> None:
    """Advance ``progress`` to the label count of a metric snapshot or results document."""
    if results is not None:
        overhead = results.get("overhead") or {}
        progress.update(
            int(results.get("n_labelled") or 0),
            pending=int(overhead.get("pending") or 0),
            repredictions=int(overhead.get("n_predictions_made") or 0),
        )
    elif isinstance(message.get("n_labelled"), int):
        metrics = message.get("metrics") or {}
        progress.update(
            message["n_labelled"],
            pending=int(metrics.get("pending") or 0),
            repredictions=int(metrics.get("n_repredictions") or 0),
        )


class RunnerFollower:
    """Advances ``progress`` to the counts of ``stream``'s runner, read every ``every``
    seconds by a thread of its own (``run``'s inline evaluation).

    Counts read only between messages would stand still for as long as one message takes,
    and one message can take long: a definition lets in every event parked before it
    (thousands). The thread reads three numbers (no structure is walked), so it may run
    beside the loop that updates them. :meth:`seen` is the consumer loop's ``on_message``.
    """

    def __init__(self, progress: LabelProgress, stream: str, every: float = 0.5) -> None:
        self.progress = progress
        self.stream = stream
        self.every = every
        self.worker: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streameval-progress", daemon=True)

    def seen(self, worker: Any) -> None:
        """A message was handled by ``worker``: follow its runner from now on."""
        if self.worker is None:
            self.worker = worker
            self.start()

    def start(self) -> None:
        self._thread.start()

    def sample(self) -> None:
        runner = self.worker.runners.get(self.stream) if self.worker is not None else None
        if runner is not None:
            experiment = runner.experiment
            self.progress.update(
                experiment.n_labelled,
                pending=len(experiment.buffer),
                repredictions=experiment.n_repredictions,
            )

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class MetricsFollower(RunnerFollower):
    """Advances ``progress`` to ``stream``'s counts on a worker's ``/metrics``, read every
    ``every`` seconds (``run --dashboard``, whose worker is another process: its metric
    snapshots come only with ``--snapshot-every``)."""

    def __init__(self, progress: LabelProgress, stream: str, url: str, every: float = 1.0):
        super().__init__(progress, stream, every)
        self.url = url

    def sample(self) -> None:
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        try:
            with urllib.request.urlopen(self.url, timeout=2) as response:
                text = response.read().decode("utf-8")
        except OSError:  # not serving yet, or stopping: the next reading will tell
            return
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.labels.get("stream") == self.stream:
                    found.setdefault(sample.name, sample.value)
        if "streameval_labels_total" in found:
            self.progress.update(
                int(found["streameval_labels_total"]),
                pending=int(found.get("streameval_pending", 0)),
                repredictions=int(found.get("streameval_repredictions_total", 0)),
            )


def run_progress(config: Any, dataset: Any, enabled: bool) -> LabelProgress:
    """``run``'s progress: labels evaluated of the dataset's, after the replay's events."""
    from streameval.pipeline.evaluate import expected_events

    total = expected_events(config, dataset)
    labels = None if total is None else (total - 1) // 2  # 2 events per instance + the end
    return LabelProgress(labels, replay_total=total, replay=True, enabled=enabled)


def start_worker(
    settings: KafkaSettings,
    env_extra: dict[str, str],
    *,
    log_path: Path,
    extra_args: list[str] | None = None,
) -> subprocess.Popen:
    """Start ``streameval worker`` as a child process (logs to ``log_path``)."""
    env = {**os.environ, **env_extra, "KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap_servers or ""}
    env["STREAMEVAL_TOPIC_PREFIX"] = settings.topic_prefix
    cmd = [sys.executable, "-m", "streameval.cli", "worker", *(extra_args or [])]
    handle = open(log_path, "ab")  # noqa: SIM115 - closed by the process end
    return subprocess.Popen(cmd, env=env, stdout=handle, stderr=subprocess.STDOUT)


def stop_worker(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def run_through_kafka(
    config: Any,
    settings: KafkaSettings,
    *,
    data_dir: str | None = None,
    progress: bool = False,
    pack: int = 200,
    speed: float | None = None,
    timeout: float = RESULTS_TIMEOUT,
    worker_args: list[str] | None = None,
    predictions: bool = False,
    inline: bool = True,
    broker_timeout: float | None = None,
    on_broker: Callable[[str, bool], None] | None = None,
) -> dict[str, Any]:
    """The whole ``run``: broker, topics, worker, experiment, replay, results.

    ``on_broker(bootstrap, embedded)`` is told the broker's address once it answers
    (``streameval run`` prints it, so other clients can attach to the run's topics).

    Without ``predictions`` the worker makes and publishes none (``--no-predictions``):
    the results document is the same (it is ``evaluate``'s), the predictions topic stays
    empty.

    ``inline`` (the default): the stream is evaluated in this process, read by a
    plain consumer (:mod:`streameval.agents.inline`; no second interpreter, no Faust
    start-up, no group join) while the replay runs in a child process forked at the start
    (:mod:`streameval.agents.replay_process`), or in a thread when this process may not
    fork (it has other threads). Otherwise a Faust
    worker process (``streameval worker``) does it, started as soon as the topics
    exist so that its start-up overlaps with the submission and the replay (it
    reads its topics from their beginning); ``run --dashboard`` needs it for the
    web views. ``worker_args`` are passed to that worker after ``run``'s own
    options; ``broker_timeout`` is the inline loop's ``--broker-timeout``.
    """
    from streameval.agents.broker import broker_for
    from streameval.agents.inline import evaluate_inline, replay_process
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.evaluate import prepare

    dataset, config = prepare(config, data_dir)  # fails early on a missing dataset (~10 ms)
    # refused before anything starts; the replay's child, forked next, finds the check loaded
    experiment_message(config)
    bar = run_progress(config, dataset, progress)
    embedded = settings.embedded
    # forked now, before this process has a Kafka client (the broker's probe is one)
    replayer = replay_process(config, settings, data_dir, speed, pack) if inline else None
    try:
        with broker_for(settings) as bootstrap:
            settings = settings.with_bootstrap(bootstrap)
            if replayer is not None and embedded:
                replayer.connect(settings)  # its producer starts while the topics are made
            if on_broker is not None:
                on_broker(bootstrap, embedded)
            ensure_topics(
                settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix
            )
            if inline:
                results, stats, start = evaluate_inline(
                    config, settings, replayer, bar, data_dir=data_dir, pack=pack,
                    speed=speed, timeout=timeout, predictions=predictions,
                    broker_timeout=broker_timeout,
                )  # fmt: skip
            else:
                results, stats, start = _run_with_worker(
                    config, settings, data_dir=data_dir, progress=bar, pack=pack,
                    speed=speed, timeout=timeout, worker_args=worker_args,
                    predictions=predictions,
                )  # fmt: skip
            elapsed = time.perf_counter() - start
            follow_message(bar, {}, results)  # the followers have stopped: nothing comes after
            bar.close()  # after the results: the last line has their counts
    finally:
        if replayer is not None:
            replayer.close()
    results.pop("ingest", None)
    results["runtime"] = {
        **results.get("runtime", {}),  # the worker's: outputs, duplicates_marked, restores
        "driver": "run",
        "seconds": round(elapsed, 3),
        "events": stats.n_events,
        "events_per_s": round(stats.n_events / elapsed, 1) if elapsed > 0 else None,
        "messages": stats.n_messages,
        "broker": "embedded" if embedded else "configured",
        "replay": "process" if replayer is not None else "thread",
        "replay_seconds": round(stats.seconds, 3),
    }
    return results


def _run_with_worker(
    config: Any,
    settings: KafkaSettings,
    *,
    data_dir: str | None,
    progress: LabelProgress,
    pack: int,
    speed: float | None,
    timeout: float,
    worker_args: list[str] | None,
    predictions: bool,
) -> tuple[dict[str, Any], Any, float]:
    """``run`` with a Faust worker process (``run --dashboard``): results, replay stats, start."""
    import secrets

    # the inline path writes no checkpoint; this worker needs a key (one per run)
    key = os.environ.get("STREAMEVAL_CHECKPOINT_KEY") or secrets.token_hex(32)
    env = {"STREAMEVAL_CHECKPOINT_KEY": key}
    if data_dir:
        env["STREAMEVAL_DATA_DIR"] = str(data_dir)
    log_dir = Path(tempfile.mkdtemp(prefix="streameval-run-"))
    own = ["--checkpoint-every", str(RUN_CHECKPOINT_EVERY)]
    own += [] if predictions else ["--no-predictions"]
    worker = start_worker(
        settings, env, log_path=log_dir / "worker.log", extra_args=[*own, *(worker_args or [])]
    )
    start = time.perf_counter()
    follower: MetricsFollower | None = None
    try:  # the waiter reads from the metrics topic's end: created before the experiment
        waiter = ResultsWaiter(settings, config.stream, progress=progress)
        args = worker_args or []
        if "--web-port" in args:  # the worker's /metrics, beside the dashboard
            port = args[args.index("--web-port") + 1]
            follower = MetricsFollower(progress, config.stream, f"http://127.0.0.1:{port}/metrics")
            follower.start()
        submit_experiment(settings, config)
        stats = replay_dataset(
            settings,
            config,
            speed=speed,
            pack=pack,
            progress=progress.replay_counter(),
            data_dir=data_dir,
        )
        results = waiter.wait(timeout, alive=lambda: worker.poll() is None)
    except BaseException as exc:
        tail = (log_dir / "worker.log").read_text(errors="replace")[-3000:]
        if isinstance(exc, (RuntimeError, TimeoutError)) and tail:
            raise RuntimeError(f"{exc}\n--- worker log ({log_dir}/worker.log) ---\n{tail}") from exc
        raise
    finally:
        if follower is not None:
            follower.stop()
        stop_worker(worker)
    return results, stats, start
