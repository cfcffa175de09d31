"""Fuzzing the worker's input path without a broker: ``StreamWorker.handle`` and a fake producer.

Malformed messages of every kind -- random bytes, JSON of the wrong shape, payloads over
1 MiB, ``NaN``/``Infinity`` tokens, integers no double can hold, lone surrogates, unicode and
empty ids, event time going backwards, labels for ids never seen, unknown classes, packed
arrays mixing good and bad events, experiments that must be refused -- must never raise out
of ``handle``. Each lands on the deadletter topic with its reason, or is handled as
documented (parked until its stream is defined, dropped as a redelivery, counted after the
end-of-stream marker). Meanwhile a valid stream (Electricity, packed as the replay packs it)
gives exactly the results document of ``evaluate``.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import pickle
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from streameval.agents.codec import decode, decode_events, encode
from streameval.agents.config import KafkaSettings
from streameval.agents.replay import PackedMessages
from streameval.agents.topics import TopicNames
from streameval.agents.worker import StreamWorker
from streameval.pipeline.columnar import ColumnarExperiment
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent, clean
from streameval.pipeline.runner import StreamRunner

from streameval import schemas

#: More examples for ``make faults``: STREAMEVAL_FUZZ_SCALE=20 runs 20 times as many.
SCALE = max(1, int(os.environ.get("STREAMEVAL_FUZZ_SCALE", "1")))
PREFIX = "fuzz."
NAMES = TopicNames.for_prefix(PREFIX)
KIND_OF_TOPIC = {getattr(NAMES, kind): kind for kind in schemas.KINDS}
GUARD_KINDS = (
    "wrong_target",
    "wrong_width",
    "already_labelled",
    "duplicate_label",
    "orphan_label",
    "out_of_range",
    "over_budget",
    "too_long",
)


class FakeProducer:
    """The part of ``confluent_kafka.Producer`` the worker uses; keeps every message."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes, bytes | None]] = []

    def produce(self, topic: str, value: bytes | None, key: bytes, on_delivery: Any = None) -> None:
        # None: a tombstone, only of a checkpoint record a newer checkpoint made obsolete
        assert isinstance(value, bytes) or topic == NAMES.checkpoints, (topic, value)
        assert isinstance(key, bytes)
        self.messages.append((topic, key, value))

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        return 0

    def on(self, kind: str) -> list[dict[str, Any]]:
        topic = getattr(NAMES, kind)
        return [json.loads(v) for t, _, v in self.messages if t == topic and v is not None]


class Harness:
    """One worker with a fake producer; offsets per input topic as a broker would give."""

    def __init__(self, **worker_kw: Any) -> None:
        self.producer = FakeProducer()
        settings_ = KafkaSettings(bootstrap_servers="127.0.0.1:1", topic_prefix=PREFIX)
        self.worker = StreamWorker(
            settings_, key=b"fuzz-checkpoint-key", producer=self.producer, **worker_kw
        )
        self.offsets: Counter[str] = Counter()
        self.valid_events: Counter[str] = Counter()  # schema-valid events per stream
        self.schema_expected: Counter[tuple[str, str, int]] = Counter()

    def send(self, kind: str, raw: Any, key: bytes = b"", offset: int | None = None) -> int:
        """Hand one message to the worker; count what the decoder makes of it."""
        if offset is None:
            offset = self.offsets[kind]
            self.offsets[kind] += 1
        if kind == "experiments":
            _, reason = decode(kind, raw)
            if reason is not None:
                self.schema_expected["schema", kind, offset] += 1
        else:
            events, reasons = decode_events(kind, raw)
            for event in events:
                self.valid_events[event["stream"]] += 1
            if reasons:
                self.schema_expected["schema", kind, offset] += len(reasons)
        self.worker.handle(kind, raw, key, 0, offset)
        if self.worker.checkpoint_due():
            self.worker.checkpoint()
        return offset

    def finish(self) -> None:
        """What the housekeeping timer does, with every parked event timed out."""
        self.worker.parking.timeout = -1.0
        self.worker.tick()

    def deadletters(self) -> list[dict[str, Any]]:
        return self.producer.on("deadletter")

    def check_outputs(self) -> None:
        """Every output is strict UTF-8 JSON that fits its topic's schema."""
        for topic, key, value in self.producer.messages:
            key.decode("utf-8")
            if value is None:  # a checkpoint record's tombstone (see FakeProducer)
                continue
            message = json.loads(value.decode("utf-8"))
            kind = KIND_OF_TOPIC[topic]
            if kind == "predictions":  # an array of predictions, each valid on its own
                assert isinstance(message, list) and message, message
                items, reasons = decode_events(kind, value)
                assert not reasons and len(items) == len(message), reasons
                continue
            assert schemas.validate(kind, message) is None, (kind, message)
            if kind == "deadletter":
                assert message["reason"] and message["kind"]

    def check_schema_deadletters(self) -> None:
        got = Counter(
            (d["kind"], KIND_OF_TOPIC[d["topic"]], d["offset"])
            for d in self.deadletters()
            if d["kind"] == "schema"
        )
        assert got == self.schema_expected

    def check_conservation(self) -> None:
        """Every schema-valid event is accounted for, exactly once."""
        w = self.worker
        unknown = Counter(
            json.loads(d["payload"])["stream"]
            for d in self.deadletters()
            if d["kind"] == "unknown_stream"
        )
        assert not w.parking
        for stream, n in self.valid_events.items():
            if stream not in w.runners:
                assert unknown[stream] == n, stream
        routed = sum(n for s, n in self.valid_events.items() if s in w.runners)
        assert w.counts["events"] == routed + sum(unknown[s] for s in w.runners)
        guard_letters = Counter(d["kind"] for d in self.deadletters() if d["kind"] in GUARD_KINDS)
        guard_counts: Counter[str] = Counter()
        for runner in w.runners.values():
            account(runner)
            guard_counts.update(runner.guard.counts)
        assert guard_letters == guard_counts
        assert w.counts["events"] == sum(
            r.n_redelivered + r.merger.n_after_end + r.n_pushed + r.n_refused
            for r in w.runners.values()
        )


def never_positive(runner: StreamRunner) -> bool:
    """The stream's labels never were its positive class (refused at its end)."""
    exp = runner.experiment
    positive = exp.config.positive
    return positive is not None and bool(exp.classes) and str(positive) not in exp.classes


