"""The Kafka subcommands of ``streameval``: run, worker, replay, submit.

``run`` is the main job: it finds a broker (``KAFKA_BOOTSTRAP_SERVERS``, else
an embedded Tansu broker on loopback), creates the topics, submits the
experiment, starts a worker process, replays the dataset, waits for the
worker's results document on the ``metrics`` topic, prints the same tables as
``evaluate`` and writes the same results JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
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

from streameval.agents.config import ENV_FIELDS, SECRET_FIELDS, KafkaSettings
from streameval.cli.experiment import add_experiment_options
from streameval.cli.settings import EnvSetting

log = logging.getLogger(__name__)

RESULTS_TIMEOUT = 600.0
#: ``run``'s worker checkpoints every this many events (the worker's default is 20,000): it
#: serves one run, which ends if it dies, so only its last checkpoint (written when it is idle
#: for a second, and after the results) could ever be read. Pickling the runner every 20,000
#: events stalls the agent for ~1 s of a 13 s electricity run.
RUN_CHECKPOINT_EVERY = 1_000_000


def _settings(args: argparse.Namespace) -> KafkaSettings:
    settings = KafkaSettings.from_env()
    if getattr(args, "bootstrap", None):
        settings = settings.with_bootstrap(args.bootstrap)
    return settings


def file_sections() -> dict[str, dict[str, Any]]:
    """The config file's environment-only settings: the Kafka connection and the checkpoint key.

    ``[kafka]`` holds one key per :data:`~streameval.agents.config.ENV_FIELDS` entry,
    named as the :class:`~streameval.agents.config.KafkaSettings` field
    (``bootstrap_servers``, ``sasl_password``, ...); ``[worker] checkpoint_key`` is
    ``STREAMEVAL_CHECKPOINT_KEY``. A file value is
    exported to its variable when the variable is unset, so the environment wins
    and ``KafkaSettings.from_env`` reads both. Secrets are masked in
    ``streameval config show`` as in ``KafkaSettings.redacted``.

    >>> kafka = file_sections()["kafka"]
    >>> kafka["sasl_password"].env, kafka["sasl_password"].secret, kafka["partitions"].kind
    ('KAFKA_SASL_PASSWORD', True, <class 'int'>)
    """
    defaults = {f.name: f.default for f in dataclasses.fields(KafkaSettings)}
    kafka = {
        name: EnvSetting(
            env=var,
            kind=int if name == "partitions" else str,
            default=defaults[name],
            secret=name in SECRET_FIELDS,
        )
        for var, name in ENV_FIELDS.items()
    }
    worker = {"checkpoint_key": EnvSetting(env="STREAMEVAL_CHECKPOINT_KEY", secret=True)}
    return {"kafka": kafka, "worker": worker}


def _add_kafka_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("kafka")
    g.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS; SASL/SSL settings "
        "come from the KAFKA_* environment variables, see the README)",
    )


def _add_broker_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a worker (or run) that loses its broker reports unhealthy and retries with "
        "backoff; it exits (code 75) after SECONDS without an answer (default: "
        "$STREAMEVAL_BROKER_TIMEOUT, else 120)",
    )


def submit_experiment(settings: KafkaSettings, config: Any) -> None:
    """Write ``config`` to the compacted experiments topic (key = stream id)."""
    from confluent_kafka import Producer

    from streameval.agents.codec import encode
    from streameval.agents.topics import PARTITIONER, TopicNames
    from streameval.schemas import validate

    message = config.to_dict()
    reason = validate("experiments", message)
    if reason is not None:
        raise ValueError(f"experiment does not fit its schema: {reason}")
    # a stream's definition must land on the same partition number as its events, or
    # another worker would own it
    producer = Producer({**settings.confluent_config(), "enable.idempotence": True, **PARTITIONER})
    names = TopicNames.for_prefix(settings.topic_prefix)
    producer.produce(names.experiments, encode(message), config.stream.encode("utf-8"))
    if producer.flush(30):
        raise RuntimeError(f"the experiment could not be written to {names.experiments}")


def replay_dataset(
    settings: KafkaSettings,
    config: Any,
    *,
    speed: float | None,
    pack: int,
    progress: bool,
    data_dir: str | None = None,
    stop: threading.Event | None = None,
) -> Any:
    """Replay ``config``'s dataset schedule to the feature and label topics.

    Once ``stop`` is set the replay ends early (what was produced is flushed).
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

    def __init__(self, settings: KafkaSettings, *streams: str) -> None:
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
            }
        )
        meta = self.consumer.list_topics(topic, timeout=10)
        parts = []
        for p in meta.topics[topic].partitions:
            _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            parts.append(TopicPartition(topic, p, high))
        self.consumer.assign(parts)
        self.snapshots = 0  # metric snapshots of the awaited streams read meanwhile

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
            return done
        finally:
            self.consumer.close()


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
) -> dict[str, Any]:
    """The whole ``run``: broker, topics, worker, experiment, replay, results.

    Without ``predictions`` the worker makes and publishes none (``--no-predictions``):
    the results document is the same (it is ``evaluate``'s), the predictions topic stays
    empty.

    ``inline`` (the default): the stream is evaluated in this process, read by a
    plain consumer while the replay runs in a thread (:mod:`streameval.agents.inline`; no
    second interpreter, no Faust start-up, no group join). Otherwise a Faust
    worker process (``streameval worker``) does it, started as soon as the topics
    exist so that its start-up overlaps with the submission and the replay (it
    reads its topics from their beginning); ``run --dashboard`` needs it for the
    web views. ``worker_args`` are passed to that worker after ``run``'s own
    options; ``broker_timeout`` is the inline loop's ``--broker-timeout``.
    """
    from streameval.agents.broker import broker_for
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.evaluate import prepare

    _, config = prepare(config, data_dir)  # fails early on a missing dataset (lazy: ~10 ms)
    embedded = settings.embedded
    with broker_for(settings) as bootstrap:
        settings = settings.with_bootstrap(bootstrap)
        ensure_topics(
            settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix
        )
        if inline:
            from concurrent.futures import ThreadPoolExecutor

            from streameval.agents.inline import run_inline

            def produce(stop: threading.Event) -> Any:
                # the definition and the events at once (each producer's start costs ~0.5 s
                # on Tansu): events read before the definition wait for it (parked)
                with ThreadPoolExecutor(1, thread_name_prefix="streameval-submit") as pool:
                    submitted = pool.submit(submit_experiment, settings, config)
                    stats = replay_dataset(
                        settings, config, speed=speed, pack=pack, progress=progress,
                        data_dir=data_dir, stop=stop,
                    )  # fmt: skip
                    submitted.result()
                return stats

            start = time.perf_counter()
            waiter = ResultsWaiter(settings, config.stream)  # before the experiment exists
            stats = run_inline(
                settings,
                config.stream,
                produce,
                timeout=timeout,
                predictions=predictions,
                broker_timeout=broker_timeout,
            )
            # the results are on the metrics topic once run_inline has returned
            results = waiter.wait(timeout, alive=lambda: True)
        else:
            results, stats, start = _run_with_worker(
                config, settings, data_dir=data_dir, progress=progress, pack=pack,
                speed=speed, timeout=timeout, worker_args=worker_args, predictions=predictions,
            )  # fmt: skip
        elapsed = time.perf_counter() - start
    results.pop("ingest", None)
    results["runtime"] = {
        **results.get("runtime", {}),  # the worker's: outputs, duplicates_marked, restores
        "driver": "run",
        "seconds": round(elapsed, 3),
        "events": stats.n_events,
        "events_per_s": round(stats.n_events / elapsed, 1) if elapsed > 0 else None,
        "messages": stats.n_messages,
        "broker": "embedded" if embedded else "configured",
    }
    return results


