"""The Kafka pipeline end to end on a real broker (embedded Tansu, testcontainers or configured).

Every test compares against the in-process driver: `run` must give the results JSON of
`evaluate`, number for number, also after a SIGKILL, with bad input around, and with two
streams sharing one worker.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka_fixtures import topic_to_end
from streameval.agents.codec import encode
from streameval.agents.replay import PackedMessages, replay
from streameval.agents.run import (
    ResultsWaiter,
    replay_dataset,
    run_through_kafka,
    start_worker,
    stop_worker,
    submit_experiment,
)
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.events import DriftEvent, EndOfStream, PredictionEvent, clean
from streameval.pipeline.merge import FEATURES, LABELS, topic_of
from streameval.pipeline.report.curves import curves_from_snapshots
from streameval.pipeline.runner import StreamRunner

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

LEARNERS = ["nochange", "nb", "ta:ht"]


def electricity(stream: str, **kw) -> ExperimentConfig:
    return ExperimentConfig(
        stream=stream,
        learners=LEARNERS,
        dataset="electricity",
        limit=3000,
        delay="48",
        reeval_k=10,
        bins=20,
        window=500,
        **kw,
    )


def comparable(results: dict) -> dict:
    """Everything but the stream id (unique per run) and the timings."""
    r = copy.deepcopy(results)
    r.pop("runtime", None)
    r.pop("ingest", None)
    r.pop("stream")
    r["config"].pop("stream")
    r["config"].pop("snapshot_every", None)
    r.pop("curves", None)  # only runs with --snapshot-every have curves
    return r


@pytest.fixture
def settings(kafka_settings, kafka_prefix):
    s = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(s.confluent_config(), s.partitions, prefix=s.topic_prefix)
    return s


@pytest.fixture(scope="module")
def reference(data_dir):
    return evaluate_config(electricity("reference"), data_dir=data_dir)


def read_topic(settings, topic: str, idle: float = 1.5) -> list[tuple[bytes, bytes]]:
    """Every message of ``topic`` (plain confluent-kafka), until ``idle`` seconds bring nothing.

    (Tansu's high watermarks count record batches, not records: no use as an end.)
    """
    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"t-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions])
        out = []
        last = time.monotonic()
        while time.monotonic() - last < idle:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            out.append((msg.key(), msg.value()))
            last = time.monotonic()
        return out
    finally:
        consumer.close()


def count_messages(settings, topic: str) -> int:
    return len(read_topic(settings, topic, idle=0.5))


def read_topics(settings, topics: list[str]) -> list[tuple[str, dict]]:
    """Every message of several topics, up to the ends they have when asked, as (topic, JSON
    value); a predictions message (an array) gives each of its predictions."""
    out = []
    for topic in topics:
        for msg in topic_to_end(settings, topic):
            if msg.value() is None:  # a tombstone
                continue
            value = json.loads(msg.value())
            out += [(topic, v) for v in (value if isinstance(value, list) else [value])]
    return out


def test_runs_sharing_topics_each_give_evaluate_and_only_their_own_outputs(
    settings, reference, data_dir
) -> None:
    """``run`` evaluates its stream in its own process (streameval.agents.inline): a second run
    on the
    same topics reads from where they ended, takes only its stream's messages, and with
    ``predictions`` publishes every prediction of its stream, each once."""
    first = electricity(f"elec-a-{uuid.uuid4().hex[:6]}")
    second = electricity(f"elec-b-{uuid.uuid4().hex[:6]}")
    ran_first = run_through_kafka(first, settings, data_dir=data_dir)
    ran_second = run_through_kafka(second, settings, data_dir=data_dir, predictions=True)
    assert comparable(ran_first) == comparable(reference)
    assert comparable(ran_second) == comparable(reference)
    names = TopicNames.for_prefix(settings.topic_prefix)
    predictions = [v for _, v in read_topics(settings, [names.predictions])]
    assert {p["stream"] for p in predictions} == {second.stream}  # the first run made none
    seqs = [p["seq"] for p in predictions]
    assert len(set(seqs)) == len(seqs)  # each once
    # predictions and metric messages (snapshots, results) share the stream's output numbers
    metrics = [v for _, v in read_topics(settings, [names.metrics])]
    numbered = seqs + [m["seq"] for m in metrics if m["stream"] == second.stream and "seq" in m]
    assert sorted(numbered) == list(range(len(numbered)))  # none lost
    assert not any(p.get("duplicate") for p in predictions)
    firsts = [p for p in predictions if p["kind"] == "first"]
    assert len(firsts) == 3000 * len(LEARNERS)  # one first-time prediction per instance


def test_run_whose_learner_fails_stops_at_once_naming_the_error(
    settings, data_dir, monkeypatch, tmp_path, capsys
) -> None:
    """A learner that raises stops its stream (no results document): ``run`` says so at
    once instead of waiting for ``--timeout``, and the failing event is dead-lettered."""
    from streameval.pipeline.learners.baselines import NoChange

    learn_one, seen = NoChange.learn_one, []

    def exploding(self, x, y, **kw):
        seen.append(y)
        if len(seen) == 700:
            raise ArithmeticError("boom at the 700th label")
        return learn_one(self, x, y, **kw)

    monkeypatch.setattr(NoChange, "learn_one", exploding)
    config = electricity(f"elec-x-{uuid.uuid4().hex[:6]}")
    waiter = ResultsWaiter(settings, config.stream)  # what `run --dashboard` waits with
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="stopped: ArithmeticError: boom at the 700th label"):
        # paced: the replay alone would take 3000 x 1800 s / 100000 = 54 s
        run_through_kafka(config, settings, data_dir=data_dir, timeout=120, speed=100_000)
    assert time.monotonic() - start < 35  # ~700 labels in, and the replay stopped with it
    names = TopicNames.for_prefix(settings.topic_prefix)
    letters = [json.loads(v) for _, v in read_topic(settings, names.deadletter)]
    [letter] = [d for d in letters if d["kind"] == "experiment_error"]
    assert "boom at the 700th label" in letter["reason"] and letter["topic"] == names.labels
    # the metrics topic says so too: a waiting reader stops at once with the same words
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="stopped: ArithmeticError: boom at the 700th label"):
        waiter.wait(60, alive=lambda: True)
    assert time.monotonic() - start < 15
    notices = [json.loads(v) for _, v in read_topic(settings, names.metrics)]
    [notice] = [n for n in notices if n["stream"] == config.stream and n["kind"] == "failed"]
    # NoChange learns twice per label (the learner and kappa_per's reference): the 700th
    # call is the 350th label's, counted before it is learned
    assert notice["n_labelled"] == 350 and notice["deadletter"] == names.deadletter
    assert not [n for n in notices if n["stream"] == config.stream and n["kind"] == "results"]
    # the compose file's results collector (a plain consumer from the topic's start) too
    spec = importlib.util.spec_from_file_location("collect", REPO / "docker/collect_results.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", settings.bootstrap_servers)
    monkeypatch.setenv("STREAMEVAL_TOPIC_PREFIX", settings.topic_prefix)
    capsys.readouterr()
    out = ["--stream", config.stream, "--out", str(tmp_path), "--timeout", "60"]
    assert collect.main(out) == 1
    assert "stopped: ArithmeticError: boom at the 700th label" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_run_gives_the_results_of_evaluate(settings, reference, data_dir) -> None:
    config = electricity(f"elec-{uuid.uuid4().hex[:6]}", snapshot_every=500)
    ran = run_through_kafka(config, settings, data_dir=data_dir)
    assert ran["runtime"]["driver"] == "run"
    assert comparable(ran) == comparable(reference)

    # a user's own consumer (plain confluent-kafka, no project code) finds the documented
    # fields of the metrics topic: stream, learner, n_labelled, ts, kind, metrics{...}
    topic = TopicNames.for_prefix(settings.topic_prefix).metrics
    snapshots = [json.loads(v) for _, v in read_topic(settings, topic)]
    mine = [s for s in snapshots if s["stream"] == config.stream and s["kind"] != "results"]
    assert {s["kind"] for s in mine} == {"periodic", "final"}
    final = {s["learner"]: s for s in mine if s["kind"] == "final"}
    assert set(final) == set(LEARNERS)
    for learner, snap in final.items():
        assert snap["n_labelled"] == 3000
        assert snap["metrics"]["accuracy"] == reference["learners"][learner]["accuracy"]
        assert snap["metrics"]["kappa_per"] == reference["learners"][learner]["kappa_per"]
        assert len(snap["binned"]["accuracy"]) == 22
    periodic = [s for s in mine if s["kind"] == "periodic" and s["learner"] == "nb"]
    assert [s["n_labelled"] for s in periodic] == [500, 1000, 1500, 2000, 2500, 3000]
    # the results' curves are the snapshots the metrics topic carried
    assert ran["curves"] == curves_from_snapshots(mine)
    assert ran["curves"]["n_labelled"] == [500, 1000, 1500, 2000, 2500, 3000]


KILL_POINTS = ["during_replay", "during_reeval_burst", "right_after_checkpoint"]


@pytest.fixture(scope="module")
def reference_outputs(data_dir) -> dict[str, dict[int, dict]]:
    """The uninterrupted run's outputs by topic kind and output ``seq``, as the wire has them.

    The same runner the worker uses, fed the schedule in order: what an uninterrupted worker
    publishes (the Kafka merge restores this order). ``stream`` is left out.
    """
    dataset, config = prepare(electricity("reference"), data_dir)
    runner = StreamRunner(config)
    out: dict[str, dict[int, dict]] = {"predictions": {}, "metrics": {}, "drift": {}}
    for event in schedule(config, dataset):
        topics = [FEATURES, LABELS] if isinstance(event, EndOfStream) else [topic_of(event)]
        for topic in topics:
            outputs, _ = runner.push(topic, event)
            seq = runner.n_outputs - len(outputs)
            for o in outputs:
                kind = (
                    "predictions"
                    if isinstance(o, PredictionEvent)
                    else "drift"
                    if isinstance(o, DriftEvent)
                    else "metrics"
                )
                out[kind][seq] = {**json.loads(encode(clean(o.to_dict()))), "seq": seq}
                out[kind][seq].pop("stream")
                seq += 1
    assert runner.finished
    out["results_seq"] = {runner.n_outputs: {}}  # the results message comes last
    return out


class TopicWatcher:
    """Follows topics from their beginning with a plain consumer, to time a kill from outside."""

    def __init__(self, settings, topics: list[str]) -> None:
        self.consumer = Consumer(
            {
                **settings.confluent_config(),
                "group.id": f"w-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
            }
        )
        parts = []
        for topic in topics:
            meta = self.consumer.list_topics(topic, timeout=10)
            parts += [TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions]
        self.consumer.assign(parts)

    def until(self, found, timeout: float, alive) -> None:
        """Poll until ``found(topic, value)`` is true for a message."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert alive(), "the worker died"
            msg = self.consumer.poll(0.05)
            if msg is None or msg.error() or msg.value() is None:  # None: a tombstone
                continue
            value = json.loads(msg.value())
            if any(found(msg.topic(), v) for v in (value if isinstance(value, list) else [value])):
                return
        raise TimeoutError("the kill point never came")

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.parametrize("point", KILL_POINTS)
def test_worker_killed_mid_run_ends_with_identical_results(
    point, settings, reference, reference_outputs, data_dir, tmp_path
) -> None:
    """SIGKILL at a point watched from outside, restart: the results of an uninterrupted run,
    and every output of the uninterrupted run on the topics exactly once without the
    ``duplicate`` flag; the flagged ones are true copies, as many as the results report.

    during_replay: the replay (paced, ~18 s) is still writing when the worker dies, after
    its first outputs; during_reeval_burst: the moment re-predictions of the second half of
    the stream appear; right_after_checkpoint: the moment the 4th checkpoint (the first is
    written when the stream is defined) is complete on its topic.
    """
    dataset, config = prepare(electricity(f"elec-kill-{uuid.uuid4().hex[:6]}"), data_dir)
    names = TopicNames.for_prefix(settings.topic_prefix)
    events = list(schedule(config, dataset))
    env = {"STREAMEVAL_CHECKPOINT_KEY": "a-test-key-" + "k" * 22}
    args = ["--checkpoint-every", "300"]
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    # each point watches only the topic that tells it (a watcher reading every prediction
    # would see a checkpoint late)
    watched = names.checkpoints if point == "right_after_checkpoint" else names.predictions
    watcher = TopicWatcher(settings, [watched])
    first = start_worker(settings, env, log_path=tmp_path / "w1.log", extra_args=args)
    second = None
    speed = 3e5 if point == "during_replay" else None  # 3000 half-hours in ~18 s
    replayer = threading.Thread(
        target=replay,
        args=(events, settings),
        kwargs={"speed": speed, "message_format": PackedMessages(20)},
        daemon=True,
    )
    replayer.start()
    half_ts = events[len(events) // 2].ts

    def kill_point(topic: str, value: dict) -> bool:
        if point == "right_after_checkpoint":  # the last part of checkpoint 4 is written
            return value.get("id", 0) >= 4 and value["part"] == value["parts"] - 1
        if point == "during_reeval_burst":
            return value["kind"] == "repredict" and value["ts"] >= half_ts
        return value["seq"] >= 600  # during_replay: into the stream, early enough under load

    try:
        watcher.until(kill_point, 120, alive=lambda: first.poll() is None)
        first.kill()  # SIGKILL: no chance to save, flush or commit anything more
        first.wait(10)
        if point == "during_replay":
            assert replayer.is_alive(), "the replay had ended before the kill"
        second = start_worker(settings, env, log_path=tmp_path / "w2.log", extra_args=args)
        replayer.join(120)
        results = waiter.wait(300, alive=lambda: second.poll() is None)
        published = read_topics(settings, [names.predictions, names.metrics, names.drift])
    finally:
        watcher.close()
        stop_worker(first)
        if second is not None:
            stop_worker(second)
    log = (tmp_path / "w2.log").read_text()
    assert f"restored stream {config.stream} from checkpoint" in log, log[-2000:]
    assert comparable(results) == comparable(reference)

    flagged = 0
    for topic, kind in (
        (names.predictions, "predictions"),
        (names.metrics, "metrics"),
        (names.drift, "drift"),
    ):
        expected = reference_outputs[kind]
        mine = [m for t, m in published if t == topic and m.get("stream") == config.stream]
        if kind == "metrics":
            [final] = [m["seq"] for m in mine if m["kind"] == "results"]
            assert final == next(iter(reference_outputs["results_seq"]))
            mine = [m for m in mine if m["kind"] != "results"]
        once = Counter(m["seq"] for m in mine if not m.get("duplicate"))
        assert set(once) == set(expected), f"{kind}: outputs lost or invented"
        assert set(once.values()) <= {1}, f"{kind}: a re-emitted output was not flagged"
        for m in mine:
            payload = {k: v for k, v in m.items() if k not in ("stream", "duplicate")}
            assert payload == expected[m["seq"]], kind
        flagged += sum(1 for m in mine if m.get("duplicate"))
    assert results["runtime"]["duplicates_marked"] == flagged
    assert results["runtime"]["restores"] == 1
    print(f"{point}: {flagged} duplicates marked")


def test_bad_input_goes_to_deadletter_and_results_stay_identical(
    settings, reference, data_dir, tmp_path
) -> None:
    _, config = prepare(electricity(f"elec-bad-{uuid.uuid4().hex[:6]}"), data_dir)
    names = TopicNames.for_prefix(settings.topic_prefix)
    key = config.stream.encode()
    producer = Producer(settings.confluent_config())
    bad = [
        (names.features, key, b"this is not json"),
        (names.features, key, b'{"stream": "' + key + b'", "id": "1"}'),  # out of schema
        (names.labels, key, b"[1, 2, 3]"),  # a packed message of non-objects
        (
            names.features,
            key,
            json.dumps(  # a feature the stream does not have
                {"stream": config.stream, "id": "w", "ts": 0.0, "x": {"bogus": 1.0}, "seq": 0}
            ).encode(),
        ),
        (
            names.labels,
            key,
            json.dumps(  # a label whose features never come
                {"stream": config.stream, "id": "ghost", "ts": 0.0, "y": "UP", "seq": 0}
            ).encode(),
        ),
        (
            names.features,
            b"nobody",
            json.dumps(  # a stream no experiment defines
                {"stream": "nobody", "id": "1", "ts": 0.0, "x": {"a": 1.0}, "seq": 0}
            ).encode(),
        ),
    ]
    for topic, k, value in bad:
        producer.produce(topic, value, k)
    producer.flush(10)
    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    worker = start_worker(
        settings, {}, log_path=tmp_path / "w.log", extra_args=["--park-timeout", "2", "--ephemeral"]
    )
    try:
        replay_dataset(settings, config, speed=None, pack=50, progress=False, data_dir=data_dir)
        results = waiter.wait(300, alive=lambda: worker.poll() is None)
        time.sleep(3)  # the parked "nobody" events time out after 2 s
        letters = [json.loads(v) for _, v in read_topic(settings, names.deadletter)]
    finally:
        stop_worker(worker)
    assert comparable(results) == comparable(reference)
    kinds = sorted(d["kind"] for d in letters)
    # not JSON, out of schema, and the three elements of the packed [1, 2, 3]
    assert kinds == ["orphan_label", *["schema"] * 5, "unknown_stream", "wrong_width"]
    for d in letters:
        assert d["reason"] and d["offset"] >= 0 and d["topic"] in (names.features, names.labels)
    assert results["ingest"]["rejected_wrong_width"] == 1
    assert results["ingest"]["rejected_orphan_label"] == 1


def test_two_streams_share_one_worker_without_mixing_state(settings, data_dir, tmp_path) -> None:
    configs = [
        ExperimentConfig(
            f"elec-{uuid.uuid4().hex[:6]}",
            ["nochange", "nb"],
            dataset="electricity",
            limit=1500,
            delay="0",
            window=200,
        ),
        ExperimentConfig(
            f"air-{uuid.uuid4().hex[:6]}",
            ["majority", "ht"],
            dataset="airlines",
            limit=1500,
            delay="natural",
            reeval_k=5,
            bins=4,
        ),
    ]
    prepared = [prepare(c, data_dir)[1] for c in configs]
    waiters = [ResultsWaiter(settings, c.stream) for c in prepared]
    for c in prepared:
        submit_experiment(settings, c)
    worker = start_worker(settings, {}, log_path=tmp_path / "w.log", extra_args=["--ephemeral"])
    try:
        for c in prepared:
            replay_dataset(settings, c, speed=None, pack=100, progress=False, data_dir=data_dir)
        results = [w.wait(300, alive=lambda: worker.poll() is None) for w in waiters]
    finally:
        stop_worker(worker)
    for c, got in zip(configs, results, strict=True):
        assert comparable(got) == comparable(evaluate_config(c, data_dir=data_dir))