def account(runner: StreamRunner) -> None:
    """What entered a runner's merger went exactly one way."""
    exp = runner.experiment
    c = exp.counters
    ends = sum(side.ended for side in runner.merger.sides.values())
    admitted = (
        exp.n_instances
        + c["feature_updates"]
        + c["features_after_eviction"]
        + exp.n_labelled
        + c["unknown_labels"]
    )
    assert runner.n_pushed + runner.n_refused == (
        ends
        + admitted
        + runner.merger.n_waiting
        + runner.guard.n_orphans
        + sum(runner.guard.counts.values())
    ), (runner.config.stream, runner.ingest_counts(), c)
    if runner.finished:
        assert runner.merger.n_waiting == 0 and runner.guard.n_orphans == 0


# -- strategies ---------------------------------------------------------------------------------

WILD_CHARS = st.one_of(
    st.characters(exclude_categories=()),  # any code point, controls and NUL included
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
    st.sampled_from("é😀\u200b\u202e\x00"),
)
WILD_TEXT = st.text(WILD_CHARS, max_size=6)
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10, 10**6),
    st.sampled_from([10**400, -(10**400), 2**63, 1e308, -1e308, -0.0, 5e-324]),
)
TIMES = st.one_of(st.integers(0, 40).map(float), st.integers(0, 40), NUMBERS)
SEQS = st.one_of(st.integers(0, 60), st.integers(-2, 10**20), st.floats(), st.booleans())
IDS = st.one_of(st.sampled_from(["0", "1", "2", "3", "4", "5"]), WILD_TEXT, st.just("i" * 300))
FEATURE_NAMES = st.one_of(st.sampled_from(["a", "b", "c"]), WILD_TEXT)
VALUES = st.one_of(
    NUMBERS, WILD_TEXT, st.none(), st.booleans(), st.lists(st.integers(), max_size=2)
)
CLASSES = st.one_of(
    st.sampled_from(["a", "b", "c", "never-seen-class"]), NUMBERS, WILD_TEXT, st.none()
)
STREAMS = st.one_of(
    st.sampled_from(["victim", "victim", "victim", "ghost", "late", "ünï-stream"]), WILD_TEXT
)


@st.composite
def event_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """A feature, label or end event: mostly orderly (so that they meet), else wild."""
    kind = draw(st.sampled_from(["features"] * 3 + ["labels"] * 3 + ["end"]))
    tame = draw(st.integers(0, 9)) < 7

    def pick(orderly: st.SearchStrategy[Any], wild: st.SearchStrategy[Any]) -> Any:
        return draw(orderly if tame and draw(st.integers(0, 9)) else wild)

    d: dict[str, Any] = {
        "stream": pick(st.just("victim"), STREAMS),
        "ts": pick(st.integers(0, 40).map(float), TIMES),
        "seq": pick(st.integers(0, 60), SEQS),
    }
    if kind == "end":
        d["end"] = pick(st.just(True), st.sampled_from([True, False, 1]))
        d["n_events"] = draw(st.integers(-1, 100))
    else:
        d["id"] = pick(st.sampled_from("012345"), IDS)
        if kind == "features":
            values = st.one_of(st.floats(-10, 10), st.sampled_from(["u", "v"]))
            tame_x = st.dictionaries(st.sampled_from("abc"), values, min_size=1, max_size=3)
            d["x"] = pick(tame_x, st.dictionaries(FEATURE_NAMES, VALUES, max_size=4))
        else:
            d["y"] = pick(st.sampled_from(["a", "b", "c", "unseen", 1.5, 0]), CLASSES)
    if tame:
        return d
    mutation = draw(st.sampled_from(["none", "drop", "extra", "retype"]))
    key = draw(st.sampled_from(sorted(d)))
    if mutation == "drop":
        del d[key]
    elif mutation == "extra":
        d[draw(WILD_TEXT)] = draw(VALUES)
    elif mutation == "retype":
        d[key] = draw(VALUES)
    return d


def wire(value: Any, ensure_ascii: bool) -> bytes:
    """JSON the way a careless producer writes it: NaN tokens, surrogates and all."""
    text = json.dumps(value, allow_nan=True, ensure_ascii=ensure_ascii)
    return text.encode("utf-8", "surrogatepass")


def _victim_feature(i: int) -> dict[str, Any]:
    return {"stream": "victim", "id": str(i), "ts": float(i), "x": {"a": 1.0}, "seq": i}


#: Fixed abuse: too large, too deep, too many events, boundary sizes.
_BIG_ARRAY = encode([_victim_feature(i) for i in range(20_000)])
_PAD = b'{"stream":"victim","id":"big","ts":0,"x":{"a":"' + b"z" * schemas.MAX_MESSAGE_BYTES
FIXED_ABUSE = [
    _BIG_ARRAY,  # > 1 MiB of valid events
    _PAD + b'"},"seq":0}',  # one event > 1 MiB
    b"[" * 200_000 + b"]" * 200_000,  # deeper than the recursion limit
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b"[" * 3000,  # deep and unterminated
    encode([{"stream": "victim", "end": True, "ts": 0, "seq": 0, "n_events": 0}] * 10_001),
    b"\xff\xfe\x00garbage",
    b"",
    b"null",
    b"[]",
    b"[[]]",
    b'{"stream":"victim","id":"1","ts":NaN,"x":{"a":1},"seq":0}',
    b'{"stream":"victim","id":"1","ts":0,"x":{"a":Infinity},"seq":0}',
    b'{"stream":"victim","id":"1","ts":0,"y":-Infinity,"seq":0}',
    b'{"stream":"victim","id":"\\ud800","ts":0,"x":{"a":1},"seq":0}',
    b'{"stream":"victim","id":"1","ts":1' + b"0" * 400 + b',"x":{"a":1},"seq":0}',
    b'{"stream":"victim","id":"1","ts":0,"x":{"a":1' + b"0" * 4400 + b'},"seq":0}',
]