def _run_with_worker(
    config: Any,
    settings: KafkaSettings,
    *,
    data_dir: str | None,
    progress: bool,
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
    try:  # the waiter reads from the metrics topic's end: created before the experiment
        waiter = ResultsWaiter(settings, config.stream)
        submit_experiment(settings, config)
        stats = replay_dataset(
            settings, config, speed=speed, pack=pack, progress=progress, data_dir=data_dir
        )
        results = waiter.wait(timeout, alive=lambda: worker.poll() is None)
    except BaseException as exc:
        tail = (log_dir / "worker.log").read_text(errors="replace")[-3000:]
        if isinstance(exc, (RuntimeError, TimeoutError)) and tail:
            raise RuntimeError(f"{exc}\n--- worker log ({log_dir}/worker.log) ---\n{tail}") from exc
        raise
    finally:
        stop_worker(worker)
    return results, stats, start


# -- command handlers ------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from streameval.cli.experiment import config_from_args, print_results, write_outputs

    if not args.stream_id:
        args.stream_id = f"{args.dataset}-{uuid.uuid4().hex[:8]}"
    config = config_from_args(args)
    worker_args = []
    if args.broker_timeout is not None:
        worker_args += ["--broker-timeout", str(args.broker_timeout)]
    if args.dashboard is not None:
        worker_args += ["--web", "--web-host", "127.0.0.1", "--web-port", str(args.dashboard)]
        print(f"dashboard: http://127.0.0.1:{args.dashboard}/dashboard", file=sys.stderr)
    results = run_through_kafka(
        config,
        _settings(args),
        data_dir=args.data_dir,
        progress=not args.no_progress,
        pack=args.pack,
        speed=args.speed,
        timeout=args.timeout,
        worker_args=worker_args,
        predictions=args.predictions,
        inline=args.dashboard is None,  # the dashboard is served by the Faust worker
        broker_timeout=args.broker_timeout,
    )
    print_results(results)
    write_outputs(results, args)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from streameval.agents.app import create_app, run_app
    from streameval.agents.checkpoint import checkpoint_key
    from streameval.agents.publish import watched_producer
    from streameval.agents.worker import StreamWorker

    settings = _settings(args)
    if settings.embedded:
        raise ValueError(
            "streameval worker needs a broker: set KAFKA_BOOTSTRAP_SERVERS (or --bootstrap); "
            "`streameval run` starts an embedded one for you"
        )
    logging.basicConfig(level=getattr(logging, args.loglevel.upper()), stream=sys.stderr)
    # broker lost mid-run: unhealthy, retries with backoff, exits after --broker-timeout
    from streameval.agents.health import broker_timeout, watch_broker

    checkpoints: dict[str, int] = {}
    health, monitor = watch_broker(
        settings.confluent_config(),
        broker_timeout(args.broker_timeout),
        describe=lambda: f"last checkpoints {checkpoints}" if checkpoints else "no checkpoint yet",
    )
    try:
        producer = watched_producer(settings, health)
        worker = StreamWorker(
            settings,
            key=checkpoint_key(),
            checkpoint_every=args.checkpoint_every,
            orphan_ttl=args.orphan_ttl,
            idle_timeout=args.idle_timeout,
            park_timeout=args.park_timeout,
            predictions=not args.no_predictions,
            producer=producer,
        )
        checkpoints = worker.checkpoints.ids
        restored = worker.restore()
        print(
            f"streameval worker: {settings.redacted().get('KAFKA_BOOTSTRAP_SERVERS')}, "
            f"checkpoints of {restored} stream(s) found",
            file=sys.stderr,
            flush=True,
        )
        app = create_app(
            settings, worker, web=args.web, web_host=args.web_host, web_port=args.web_port,
            health=health,
        )  # fmt: skip
        run_app(
            app,
            web=args.web,
            web_host=args.web_host,
            web_port=args.web_port,
            loglevel=args.loglevel,
        )
    finally:  # a worker that stops (or fails to start) stops watching its broker
        monitor.stop()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from streameval.pipeline.config import ExperimentConfig

    settings = _settings(args)
    if settings.embedded:
        raise ValueError("streameval replay needs KAFKA_BOOTSTRAP_SERVERS (or --bootstrap)")
    config = ExperimentConfig(
        stream=args.stream_id or args.dataset,
        learners=["nochange"],
        dataset=args.dataset,
        delay=args.delay,
        limit=args.limit,
    )
    stats = replay_dataset(
        settings,
        config,
        speed=None if args.max else args.speed,
        pack=args.pack,
        progress=not args.no_progress,
        data_dir=args.data_dir,
    )
    print(json.dumps(stats.as_dict()))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from streameval.cli.experiment import config_from_args
    from streameval.pipeline.evaluate import prepare

    settings = _settings(args)
    if settings.embedded:
        raise ValueError("streameval submit needs KAFKA_BOOTSTRAP_SERVERS (or --bootstrap)")
    _, config = prepare(config_from_args(args), args.data_dir)
    submit_experiment(settings, config)
    print(f"experiment for stream {config.stream!r} submitted")
    return 0


def register(sub: Any) -> None:
    """Add the Kafka subcommands to the ``streameval`` parser."""
    p = sub.add_parser(
        "run",
        help="the main job: replay a dataset through Kafka and evaluate it in a worker",
        description="Same options as evaluate; runs through Kafka (embedded broker unless "
        "KAFKA_BOOTSTRAP_SERVERS is set) and writes the same results JSON.",
    )
    add_experiment_options(p)
    _add_kafka_options(p)
    p.add_argument(
        "--pack",
        type=int,
        default=200,
        help="events per Kafka message in the replay (1 = one event per message)",
    )
    p.add_argument(
        "--speed",
        type=float,
        default=None,
        help="replay at SPEED times event time (default: as fast as possible)",
    )
    p.add_argument(
        "--dashboard",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the live dashboard of the run's worker on 127.0.0.1:PORT",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=RESULTS_TIMEOUT,
        help="seconds to wait for the worker's results",
    )
    p.add_argument(
        "--predictions",
        action="store_true",
        help="also publish every prediction on the predictions topic (default: off; the "
        "results need none of them and making them costs about a quarter of the worker's time)",
    )
    _add_broker_timeout(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("worker", help="run a worker: consume experiments, features, labels")
    _add_kafka_options(p)
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=20_000,
        help="checkpoint a stream's state every N input events (default 20000)",
    )
    p.add_argument(
        "--orphan-ttl",
        type=float,
        default=3600.0,
        help="event-time seconds a label waits for its features (default 3600)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help=(
            "seconds a stream's queued events wait for its other topic: they pass once they "
            "waited that long and the other topic brought nothing of the stream for as "
            "long (counted only while the worker can read; default 30)"
        ),
    )
    p.add_argument(
        "--park-timeout",
        type=float,
        default=60.0,
        help="wall seconds events of an undefined stream wait before the deadletter",
    )
    p.add_argument(
        "--no-predictions",
        action="store_true",
        help="streams this worker defines make no predictions topic output (metrics, drift "
        "and results only; no test-then-train prediction at each label unless re-evaluation "
        "needs it) (default: off, predictions published)",
    )
    _add_broker_timeout(p)
    p.add_argument("--web", action="store_true", help="serve the health/dashboard web views")
    p.add_argument("--web-host", default="127.0.0.1", help="web bind address (default loopback)")
    p.add_argument("--web-port", type=int, default=6066, help="web port (with --web)")
    p.add_argument(
        "--loglevel",
        default="warning",
        help="log level of the worker and Faust: debug, info, warning, error, critical",
    )
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser("replay", help="write a dataset's feature and label events to Kafka")
    p.add_argument("--dataset", required=True)
    p.add_argument("--delay", default="0")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--stream-id", default=None)
    p.add_argument("--data-dir", default=None)
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--speed", type=float, default=1.0, help="SPEED times event time (default 1: real time)"
    )
    g.add_argument("--max", action="store_true", help="as fast as possible")
    p.add_argument("--pack", type=int, default=1, help="events per message (default 1)")
    p.add_argument("--no-progress", action="store_true")
    _add_kafka_options(p)
    p.set_defaults(handler=cmd_replay)

    p = sub.add_parser("submit", help="define an experiment on the experiments topic")
    add_experiment_options(p)
    _add_kafka_options(p)
    p.set_defaults(handler=cmd_submit)
