"""Scale-out that survives a worker's death, and a worker no stream can take down.

* Two workers, six streams, one SIGKILLed (below).
* A checkpoint signed with another key is refused once and loudly, not in a crash loop.
* A trickle of events of undefined streams does not hold back committed offsets.

Failover:

The streams are spread over the partitions, so each worker owns some of them. One worker
is killed (SIGKILL: no chance to save, flush or commit) before or after its first regular
checkpoint; the group gives its partitions to the other, which restores the dead worker's
streams from their checkpoints -- written after the survivor started, so it must read the
checkpoints topic again -- and finishes them. Every stream's results must equal
``evaluate``'s, every output of an uninterrupted run must be on the output topics exactly
once without the ``duplicate`` flag, and every re-emitted one must carry it.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_fixtures import wait_until
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEY = {"STREAMEVAL_CHECKPOINT_KEY": "failover-test-key-" + "k" * 24}
N_STREAMS = 6
LIMIT = 1500
REPLAY_SPEED = 6e4  # event seconds per wall second: Electricity's 1,500 half-hours in 45 s


def _config(stream: str, i: int) -> ExperimentConfig:
    return ExperimentConfig(
        stream=stream,
        learners=["nochange", "nb", "ta:ht"] if i % 2 else ["majority", "ht"],
        dataset="electricity",
        limit=LIMIT,
        delay=str(24 + 12 * i),
        window=300,
        snapshot_every=250,
    )


def _comparable(results: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(results))
    for key in ("runtime", "ingest", "stream", "curves"):
        out.pop(key, None)
    out["config"].pop("stream")
    return out


def _outputs(settings: KafkaSettings, topics: list[str], idle: float = 2.0) -> list[dict]:
    """Every output message on ``topics`` (a predictions message is an array of them)."""
    consumer = Consumer({**settings.confluent_config(), "group.id": f"o-{uuid.uuid4().hex}"})
    try:
        parts = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10)
            parts += [TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions]
        consumer.assign(parts)
        out: list[dict] = []
        last = time.monotonic()
        wait = max(idle, 10.0)  # the first fetch of a new consumer may be slow (a busy machine)
        while time.monotonic() - last < wait:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() or msg.value() is None:  # None: a tombstone
                continue
            value = json.loads(msg.value())
            out += value if isinstance(value, list) else [value]
            last, wait = time.monotonic(), idle
        return out
    finally:
        consumer.close()


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON documents differ (paths and both values)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key), b.get(key), f"{path}/{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _differences(x, y, f"{path}/{i}")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _defined(log: Path) -> set[str]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return set(re.findall(r"stream (\S+) defined:", text))


def _checkpointed(settings: KafkaSettings, streams: set[str], at_least: int) -> bool:
    """Whether some stream of ``streams`` has a checkpoint numbered ``at_least`` or more."""
    topic = TopicNames.for_prefix(settings.topic_prefix).checkpoints
    return any(
        m.get("stream") in streams and m.get("id", 0) >= at_least
        for m in _outputs(settings, [topic], idle=0.5)
    )


@pytest.mark.faults
@pytest.mark.parametrize("point", ["before_first_checkpoint", "after_first_checkpoint"])
def test_a_killed_workers_streams_are_finished_by_the_other(
    point: str, kafka_settings: KafkaSettings, tmp_path: Path
) -> None:
    settings = replace(kafka_settings, topic_prefix=f"fo{uuid.uuid4().hex[:8]}.")
    names = ensure_topics(settings.confluent_config(), 4, prefix=settings.topic_prefix)
    configs = [prepare(_config(f"fo-{i}-{uuid.uuid4().hex[:4]}", i))[1] for i in range(N_STREAMS)]
    references = {}
    counts = {}
    for config in configs:
        outputs: list[Any] = []
        references[config.stream] = _comparable(evaluate_config(config, on_output=outputs.append))
        counts[config.stream] = len(outputs)
    every = "300" if point == "after_first_checkpoint" else "1000000"
    args = ["--checkpoint-every", every, "--loglevel", "info"]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    workers = [start_worker(settings, KEY, log_path=log, extra_args=args) for log in logs]
    waiter = ResultsWaiter(settings, *(c.stream for c in configs))
    alive = lambda: all(w.poll() is None for w in workers)  # noqa: E731
    try:
        for config in configs:
            submit_experiment(settings, config)
        every_stream = {c.stream for c in configs}
        wait_until(
            lambda: _defined(logs[0]) | _defined(logs[1]) == every_stream, 120, "definitions", alive
        )
        victim = 0 if len(_defined(logs[0])) >= len(_defined(logs[1])) else 1
        theirs = _defined(logs[victim])
        assert theirs  # the group may give one worker every partition: then it has them all
        replays = [
            threading.Thread(
                target=replay,
                args=(list(schedule(c, prepare(c)[0])), settings),
                # ~45 s of replay: the victim is still taking events when it is killed, so it
                # has outputs that no checkpoint covers (a worker idle for a second saves one)
                kwargs={"speed": REPLAY_SPEED, "message_format": PackedMessages(20)},
                daemon=True,
            )
            for c in configs
        ]
        for thread in replays:
            thread.start()
        topic = names.predictions
        wait_until(
            lambda: (
                sum(1 for m in _outputs(settings, [topic], 0.3) if m["stream"] in theirs) >= 200
            ),
            120,
            "the victim's first outputs",
            alive,
        )
        if point == "after_first_checkpoint":
            wait_until(
                lambda: _checkpointed(settings, theirs, 2), 120, "a regular checkpoint", alive
            )
        replaying = any(thread.is_alive() for thread in replays)
        workers[victim].kill()  # SIGKILL
        workers[victim].wait(10)
        survivor = workers[1 - victim]
        for thread in replays:
            thread.join(180)
        results = waiter.wait_all(300, alive=lambda: survivor.poll() is None)
        published = _outputs(settings, [names.predictions, names.metrics, names.drift])
    finally:
        for worker in workers:
            stop_worker(worker)
    # an idle victim checkpoints everything it published: nothing would be re-emitted
    assert replaying, "the replay ended before the victim was killed: slow it (REPLAY_SPEED)"
    survivor_log = logs[1 - victim].read_text(errors="replace")
    flagged_total = 0
    for config in configs:
        stream = config.stream
        got = _comparable(results[stream][1])
        ingest = results[stream][1].get("ingest")
        assert got == references[stream], (stream, ingest, _differences(got, references[stream]))
        mine = [m for m in published if m.get("stream") == stream and m.get("kind") != "results"]
        once = Counter(m["seq"] for m in mine if not m.get("duplicate"))
        assert set(once) == set(range(counts[stream])), f"{stream}: outputs lost or invented"
        assert set(once.values()) == {1}, f"{stream}: a re-emitted output was not flagged"
        flagged = sum(1 for m in mine if m.get("duplicate"))
        assert results[stream][1]["runtime"]["duplicates_marked"] == flagged, stream
        if stream in theirs:
            assert f"restored stream {stream} from checkpoint" in survivor_log
            assert results[stream][1]["runtime"]["restores"] == 1
        flagged_total += flagged
    assert flagged_total > 0  # the victim had published outputs (200 at least) before it died
    print(f"{point}: victim owned {len(theirs)} streams; {flagged_total} duplicates flagged")


@pytest.mark.faults
def test_a_checkpoint_that_fails_verification_is_refused_loudly_not_in_a_loop(
    kafka_settings: KafkaSettings, tmp_path: Path
) -> None:
    """A worker with another key takes over a stream: the stream's checkpoint is refused,
    once, everywhere at once (deadletter, the stream's ``failed`` notice, ``/health`` 503
    with the reason), its events go to the deadletter, and the worker keeps serving."""
    import urllib.error
    import urllib.request

    from streameval.agents.codec import StreamFailed

    settings = replace(kafka_settings, topic_prefix=f"ck{uuid.uuid4().hex[:8]}.")
    names = ensure_topics(settings.confluent_config(), 4, prefix=settings.topic_prefix)
    config = prepare(_config(f"ck-{uuid.uuid4().hex[:4]}", 1))[1]
    args = ["--checkpoint-every", "300"]
    first = start_worker(settings, KEY, log_path=tmp_path / "a.log", extra_args=args)
    waiter = ResultsWaiter(settings, config.stream)
    second = None
    try:
        submit_experiment(settings, config)
        replayer = threading.Thread(
            target=replay,
            args=(list(schedule(config, prepare(config)[0])), settings),
            kwargs={"speed": 1e5, "message_format": PackedMessages(20)},
            daemon=True,
        )
        replayer.start()
        alive = lambda: first.poll() is None  # noqa: E731
        wait_until(lambda: _checkpointed(settings, {config.stream}, 2), 120, "a checkpoint", alive)
        first.kill()
        first.wait(10)
        port = _free_port()
        other_key = {"STREAMEVAL_CHECKPOINT_KEY": "another-key-" + "x" * 30}
        second = start_worker(
            settings,
            other_key,
            log_path=tmp_path / "b.log",
            extra_args=[*args, "--web", "--web-port", str(port)],
        )
        with pytest.raises(StreamFailed, match=r"checkpoint of stream .* refused: .*HMAC"):
            waiter.wait(180, alive=lambda: second.poll() is None)
        replayer.join(120)
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
            raise AssertionError("/health answered 200 with a refused checkpoint")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
            body = json.loads(exc.read())
        assert "refused" in json.dumps(body), body
        # an event of the stream that comes now goes to the deadletter too: nothing is lost
        from confluent_kafka import Producer

        late = {"stream": config.stream, "id": "late", "ts": 9e9, "x": {"day": "1"}, "seq": 0}
        producer = Producer(settings.confluent_config())
        producer.produce(names.features, json.dumps(late).encode(), config.stream.encode())
        producer.flush(10)

        def refused() -> list[dict]:
            letters = _outputs(settings, [names.deadletter], idle=0.5)
            return [d for d in letters if d["kind"] == "checkpoint_refused"]

        wait_until(
            lambda: any(d["topic"] == names.features for d in refused()),
            60,
            "the late event dead-lettered",
            lambda: second.poll() is None,
        )
        assert all(d["key"] == config.stream for d in refused())
        time.sleep(3)  # a crash loop would have restarted the agent by now
        assert second.poll() is None, "the worker died"
        log = (tmp_path / "b.log").read_text(errors="replace")
        assert log.count(f"checkpoint of stream '{config.stream}' refused") == 1, log[-3000:]
    finally:
        stop_worker(first)
        if second is not None:
            stop_worker(second)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_trickle_of_undefined_streams_does_not_hold_back_committed_offsets(
    kafka_settings: KafkaSettings, tmp_path: Path
) -> None:
    """Events of streams nobody defines arrive on every partition all the time: they wait
    in the parking (unacknowledged) and go to the deadletter after ``--park-timeout``, but
    the messages of a defined stream beside them are committed meanwhile."""
    from confluent_kafka import Producer

    settings = replace(kafka_settings, topic_prefix=f"tr{uuid.uuid4().hex[:8]}.")
    names = ensure_topics(settings.confluent_config(), 4, prefix=settings.topic_prefix)
    config = prepare(_config(f"tr-{uuid.uuid4().hex[:4]}", 0))[1]
    stop = threading.Event()

    def trickle() -> None:
        producer = Producer(settings.confluent_config())
        i = 0
        while not stop.is_set():
            for p in range(4):
                event = {"stream": f"ghost-{i}", "id": "1", "ts": 0.0, "x": {"a": 1.0}, "seq": 0}
                producer.produce(names.features, json.dumps(event).encode(), b"g", partition=p)
            producer.flush(5)
            i += 1
            stop.wait(0.3)

    worker = start_worker(
        settings, KEY, log_path=tmp_path / "w.log", extra_args=["--park-timeout", "2"]
    )
    ghosts = threading.Thread(target=trickle, daemon=True)
    waiter = ResultsWaiter(settings, config.stream)
    try:
        ghosts.start()
        submit_experiment(settings, config)
        replay(list(schedule(config, prepare(config)[0])), settings)
        results = waiter.wait(180, alive=lambda: worker.poll() is None)
        last = _last_offset_of(settings, names.features, config.stream)
        group = Consumer({**settings.confluent_config(), "group.id": "streameval-worker"})
        try:
            wait_until(
                lambda: (
                    group.committed([TopicPartition(names.features, last[0])], timeout=10)[0].offset
                    > last[1]
                ),
                60,
                "the stream's messages committed while the trickle goes on",
                lambda: worker.poll() is None and ghosts.is_alive(),
            )
        finally:
            group.close()
        letters = _outputs(settings, [names.deadletter], idle=1.0)
    finally:
        stop.set()
        stop_worker(worker)
    assert _comparable(results) == _comparable(evaluate_config(config))
    assert sum(d["kind"] == "unknown_stream" for d in letters) > 0


def _last_offset_of(settings: KafkaSettings, topic: str, stream: str) -> tuple[int, int]:
    """``(partition, offset)`` of ``stream``'s end-of-stream marker on ``topic``."""
    consumer = Consumer({**settings.confluent_config(), "group.id": f"l-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=10)
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() or msg.key() != stream.encode():
                continue
            value = json.loads(msg.value())
            if any(e.get("end") for e in (value if isinstance(value, list) else [value])):
                return msg.partition(), msg.offset()
        raise AssertionError(f"no end marker of {stream} on {topic}")
    finally:
        consumer.close()