LEARNER_POOL = [
    "nochange",
    "majority[window=3]",
    "nb",
    "ht[grace_period=5]",
    "ta:nb",
    "import[path=os.system]",
    "import[path=builtins.eval,source=1]",
    "evil",
    "nb[alpha=-1]",
    "ht[__class__=1]",
    "",
    "ta:ta:",
    "knn[window_size=3]",
    "mean",
]
EXPERIMENT_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "task": st.sampled_from(["classification", "regression", "bogus"]),
    "window": st.one_of(st.none(), st.integers(-1, 50)),
    "fading": st.one_of(st.none(), st.floats(-1, 2)),
    "reeval_k": st.one_of(st.none(), st.integers(-1, 5)),
    "bins": st.one_of(st.none(), st.integers(-1, 6)),
    "weights": st.sampled_from(["uniform", "first-time", "exponential", "1,2", "x", ""]),
    "detectors": st.lists(st.sampled_from(["ph", "adwin", "ddm", "bogus", "ph[w=0]"])),
    "drift_reset": st.booleans(),
    "positive": st.one_of(st.none(), st.sampled_from(["a", "b"])),
    "auc_window": st.integers(-1, 20),
    "pending_cap": st.one_of(st.none(), st.integers(-1, 10)),
    "snapshot_every": st.integers(-1, 5),
    "max_lag": st.integers(-1, 6),
    "seed": st.integers(-(2**40), 2**40),
    "drift_points": st.lists(st.integers(-1, 50), max_size=3),
    "delay": st.one_of(st.integers(-1, 5), st.text(max_size=4)),
    "limit": st.one_of(st.none(), st.integers(-1, 5)),
    "features": st.one_of(st.none(), st.lists(FEATURE_NAMES, max_size=3), st.integers(), WILD_TEXT),
    "dataset": st.one_of(st.none(), st.text(max_size=5)),
    "no_such_field": st.integers(),
}


@st.composite
def experiment_dicts(draw: st.DrawFn) -> dict[str, Any]:
    d: dict[str, Any] = {
        "stream": draw(st.one_of(st.sampled_from(["late", "ghost", "victim"]), WILD_TEXT)),
        "learners": draw(st.lists(st.sampled_from(LEARNER_POOL), max_size=3)),
    }
    for name, strategy in EXPERIMENT_FIELDS.items():
        if draw(st.integers(0, 3)) == 0:
            d[name] = draw(strategy)
    return d


@st.composite
def inputs(draw: st.DrawFn) -> tuple[str, bytes]:
    """One message for one of the input topics."""
    topic = draw(st.sampled_from(["features"] * 4 + ["labels"] * 4 + ["experiments"]))
    shape = draw(st.sampled_from(["event"] * 6 + ["packed"] * 2 + ["bytes", "json", "fixed"]))
    ensure_ascii = draw(st.booleans())
    if topic == "experiments" and shape in ("event", "packed"):
        return topic, wire(draw(experiment_dicts()), ensure_ascii)
    if shape == "event":
        return topic, wire(draw(event_dicts()), ensure_ascii)
    if shape == "packed":
        items = draw(st.lists(st.one_of(event_dicts(), VALUES), max_size=6))
        return topic, wire(items, ensure_ascii)
    if shape == "bytes":
        return topic, draw(st.binary(max_size=64))
    if shape == "json":
        anything = st.recursive(
            VALUES, lambda inner: st.lists(inner) | st.dictionaries(WILD_TEXT, inner), max_leaves=8
        )
        return topic, wire(draw(anything), ensure_ascii)
    return topic, draw(st.sampled_from(FIXED_ABUSE))


VICTIMS = {
    "classification": {
        "learners": ["nochange", "nb", "ht[grace_period=2]"],
        "reeval_k": 1,
        "bins": 3,
        "window": 5,
        "fading": 0.9,
        "detectors": ["ph[lambda=1]", "adwin"],
        "positive": "a",
        "pending_cap": 4,
        "snapshot_every": 3,
        "features": ["a", "b", "c"],
    },
    "regression": {
        "task": "regression",
        # (htr is left out: river's HoeffdingTreeRegressor raises OverflowError on huge
        # targets, see test_huge_regression_targets_never_crash_the_worker)
        "learners": ["mean", "linreg"],
        "reeval_k": 2,
        "bins": 2,
        "window": 3,
        "pending_cap": 4,
        "snapshot_every": 2,
    },
    "open": {  # no feature names: the first feature event decides them
        "learners": ["majority", "ta:nb", "knn[window_size=5]"],
        "detectors": ["random[p=0.3,warmup=1]"],
        "drift_reset": True,
        "max_lag": 2,
    },
}


@settings(
    max_examples=250 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    victim=st.sampled_from(sorted(VICTIMS)),
    messages=st.lists(inputs(), max_size=30),
    idle_release=st.booleans(),
    redeliver=st.lists(st.integers(0, 40), max_size=3),
)
# the labels topic ends early; the stream fails at its end (no label was the positive class
# 'a'); the second end marker of that topic comes after the failure: an event after its
# topic's end, as for a stream that did not fail
@example(
    victim="classification",
    messages=[
        ("features", b'{"stream": "victim", "ts": 0.0, "seq": 0, "id": "0", "x": {"a": 0.0}}'),
        ("labels", b'{"stream": "victim", "ts": 0.0, "seq": 0, "id": "0", "y": "b"}'),
        ("labels", b'{"stream": "victim", "ts": 0.0, "seq": 0, "end": true, "n_events": 0}'),
    ],
    idle_release=False,
    redeliver=[],
)
def test_worker_survives_any_input_and_accounts_for_every_event(
    victim: str, messages: list[tuple[str, bytes]], idle_release: bool, redeliver: list[int]
) -> None:
    h = Harness(checkpoint_every=15)
    h.send("experiments", encode({"stream": "victim", **VICTIMS[victim]}), b"victim")
    sent: list[tuple[str, bytes, int]] = []
    for kind, raw in messages:
        sent.append((kind, raw, h.send(kind, raw, b"victim")))
    for i in redeliver:  # a consumer re-reading old messages at their old offsets
        if i < len(sent) and sent[i][0] != "experiments":
            kind, raw, offset = sent[i]
            h.send(kind, raw, b"victim", offset=offset)
    if idle_release:  # a silent topic: what is queued passes without the exact order
        h.worker.release.timeout = -1.0
        h.worker.tick()
    end = encode({"stream": "victim", "end": True, "ts": 1e9, "seq": 10**6, "n_events": 0})
    h.send("features", end, b"victim")
    h.send("labels", end, b"victim")
    h.finish()
    h.worker.checkpoint()

    h.check_outputs()
    h.check_schema_deadletters()
    h.check_conservation()
    runner = h.worker.runners["victim"]
    if never_positive(runner):  # refused at the end, loudly: a failed notice, no results
        assert runner.failed is not None and "positive class" in runner.failed, runner.failed
        failed = [m for m in h.producer.on("metrics") if m["kind"] == "failed"]
        assert [m["stream"] for m in failed] == ["victim"]
        return
    assert runner.finished
    results = [m for m in h.producer.on("metrics") if m["kind"] == "results"]
    mine = [m for m in results if m["stream"] == "victim"]
    assert len(mine) == 1
    assert mine[0]["n_labelled"] == runner.experiment.n_labelled


@pytest.mark.parametrize("raw", FIXED_ABUSE, ids=range(len(FIXED_ABUSE)))
@pytest.mark.parametrize("kind", ["features", "labels", "experiments"])
def test_fixed_abuse_is_dead_lettered(kind: str, raw: bytes) -> None:
    h = Harness()
    h.send("experiments", encode({"stream": "victim", **VICTIMS["classification"]}), b"victim")
    h.send(kind, raw, b"victim")
    h.finish()
    h.check_outputs()
    h.check_schema_deadletters()
    letters = h.deadletters()
    if raw is _BIG_ARRAY or raw.startswith(_PAD):
        assert [d["reason"][:9] for d in letters] == ["too large"]
        assert letters[0]["truncated"] and letters[0]["payload_bytes"] == len(raw)
    elif raw == b"[]" and kind != "experiments":
        assert letters == []  # an empty packed message: no event, nothing wrong
    else:
        assert letters, "nothing was dead-lettered"
    assert all(d["kind"] == "schema" for d in letters)
    assert h.worker.counts["events"] == 0


def _features(stream: str, i: int) -> bytes:
    return encode({"stream": stream, "id": str(i), "ts": float(i), "x": {"a": 1}, "seq": 2 * i})


def _age(h: Harness, stream: str, labels_silent: float, queued: float) -> None:
    """Pretend ``stream``'s labels topic has been silent, and its features queued, so long."""
    now = time.monotonic()
    h.worker.release.heard[stream]["labels"] = now - labels_silent
    h.worker.release.queued_since.setdefault(stream, {})["features"] = now - queued


def test_idle_release_counts_only_silence_the_worker_could_have_read() -> None:
    """streameval.agents.idle: no release while the worker cannot read (an outage, a rejoin)."""
    h = Harness(idle_timeout=5.0, rejoin_grace=60.0)
    h.send("experiments", encode({"stream": "s", "learners": ["nochange"]}), b"s")
    for i in range(3):  # features, and the label topic silent: they wait for it
        h.send("features", _features("s", i))
    merger = h.worker.runners["s"].merger
    clock = h.worker.release.clock
    now = time.monotonic()
    clock.resumed_at = now - 100.0  # reading all along
    _age(h, "s", labels_silent=4.0, queued=4.0)  # less than the timeout: nothing passes
    h.worker.tick()
    assert merger.n_waiting == 3
    _age(h, "s", labels_silent=100.0, queued=100.0)
    clock.suspend(now - 30.0)  # the broker was lost and answers again since 30 s,
    h.worker.tick()  # but no message came yet: the consumer is still rejoining
    assert merger.n_waiting == 3 and merger.n_idle_released == 0
    h.send("features", _features("s", 3))  # reading again ...
    clock.resumed_at = time.monotonic() - 6.0  # ... for 6 s, and no label: released
    h.worker.tick()
    assert merger.n_waiting == 0 and merger.n_idle_released == 4
    assert len(h.producer.on("predictions")) >= 1  # their first predictions went out
    h.send("features", _features("s", 4))
    _age(h, "s", labels_silent=100.0, queued=100.0)
    clock.suspend(time.monotonic() - 70.0)  # lost, back 70 s ago and nothing since: past the
    # 60 s grace the topics are silent for real (10 s here, more than the timeout)
    h.worker.tick()
    assert merger.n_waiting == 0 and merger.n_idle_released == 5


def test_idle_release_is_per_stream_and_waits_for_a_topic_that_still_brings_events() -> None:
    """A live stream whose labels come rarely gets its first predictions after the idle
    timeout although its own features and another stream keep the worker busy; a stream
    whose labels topic still brings its events keeps waiting for it (a replay's order)."""
    h = Harness(idle_timeout=5.0)
    for stream in ("live", "busy", "lagging"):
        h.send("experiments", encode({"stream": stream, "learners": ["nochange"]}), b"x")
    for i in range(3):
        h.send("features", _features("live", i))
        h.send("features", _features("lagging", i))
    h.worker.release.clock.resumed_at = time.monotonic() - 100.0
    _age(h, "live", labels_silent=6.0, queued=6.0)  # no label of it for 6 s
    _age(h, "lagging", labels_silent=1.0, queued=60.0)  # a label of it 1 s ago
    for i in range(3):  # the busy stream goes on: the worker as a whole never falls silent
        h.send("features", _features("busy", i))
        h.send("labels", encode({"stream": "busy", "id": str(i), "ts": float(i), "y": "a",
                                 "seq": 2 * i + 1}))  # fmt: skip
    assert h.worker.release.clock.silent_for() < 1.0
    h.worker.tick()
    live, lagging = h.worker.runners["live"].merger, h.worker.runners["lagging"].merger
    assert live.n_waiting == 0 and live.n_idle_released == 3
    assert lagging.n_waiting == 3 and lagging.n_idle_released == 0
    assert h.worker.runners["busy"].merger.n_idle_released == 0
    sent = [p for batch in h.producer.on("predictions") for p in batch]
    firsts = [p["id"] for p in sent if p["stream"] == "live" and p["kind"] == "first"]
    assert firsts == ["0", "1", "2"]  # the live stream's first predictions went out
    assert not [p for p in sent if p["stream"] == "lagging"]
    # the queue of the live stream starts again: a new event waits its own timeout
    h.send("features", _features("live", 3))
    h.worker.tick()
    assert live.n_waiting == 1 and live.n_idle_released == 3
    # a stream restored with a queue and never heard of again: its wait counts from then
    del h.worker.release.queued_since["live"], h.worker.release.heard["live"]
    h.worker.tick()
    assert live.n_waiting == 1
    _age(h, "live", labels_silent=6.0, queued=6.0)
    h.worker.tick()
    assert live.n_waiting == 0 and live.n_idle_released == 4


def test_deadletter_names_the_topic_and_offset_of_the_rejected_event() -> None:
    h = Harness()
    h.send("experiments", encode({"stream": "s", "learners": ["nochange"]}), b"s")
    label = {"stream": "s", "id": "1", "ts": 1.0, "y": "a", "seq": 1}
    h.send("features", encode({"stream": "s", "id": "1", "ts": 0.0, "x": {"a": 1}, "seq": 0}))
    h.send("labels", encode(label))
    at = h.send("labels", encode({**label, "seq": 2}))  # a second label: rejected ...
    h.send("features", encode({"stream": "s", "id": "2", "ts": 5.0, "x": {"a": 1}, "seq": 3}))
    [letter] = h.deadletters()  # ... once the features topic passes its time
    assert letter["kind"] == "duplicate_label"
    assert (letter["topic"], letter["offset"]) == (NAMES.labels, at)


def test_an_orphan_label_is_deadlettered_with_the_offset_that_carried_it() -> None:
    """The orphan waits in the guard across many messages; its record names its own message."""
    h = Harness(orphan_ttl=2.0)
    h.send("experiments", encode({"stream": "s", "learners": ["nochange"]}), b"s")
    at = h.send("labels", encode({"stream": "s", "id": "ghost", "ts": 0.0, "y": "a", "seq": 0}))
    for i in range(1, 6):
        event = {"stream": "s", "id": str(i), "ts": float(i), "seq": 2 * i}
        h.send("features", encode({**event, "x": {"a": 1.0}}))
        h.send("labels", encode({**event, "y": "a", "seq": 2 * i + 1}))
    [letter] = h.deadletters()
    assert letter["kind"] == "orphan_label"
    assert (letter["topic"], letter["partition"], letter["offset"]) == (NAMES.labels, 0, at)
    assert at == 0 and h.offsets["labels"] == 6  # not the offset of the message that expired it


def test_huge_regression_targets_never_crash_the_worker() -> None:
    """|y| above 1e50 is out_of_range (river's HTR raises OverflowError at ~1.3e154)."""
    h = Harness()
    config = {"stream": "r", "task": "regression", "learners": ["htr"]}
    h.send("experiments", encode(config), b"r")
    targets = [1.0, 1.3407807929942597e154, -1e154, 1e300, 1e50, -1e50]
    offsets = []
    for i, y in enumerate(targets):
        event = {"stream": "r", "id": str(i), "ts": float(i)}
        h.send("features", encode({**event, "x": {"a": 0.0}, "seq": 2 * i}), b"r")
        offsets.append(h.send("labels", encode({**event, "y": y, "seq": 2 * i + 1}), b"r"))
    end = {"stream": "r", "end": True, "ts": 9.0, "seq": 99, "n_events": 2 * len(targets)}
    h.send("features", encode(end), b"r")
    h.send("labels", encode(end), b"r")
    runner = h.worker.runners["r"]
    assert runner.failed is None and runner.finished
    assert runner.experiment.n_labelled == 3  # 1.0 and the two targets at the bound
    letters = h.deadletters()
    assert [(d["kind"], d["topic"], d["offset"]) for d in letters] == [
        ("out_of_range", NAMES.labels, offsets[i]) for i in (1, 2, 3)
    ]
    assert all("magnitude above 1e+50" in d["reason"] for d in letters)
    [results] = [m for m in h.producer.on("metrics") if m["kind"] == "results"]
    assert results["results"]["ingest"]["rejected_out_of_range"] == 3
    assert results["results"]["counters"]["never_labelled"] == 3
    h.check_outputs()


def test_huge_feature_values_are_out_of_range_and_the_bound_is_safe_for_every_learner() -> None:
    """Features and targets at +-1e50 go through HTR, linreg and mean; 1e75 is refused.

    (river's HoeffdingTreeRegressor raises OverflowError on features near 1e75.)
    """
    h = Harness()
    config = {"stream": "r", "task": "regression", "learners": ["htr", "linreg", "mean"]}
    h.send("experiments", encode(config), b"r")
    values = [1e50, -1e50, 0.5, 3e49]
    n = 300
    for i in range(n):
        event = {"stream": "r", "id": str(i), "ts": float(i)}
        x = {"a": values[i % 4], "b": values[(i * 7) % 4]}
        h.send("features", encode({**event, "x": x, "seq": 3 * i}), b"r")
        h.send("labels", encode({**event, "y": values[(i * 3) % 4], "seq": 3 * i + 1}), b"r")
    bad = {"stream": "r", "id": "bad", "ts": float(n), "x": {"a": 1e75, "b": 0.0}, "seq": 3 * n}
    at = h.send("features", encode(bad), b"r")
    end = {"stream": "r", "end": True, "ts": float(n + 1), "seq": 3 * n + 2, "n_events": 2 * n}
    h.send("features", encode(end), b"r")
    h.send("labels", encode(end), b"r")
    runner = h.worker.runners["r"]
    assert runner.failed is None and runner.finished
    assert runner.experiment.n_labelled == n
    [letter] = h.deadletters()
    assert (letter["kind"], letter["topic"], letter["offset"]) == (
        "out_of_range",
        NAMES.features,
        at,
    )


class Exploding:
    """A learner that fails on the class label ``boom`` (a stand-in for a learner bug)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def learn_one(self, x: Any, y: Any, *, at: Any = None) -> None:
        if y == "boom":
            raise ValueError("cannot learn boom")
        self.inner.learn_one(x, y, at=at)

    def predict_proba_one(self, x: Any, *, at: Any = None) -> Any:
        return self.inner.predict_proba_one(x, at=at)

    def predict_proba_many(self, xs: Any, *, at: Any = None) -> Any:
        return self.inner.predict_proba_many(xs, at=at)


def explode(runner: StreamRunner) -> None:
    """Make the second learner of ``runner``'s experiment raise on the label ``boom``."""
    experiment = runner.experiment
    experiment.slots[1].learner = Exploding(experiment.slots[1].learner)
    if isinstance(experiment, ColumnarExperiment):
        experiment._plan()  # it binds its learners' methods once (and after a restore)


def test_a_learner_that_raises_stops_its_stream_only_and_never_crashes_the_worker() -> None:
    """The event goes to deadletter with the error; the stream is marked failed (also in its
    checkpoint, so a restarted worker does not fail again); another stream goes on."""
    h = Harness()
    for stream in ("bad", "good"):
        h.send("experiments", encode({"stream": stream, "learners": ["nochange", "nb"]}), b"x")
    explode(h.worker.runners["bad"])
    offsets = {}
    for stream in ("bad", "good"):
        for i in range(6):
            event = {"stream": stream, "id": str(i), "ts": float(i)}
            h.send("features", encode({**event, "x": {"a": float(i)}, "seq": 2 * i}))
            y = "boom" if i == 3 else "ab"[i % 2]
            offsets[stream, i] = h.send("labels", encode({**event, "y": y, "seq": 2 * i + 1}))
        end = {"stream": stream, "end": True, "ts": 9.0, "seq": 99, "n_events": 12}
        h.send("features", encode(end))
        h.send("labels", encode(end))
    bad, good = h.worker.runners["bad"], h.worker.runners["good"]
    # the learner, the instance (arrival order) and the exception
    failed = "learner 'nb' failed on instance 3 (learn): ValueError: cannot learn boom"
    assert bad.failed == failed and not bad.finished
    assert bad.experiment.n_labelled == 4  # labels 0-3 were scored; 3 failed while learning
    # label 3 was released by the features of 4, which the merge still held when the stream
    # stopped (dropped); after the failure came label 4, the features and label of 5 and the
    # two end markers
    assert bad.ingest_counts()["after_failure"] == 6
    assert bad.merger.n_waiting == 0 and bad.held == 0  # nothing held for a stopped stream
    [letter] = h.deadletters()
    assert letter["kind"] == "experiment_error" and "cannot learn boom" in letter["reason"]
    assert (letter["topic"], letter["offset"]) == (NAMES.labels, offsets["bad", 3])
    assert good.failed is None and good.finished and good.experiment.n_labelled == 6
    results = [m["stream"] for m in h.producer.on("metrics") if m["kind"] == "results"]
    assert results == ["good"]  # no results are made of a half-updated experiment
    # ... but a notice that the stream stopped, so nobody waits for them
    [notice] = [m for m in h.producer.on("metrics") if m["kind"] == "failed"]
    assert notice == {
        "stream": "bad",
        "kind": "failed",
        "n_labelled": 4,
        "ts": 3.0,  # the time of label 3, the event that failed
        "error": failed,
        "deadletter": NAMES.deadletter,
        "seq": notice["seq"],
    }
    assert schemas.validate("metrics", notice) is None
    assert h.worker.status()["streams"]["bad"]["failed"] == bad.failed
    h.worker.checkpoint()
    restored = pickle.loads(pickle.dumps(bad))
    assert restored.failed == bad.failed
    assert restored.push("labels", LabelEvent("bad", "9", 9.0, "a", 50), (0, 99, 0)) == ([], [])


def test_a_stream_that_fails_on_an_idle_released_event_says_so() -> None:
    """The failure notice also goes out when the failing event was let through by the idle
    release (no later event of the stream may ever come to carry it)."""
    h = Harness(idle_timeout=5.0)
    h.send("experiments", encode({"stream": "s", "learners": ["nochange", "nb"]}), b"x")
    runner = h.worker.runners["s"]
    explode(runner)
    h.send("features", _features("s", 0))
    h.send("labels", encode({"stream": "s", "id": "0", "ts": 0.5, "y": "boom", "seq": 1}))
    assert runner.merger.n_queued("labels") == 1  # waits for the features topic to pass 0.5
    h.worker.release.clock.resumed_at = time.monotonic() - 100.0
    now = time.monotonic()
    h.worker.release.heard["s"]["features"] = now - 6.0
    h.worker.release.queued_since.setdefault("s", {})["labels"] = now - 6.0
    h.worker.tick()
    failed = "learner 'nb' failed on instance 0 (learn): ValueError: cannot learn boom"
    assert runner.failed == failed
    [notice] = [m for m in h.producer.on("metrics") if m["kind"] == "failed"]
    assert notice["stream"] == "s" and notice["error"] == runner.failed


# -- a valid stream amid the garbage ------------------------------------------------------------


def comparable(results: dict[str, Any]) -> dict[str, Any]:
    """Everything but the timings, the Kafka-side counts and the snapshot cadence."""
    r = copy.deepcopy(results)
    r.pop("runtime", None)
    r.pop("ingest", None)
    r["config"].pop("snapshot_every", None)
    return r


@dataclass
class Electricity:
    config: ExperimentConfig
    messages: list[Any]  # as the replay packs them; the last two are the end markers
    reference: dict[str, Any]

    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"Electricity({len(self.messages)} messages)"


_ELECTRICITY: dict[str, Electricity] = {}


def electricity(data_dir: Any) -> Electricity:
    """The valid stream, its messages and its reference results (built once)."""
    if "e" not in _ELECTRICITY:
        config = ExperimentConfig(
            stream="valid",
            learners=["nochange", "nb", "ht"],
            dataset="electricity",
            limit=500,
            delay="48",
            reeval_k=10,
            bins=5,
            window=100,
        )
        dataset, config = prepare(config, data_dir)
        fmt = PackedMessages(40)
        messages = [m for event in schedule(config, dataset) for m in fmt.add(event)]
        messages += fmt.flush()
        assert [m.kind for m in messages[-2:]] == ["features", "labels"]
        reference = evaluate_config(config, data_dir=data_dir)
        _ELECTRICITY["e"] = Electricity(config, messages, reference)
    return _ELECTRICITY["e"]


JUNK = st.one_of(
    st.binary(max_size=40),
    st.recursive(
        VALUES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WILD_TEXT, inner)
    ).map(lambda v: wire(v, True)),
    st.sampled_from([raw for raw in FIXED_ABUSE if raw != b"[]"]),  # ([] is no error)
    event_dicts().map(lambda d: wire({**d, "stream": "valid", "ts": math.nan}, False)),
    event_dicts().map(lambda d: wire({**d, "stream": "valid", "id": "\udcff"}, True)),
    event_dicts().map(lambda d: wire({**d, "stream": "valid", "id": ""}, True)),
)
#: Elements that make a packed array "mixed": each is one more schema rejection. (A NaN
#: token is no element: it makes the whole message invalid JSON, see JUNK.)
BAD_ELEMENTS = [
    b"1",
    b'"features"',
    b"null",
    b"[]",
    b"{}",
    b'{"stream":"valid","id":"","ts":0,"y":"UP","seq":0}',
    b'{"stream":"valid","id":"\\ud800","ts":0,"y":"UP","seq":0}',
    b'{"stream":"valid","id":"9","ts":0,"x":{"nswprice":1},"seq":0,"extra":1}',
]
INJECTIONS = st.one_of(
    st.tuples(st.just("junk"), st.sampled_from(["features", "labels", "experiments"]), JUNK),
    st.tuples(st.just("ghost"), st.sampled_from(["features", "labels"]), IDS),
    st.tuples(st.just("wrong_width"), st.sampled_from(["bogus", ""]), IDS),
    st.tuples(st.just("orphan"), st.one_of(st.sampled_from(["UP", "ZZ"]), WILD_TEXT), IDS),
    st.tuples(st.just("duplicate_label"), st.integers(0, 10**6), st.just("")),
    st.tuples(st.just("already_labelled"), st.integers(0, 10**6), st.just("")),
    st.tuples(st.just("backwards"), st.integers(0, 10**6), st.floats(1e-3, 1e7)),
    st.tuples(st.just("redeliver"), st.integers(0, 10**6), st.just("")),
    st.tuples(
        st.just("mixed"),
        st.lists(st.sampled_from(BAD_ELEMENTS), min_size=1, max_size=4),
        st.integers(0, 10**6),
    ),
    st.tuples(st.just("redefine"), st.sampled_from(["same", "other", "import"]), st.just("")),
)


def _fresh(prefix: str, n: int, uid: str) -> str:
    """A unique id that no instance of the valid stream has (and the schema accepts)."""
    text = f"{prefix}{n}-{uid}"
    return text[: schemas.MAX_ID_LENGTH]


@settings(
    max_examples=6 * SCALE,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(plan=st.lists(st.tuples(st.floats(0, 1), INJECTIONS), max_size=40))
def test_valid_stream_amid_garbage_gives_the_results_of_evaluate(
    data_dir: Any, plan: list[tuple[float, tuple[Any, ...]]]
) -> None:
    e = electricity(data_dir)
    h = Harness(checkpoint_every=2000)
    key = b"valid"
    h.send("experiments", encode(e.config.to_dict()), key)
    expected: Counter[tuple[Any, ...]] = Counter()
    redelivered = 0
    last = {"features": (0.0, 0), "labels": (0.0, 0)}  # keys of the last valid events sent
    labelled: list[tuple[tuple[float, int], str]] = []  # (label key, id) of labels sent
    sent: list[tuple[str, bytes, int, int]] = []  # kind, raw, offset, events of "valid"
    last_index = len(e.messages) - 2  # the end markers come last: inject before them
    at = sorted(((int(p * last_index), i) for i, (p, _) in enumerate(plan)))
    queue = [(pos, plan[i][1]) for pos, i in at]
    counter = itertools.count()

    def inject(injection: tuple[Any, ...]) -> list[bytes]:
        """Send one injection; return the bad elements to mix into the next packed message."""
        nonlocal redelivered
        what, a, b = injection
        n = next(counter)
        if what == "junk":
            offset = h.send(a, b, key)
            if a != "experiments":
                assert not decode_events(a, b)[0]
            if b != b"[]":  # (an empty packed message is no error, see FIXED_ABUSE)
                assert h.schema_expected["schema", a, offset] >= 1
        elif what == "ghost":
            stream = f"ghost-{n}"
            ev = {"stream": stream, "id": "1", "ts": 0.0, "seq": 0}
            ev.update({"x": {"a": 1.0}} if a == "features" else {"y": "UP"})
            if schemas.validate(a, {**ev, "id": b}) is None and _utf8(b):
                ev["id"] = b
            h.send(a, encode(ev), stream.encode())
            expected["unknown_stream", stream, ev["id"]] += 1
        elif what == "wrong_width":
            uid = _fresh("ww", n, b if _utf8(b) else "")
            ts, seq = last["features"]
            x = {} if a == "" else {a: 1.0, "nswprice": 0.5}
            h.send(
                "features",
                encode({"stream": "valid", "id": uid, "ts": ts, "x": x, "seq": seq}),
                key,
            )
            expected["wrong_width", uid] += 1
        elif what == "orphan":
            uid = _fresh("ghost", n, b if _utf8(b) else "")
            ts, seq = last["labels"]
            y = a if _utf8(a) and a else "never-seen-class"
            h.send(
                "labels", encode({"stream": "valid", "id": uid, "ts": ts, "y": y, "seq": seq}), key
            )
            expected["orphan_label", uid] += 1
        elif what == "duplicate_label" and labelled:
            _, uid = labelled[a % len(labelled)]
            ts, seq = last["labels"]
            h.send(
                "labels",
                encode({"stream": "valid", "id": uid, "ts": ts, "y": "UP", "seq": seq}),
                key,
            )
            expected["duplicate_label", uid] += 1
        elif what == "already_labelled":
            before = [uid for k, uid in labelled if k < last["features"]]
            if before:
                uid = before[a % len(before)]
                ts, seq = last["features"]
                h.send(
                    "features",
                    encode(
                        {"stream": "valid", "id": uid, "ts": ts, "x": {"nswprice": 0.5}, "seq": seq}
                    ),
                    key,
                )
                expected["already_labelled", uid] += 1
        elif what == "backwards":  # time going back, in events that are refused anyway
            # (back from both topics' last times: a bogus event from the future, even one
            # rejected later, would move the merge's watermark and reorder the valid events)
            ts = min(last["labels"][0], last["features"][0]) - b
            if a % 3 == 0:
                uid = _fresh("back", n, "")
                h.send(
                    "labels",
                    encode({"stream": "valid", "id": uid, "ts": ts, "y": "DOWN", "seq": 0}),
                    key,
                )
                expected["orphan_label", uid] += 1
            elif a % 3 == 1:
                uid = _fresh("back", n, "")
                h.send(
                    "features",
                    encode(
                        {
                            "stream": "valid",
                            "id": uid,
                            "ts": ts,
                            "x": {"no-such-feature": 1},
                            "seq": 0,
                        }
                    ),
                    key,
                )
                expected["wrong_width", uid] += 1
            elif labelled:
                _, uid = labelled[a % len(labelled)]
                h.send(
                    "labels",
                    encode({"stream": "valid", "id": uid, "ts": ts, "y": "UP", "seq": 0}),
                    key,
                )
                expected["duplicate_label", uid] += 1
        elif what == "redeliver" and sent:
            kind, raw, offset, n_events = sent[a % len(sent)]
            h.send(kind, raw, key, offset=offset)
            redelivered += n_events
        elif what == "mixed":
            return list(a)
        elif what == "redefine":
            config = e.config.to_dict()
            if a == "other":
                config["learners"] = ["nochange"]
            elif a == "import":
                config = {**config, "stream": f"evil-{n}", "learners": ["import[path=os.system]"]}
            offset = h.send("experiments", encode(config), key)
            if a != "same":
                expected["bad_experiment", "experiments", offset] += 1
        return []

    for index, message in enumerate(e.messages):
        mixed: list[bytes] = []
        while queue and queue[0][0] <= index:
            mixed += inject(queue.pop(0)[1])
        raw = message.value
        items = json.loads(raw) if raw.startswith(b"[") else None
        if mixed and items is not None:  # a packed array with bad elements among the good
            parts = [encode(item) for item in items]
            for j, element in enumerate(mixed):
                parts.insert((j * 7) % (len(parts) + 1), element)
            raw = b"[" + b",".join(parts) + b"]"
        offset = h.send(message.kind, raw, key)
        if mixed and items is not None:
            assert h.schema_expected["schema", message.kind, offset] == len(mixed)
        events = items if items is not None else [json.loads(raw)]
        sent.append((message.kind, raw, offset, len(events)))
        for ev in events:
            if "end" in ev:
                continue
            last[message.kind] = (ev["ts"], ev["seq"])
            if message.kind == "labels":
                labelled.append(((ev["ts"], ev["seq"]), ev["id"]))
        if index % 10 == 0:
            h.worker.tick()
    assert not queue
    runner = h.worker.runners["valid"]
    late = {"stream": "valid", "id": "late", "ts": 1e12, "x": {"nswprice": 1.0}, "seq": 10**6}
    h.send("features", encode(late), key)  # after the end marker: dropped and counted
    assert runner.merger.n_after_end == 1
    h.finish()

    h.check_outputs()
    h.check_conservation()
    for k in h.schema_expected:
        expected[k] = h.schema_expected[k]  # junk: what the decoder says, checked per offset
    got: Counter[tuple[Any, ...]] = Counter()
    for d in h.deadletters():
        if d["kind"] in ("schema", "bad_experiment"):
            got[d["kind"], KIND_OF_TOPIC[d["topic"]], d["offset"]] += 1
        elif d["kind"] == "unknown_stream":
            payload = json.loads(d["payload"])
            got[d["kind"], payload["stream"], payload["id"]] += 1
        else:
            got[d["kind"], json.loads(d["payload"])["id"]] += 1
    assert got == expected

    docs = [m for m in h.producer.on("metrics") if m["kind"] == "results"]
    assert [d["stream"] for d in docs] == ["valid"]
    results = docs[0]["results"]
    assert comparable(results) == comparable(e.reference)
    assert results["ingest"]["redelivered"] == redelivered
    assert results["ingest"]["retimed"] == 0


def _utf8(text: Any) -> bool:
    if not isinstance(text, str) or not 0 < len(text) <= 100:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- the runner alone: valid events in any order --------------------------------------------------

TS = st.one_of(st.integers(0, 30), st.sampled_from([-1e308, 1e308, 1.7e308, 5e-324, -0.0, 2e16]))
ACTIONS = st.one_of(
    st.tuples(
        st.just("features"),
        st.sampled_from("012345"),
        TS,
        st.dictionaries(st.sampled_from("abc"), st.floats(-5, 5), min_size=1, max_size=3),
    ),
    st.tuples(
        st.just("labels"),
        st.sampled_from("012345"),
        TS,
        st.sampled_from(["a", "b", "unseen", 2.5]),
    ),
    st.tuples(st.just("idle"), st.sampled_from(["features", "labels"]), st.just(0), st.just(0)),
)


@settings(max_examples=300 * SCALE, deadline=None)
@given(
    victim=st.sampled_from(sorted(VICTIMS)),
    actions=st.lists(ACTIONS, min_size=1, max_size=40),
)
def test_runner_takes_valid_events_in_any_order_and_time(
    victim: str, actions: list[tuple[str, str, int, Any]]
) -> None:
    """Topics out of order, time going backwards, idle releases: no exception, all counted."""
    config = ExperimentConfig.from_dict({"stream": "victim", **VICTIMS[victim]})
    runner = StreamRunner(config, orphan_ttl=10.0)
    for seq, (what, uid, ts, value) in enumerate(actions):
        if what == "idle":
            runner.release_idle(uid)
        elif what == "features":
            runner.push(what, FeatureEvent("victim", uid, float(ts), value, seq))
        else:
            runner.push(what, LabelEvent("victim", uid, float(ts), value, seq))
    end = EndOfStream("victim", 1e308, len(actions), len(actions))
    runner.push("features", end)
    runner.push("labels", end)
    if never_positive(runner):  # refused at the end, loudly
        assert runner.failed is not None and "positive class" in runner.failed, runner.failed
        return
    assert runner.finished
    account(runner)
    encode(clean(runner.results()))


# -- predictions out in bulk ----------------------------------------------------------------------


@pytest.mark.parametrize("per_message", [500, 7])
def test_predictions_are_published_in_bulk_each_with_its_own_seq(
    data_dir: Any, monkeypatch: pytest.MonkeyPatch, per_message: int
) -> None:
    """One predictions message per input message (a JSON array, split at the size cap), and the
    arrays laid end to end are exactly the predictions a runner fed the schedule makes, seq by
    seq: bulk publishing changes the wire layout, not what is published nor its order."""
    import streameval.agents.publish

    monkeypatch.setattr(streameval.agents.publish, "PREDICTIONS_PER_MESSAGE", per_message)
    e = electricity(data_dir)
    h = Harness(checkpoint_every=10**9)
    h.send("experiments", encode(e.config.to_dict()), b"valid")
    sizes: list[int] = []
    for message in e.messages:
        before = len(h.producer.on("predictions"))
        h.send(message.kind, message.value, b"valid")
        made = h.producer.on("predictions")[before:]
        assert all(isinstance(m, list) and 0 < len(m) <= per_message for m in made)
        assert all(len(m) == per_message for m in made[:-1])  # only the last chunk is short
        sizes.append(sum(len(m) for m in made))
    h.check_outputs()
    published = [p for m in h.producer.on("predictions") for p in m]

    dataset, config = prepare(e.config, data_dir)
    runner = StreamRunner(config)
    expected = []
    for event in schedule(config, dataset):
        topics = (
            ["features", "labels"]
            if isinstance(event, EndOfStream)
            else ["features" if isinstance(event, FeatureEvent) else "labels"]
        )
        for topic in topics:
            outputs, _ = runner.push(topic, event)
            seq = runner.n_outputs - len(outputs)
            for o in outputs:
                if type(o).__name__ == "PredictionEvent":
                    expected.append({**json.loads(encode(clean(o.to_dict()))), "seq": seq})
                seq += 1
    assert published == expected
    assert len(published) > len(e.messages)  # several predictions per message on average
    assert sum(sizes) == len(published)
    n_messages = len(h.producer.on("predictions"))
    assert n_messages == sum(-(-s // per_message) for s in sizes if s)


def test_a_worker_without_predictions_publishes_none_and_the_same_results(data_dir: Any) -> None:
    """``--no-predictions`` (what ``streameval run`` uses): no predictions message, and the
    results document of ``evaluate`` all the same (re-evaluation on: its bins are unchanged)."""
    e = electricity(data_dir)
    h = Harness(checkpoint_every=10**9, predictions=False)
    h.send("experiments", encode(e.config.to_dict()), b"valid")
    for message in e.messages:
        h.send(message.kind, message.value, b"valid")
    h.worker.checkpoint()
    h.check_outputs()
    assert h.producer.on("predictions") == []
    [results] = [m for m in h.producer.on("metrics") if m["kind"] == "results"]
    assert comparable(results["results"]) == comparable(clean(e.reference))
    # the outputs are numbered without predictions: snapshots, then the results message
    assert results["seq"] == len(h.producer.on("metrics")) + len(h.producer.on("drift")) - 1
