"""Topic schemas: valid and invalid messages, decode, and fast-checker agreement."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from streameval.agents import codec
from streameval.agents.codec import end_message, feature_message, label_message
from streameval.agents.topics import TOPIC_KINDS
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import (
    DriftEvent,
    EndOfStream,
    FeatureEvent,
    LabelEvent,
    PredictionEvent,
)

from streameval import schemas

FEATURE = {"stream": "elec", "id": "17", "ts": 1.5, "x": {"a": 0.25, "b": 3, "day": "mon"},
           "seq": 4}  # fmt: skip
LABEL = {"stream": "elec", "id": "17", "ts": 2.0, "y": "UP", "seq": 5}
END = {"stream": "elec", "end": True, "ts": 9.0, "seq": 40, "n_events": 40}
PREDICTION = {
    "stream": "elec", "learner": "ht", "id": "17", "ts": 1.5, "kind": "first",
    "y_pred": "UP", "bin": 0,
}  # fmt: skip
METRICS = {
    "stream": "elec", "learner": "ta:ht", "n_labelled": 100, "ts": 99.0, "kind": "periodic",
    "metrics": {"accuracy": 0.8, "kappa": None, "window.kappa_per": -0.25, "pending": 3},
    "binned": {"accuracy": [0.5, None, 1.0]},
}  # fmt: skip
DRIFT = {"stream": "elec", "learner": "nb", "detector": "ph", "index": 120, "ts": 3.0,
         "statistic": 51.2}  # fmt: skip
DEADLETTER = {"reason": "invalid JSON", "kind": "features", "topic": "streameval.features",
              "partition": 0, "offset": 12, "payload": "{oops", "error": None}  # fmt: skip
EXPERIMENT = {"stream": "elec", "dataset": "electricity", "learners": ["nb", "ta:ht"],
              "delay": "natural", "reeval_k": 10, "bins": 20, "window": 1000, "fading": 0.999,
              "detectors": ["ph"]}  # fmt: skip
CHECKPOINT = {"stream": "elec", "ts": 3.0, "seq": 17, "n_labelled": 8, "state": "..."}

VALID: dict[str, list[dict[str, Any]]] = {
    "features": [FEATURE, END, {**FEATURE, "x": {}}, {**FEATURE, "seq": 3.0, "ts": -2}],
    "labels": [LABEL, END, {**LABEL, "y": 0.5}, {**LABEL, "y": 3}],
    "predictions": [
        PREDICTION,
        {**PREDICTION, "kind": "repredict", "bin": None, "y_pred": None},
        {**PREDICTION, "kind": "final", "y_pred": 2.5, "score": 0.9},
        {k: v for k, v in PREDICTION.items() if k != "bin"},
    ],
    "metrics": [METRICS, {**METRICS, "binned": None, "kind": "final"}, {**METRICS, "extra": 1}],
    "drift": [DRIFT, {**DRIFT, "statistic": None}],
    "deadletter": [DEADLETTER, {**DEADLETTER, "error": "boom", "key": "elec", "ts": 1.0}],
    "experiments": [EXPERIMENT, {"stream": "s", "learners": ["nochange"]}],
    "checkpoints": [CHECKPOINT, {"stream": "s"}],
}


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _with_x(value: Any) -> dict[str, Any]:
    return {**FEATURE, "x": {**FEATURE["x"], "bad": value}}


INVALID: dict[str, list[Any]] = {
    "features": [
        [], "text", 3, None,
        _without(FEATURE, "x"), _without(FEATURE, "seq"), _without(FEATURE, "stream"),
        {**FEATURE, "extra": 1}, {**FEATURE, "stream": ""}, {**FEATURE, "stream": "s" * 257},
        {**FEATURE, "id": 17}, {**FEATURE, "id": ""}, {**FEATURE, "ts": "1.5"},
        {**FEATURE, "ts": None}, {**FEATURE, "ts": True}, {**FEATURE, "seq": -1},
        {**FEATURE, "seq": 1.5}, {**FEATURE, "seq": False}, {**FEATURE, "x": []},
        {**FEATURE, "x": "a=1"}, _with_x(None), _with_x(True), _with_x([1.0]), _with_x({"n": 1}),
        {**FEATURE, "x": {"": 1.0}}, {**FEATURE, "y": "UP"},
        {**END, "end": False}, {**END, "end": "true"}, {**END, "end": 1},
        _without(END, "n_events"), {**END, "n_events": -1}, {**END, "n_events": 2.5},
        {**END, "x": {}}, {**END, "id": "1"}, _without(END, "seq"),
    ],
    "labels": [
        _without(LABEL, "y"), {**LABEL, "y": None}, {**LABEL, "y": True}, {**LABEL, "y": [1]},
        {**LABEL, "y": {"c": 1}}, {**LABEL, "x": {}}, {**LABEL, "id": None},
        {**LABEL, "seq": "5"}, {**END, "end": None}, _without(END, "ts"),
    ],
    "predictions": [
        _without(PREDICTION, "y_pred"), {**PREDICTION, "kind": "second"},
        {**PREDICTION, "bin": -1}, {**PREDICTION, "bin": 1.5}, {**PREDICTION, "learner": ""},
        {**PREDICTION, "ts": None}, {**PREDICTION, "y_pred": [1]}, {**PREDICTION, "id": 3},
        {**PREDICTION, "kind": None}, {**PREDICTION, "y_pred": True},
    ],
    "metrics": [
        _without(METRICS, "metrics"), {**METRICS, "kind": "daily"},
        {**METRICS, "metrics": {"accuracy": "high"}}, {**METRICS, "n_labelled": -1},
        {**METRICS, "binned": {"accuracy": [0.5, "x"]}}, {**METRICS, "binned": [1.0]},
    ],
    "drift": [_without(DRIFT, "detector"), {**DRIFT, "index": -1}, {**DRIFT, "statistic": "x"}],
    "deadletter": [_without(DEADLETTER, "reason"), {**DEADLETTER, "payload": "p" * 4097},
                   {**DEADLETTER, "offset": "12"}],
    "experiments": [
        _without(EXPERIMENT, "learners"), {**EXPERIMENT, "learners": []},
        {**EXPERIMENT, "learners": ["nb", "nb"]}, {**EXPERIMENT, "fading": 0},
        {**EXPERIMENT, "fading": 1.5}, {**EXPERIMENT, "window": 0}, {**EXPERIMENT, "task": "x"},
    ],
    "checkpoints": [{"ts": 1.0}, {"stream": ""}, {**CHECKPOINT, "seq": -3}],
}  # fmt: skip


def test_every_topic_kind_has_a_valid_schema() -> None:
    assert set(schemas.KINDS) == set(TOPIC_KINDS)
    for name in schemas.KINDS + schemas.SHARED:
        Draft202012Validator.check_schema(schemas.schema(name))
        assert schemas.schema(name)["$schema"].endswith("2020-12/schema")
    for kind in schemas.KINDS:
        bundled = json.dumps(schemas.bundled_schema(kind))
        assert "$ref" not in bundled
    with pytest.raises(ValueError, match="unknown"):
        schemas.validate("nope", {})


@pytest.mark.parametrize("kind", schemas.KINDS)
def test_valid_messages(kind: str) -> None:
    for message in VALID[kind]:
        assert schemas.validate(kind, message) is None, message
        assert schemas.validate(kind, message, reference=True) is None, message
        assert codec.decode(kind, codec.encode(message)) == (message, None)


@pytest.mark.parametrize("kind", schemas.KINDS)
def test_invalid_messages(kind: str) -> None:
    for message in INVALID[kind]:
        fast = schemas.validate(kind, message)
        ref = schemas.validate(kind, message, reference=True)
        assert fast is not None and ref is not None, (message, fast, ref)
        assert len(fast) <= 200 and len(ref) <= 200


def test_reasons_are_readable() -> None:
    assert schemas.validate("labels", _without(LABEL, "y")) == "missing property 'y'"
    assert schemas.validate("features", {**FEATURE, "extra": 1}) == "unexpected property 'extra'"
    assert "x.bad" in (schemas.validate("features", _with_x(None)) or "")
    assert "end" in (schemas.validate("features", {**END, "end": False}) or "")
    assert "kappa" not in (schemas.validate("metrics", METRICS) or "")
    reason = schemas.validate("metrics", {**METRICS, "metrics": {"accuracy": "high"}})
    assert reason is not None and reason.startswith("metrics.accuracy")


def test_non_finite_numbers_are_rejected_everywhere() -> None:
    nan, inf = float("nan"), float("inf")
    cases = [
        ("features", {**FEATURE, "ts": nan}),
        ("features", _with_x(inf)),
        ("features", _with_x(nan)),
        ("labels", {**LABEL, "y": -inf}),
        ("features", {**END, "ts": inf}),
        ("predictions", {**PREDICTION, "y_pred": nan}),
        ("predictions", {**PREDICTION, "score": inf}),
        ("metrics", {**METRICS, "metrics": {"accuracy": nan}}),
        ("drift", {**DRIFT, "statistic": inf}),
    ]
    for kind, message in cases:
        assert schemas.validate(kind, message) is not None, message
        assert schemas.validate(kind, message, reference=True) is not None, message
    # the codec writes them as null (its NaN policy), which these schemas then refuse
    assert codec.encode({"a": nan, "b": [-inf, 1.5]}) == b'{"a":null,"b":[null,1.5]}'
    # Python's json would accept these tokens; the wire format does not.
    for token in (b"NaN", b"Infinity", b"-Infinity"):
        raw = b'{"stream":"s","id":"1","ts":%s,"x":{},"seq":0}' % token
        message, reason = codec.decode("features", raw)
        assert message is None and reason is not None and "invalid JSON" in reason


def test_decode_failures() -> None:
    big = codec.encode({**FEATURE, "x": {f"f{i}": "v" * 100 for i in range(11000)}})
    assert len(big) > schemas.MAX_MESSAGE_BYTES
    cases = {
        None: "empty message",
        b"": "empty message",
        big: "too large",
        b"{not json": "invalid JSON",
        b"\xff\xfe{}": "invalid JSON",
        b"[1, 2]": "not a JSON object",
        b'"text"': "not a JSON object",
        b'{"stream": "s"}': "missing property",
    }
    for raw, expected in cases.items():
        message, reason = codec.decode("features", raw)
        assert message is None and reason is not None and reason.startswith(expected), raw
    assert codec.decode("features", bytearray(codec.encode(FEATURE)))[0] == FEATURE
    assert codec.decode("labels", codec.encode(LABEL).decode())[0] == LABEL


def test_pipeline_objects_conform() -> None:
    """What the core and the replay producer emit passes the topic schemas."""
    fe = FeatureEvent("s", "1", 0.0, {"a": 1.0, "b": float("nan"), "c": "x"}, 0)
    le = LabelEvent("s", "1", 1.0, "yes", 1)
    eos = EndOfStream("s", 2.0, 2, 2)
    assert schemas.validate("features", feature_message(fe)) is None
    assert schemas.validate("labels", label_message(le)) is None
    for kind in ("features", "labels"):
        assert schemas.validate(kind, end_message(eos)) is None
        assert schemas.validate(kind, end_message(eos), reference=True) is None
    pred = PredictionEvent("s", "ht", "1", 0.0, "first", "yes", 0).to_dict()
    assert schemas.validate("predictions", pred) is None
    assert schemas.validate("drift", DriftEvent("s", "ht", "ph", 5, 1.0, 12.5).to_dict()) is None
    config = ExperimentConfig(
        stream="s",
        learners=["nb", "ta:ht"],
        window=100,
        fading=0.99,
        reeval_k=5,
        bins=10,
        detectors=["ph"],
        dataset="electricity",
    )
    assert schemas.validate("experiments", config.to_dict()) is None
    assert schemas.validate("experiments", ExperimentConfig("s", ["nb"]).to_dict()) is None


def test_deadletter_record_conforms() -> None:
    record = schemas.deadletter_record(
        "invalid JSON", kind="features", topic="t", partition=1, offset=7,
        payload=b"\xff" + b"x" * 9000, error=ValueError("bad"), key=b"s", ts=1.0,
    )  # fmt: skip
    assert schemas.validate("deadletter", record) is None
    assert record["truncated"] and len(record["payload"]) == schemas.PAYLOAD_LIMIT
    assert record["payload"].startswith("\ufffd") and record["error"] == "bad"
    short = schemas.deadletter_record("r", kind="labels", topic="t", partition=0, offset=0,
                                      payload="{}")  # fmt: skip
    assert schemas.validate("deadletter", short) is None and not short["truncated"]


# -- fast checkers agree with jsonschema on JSON-decoded messages ------------------------------

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, 1.0, -1.0, 2.5]),
    st.text(max_size=3), st.sampled_from(["", "s", "x" * 256, "x" * 257, "UP", "true"]),
)  # fmt: skip
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)
_KEYS = ["stream", "id", "ts", "x", "y", "seq", "end", "n_events", "learner", "kind",
         "y_pred", "bin", "extra"]  # fmt: skip


@st.composite
def _mutants(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A valid message with a few fields deleted, added or replaced by random values."""
    kind = draw(st.sampled_from(["features", "labels", "predictions"]))
    base = copy.deepcopy(draw(st.sampled_from(VALID[kind])))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["set", "delete", "x"]))
        key = draw(st.sampled_from(_KEYS))
        if op == "delete":
            base.pop(key, None)
        elif op == "x" and isinstance(base.get("x"), dict):
            base["x"][draw(st.sampled_from(["a", "", "new"]))] = draw(_values)
        else:
            base[key] = draw(_values)
    return kind, json.loads(json.dumps(base))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutants())
def test_fast_checkers_agree_with_json_schema(case: tuple[str, dict[str, Any]]) -> None:
    kind, message = case
    fast = schemas.validate(kind, message)
    ref = schemas.validate(kind, message, reference=True)
    assert (fast is None) == (ref is None), (kind, message, fast, ref)


_EXPERIMENT_KEYS = [
    "stream", "learners", "dataset", "task", "delay", "reeval_k", "bins", "window", "fading",
    "weights", "detectors", "drift_reset", "positive", "auc_window", "pending_cap",
    "snapshot_every", "max_lag", "seed", "drift_points", "limit", "features", "protocol",
    "classes", "stop_at_labels", "extra",
]  # fmt: skip
_EXPERIMENT_VALUES = st.one_of(
    _values, st.sampled_from([0, 1, 2, 2**63, -(2**63) - 1, 0.5, 1.0, 3.0, 1e-300]),
    st.sampled_from(["classification", "regression", "papers", "moa", "natural", "time:60"]),
    st.lists(st.sampled_from(["nb", "ht", "", "nb"]), max_size=3),
    st.lists(st.integers(-2, 3), max_size=3), st.lists(st.text(max_size=2), max_size=2),
)  # fmt: skip


@st.composite
def _experiment_mutants(draw: st.DrawFn) -> dict[str, Any]:
    """A valid definition with a few properties deleted, added or set to random values."""
    base = copy.deepcopy(draw(st.sampled_from(VALID["experiments"])))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(_EXPERIMENT_KEYS))
        if draw(st.booleans()):
            base.pop(key, None)
        else:
            base[key] = draw(_EXPERIMENT_VALUES)
    decoded: dict[str, Any] = json.loads(json.dumps(base))
    return decoded


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_experiment_mutants())
def test_the_experiment_form_accepts_only_what_the_schema_accepts(message: dict[str, Any]) -> None:
    """The form is a narrowing of experiments.json (and the reasons are the schema's)."""
    from streameval.schemas.experiment_form import in_common_form

    ref = schemas.validate("experiments", message, reference=True)
    if in_common_form(message):
        assert ref is None, (message, ref)
    assert schemas.validate("experiments", message) == ref


def test_definitions_run_makes_are_in_the_common_form() -> None:
    """What ``run`` submits takes the form's way, not jsonschema's (its import is the cost)."""
    from streameval.pipeline.config import ExperimentConfig
    from streameval.schemas.experiment_form import in_common_form

    from streameval.bench.plans import NB_METRICS, experiment_config

    for message in VALID["experiments"]:
        assert in_common_form(json.loads(json.dumps(message))), message
    config = ExperimentConfig.from_dict(
        {**experiment_config("electricity", ["nb", "ta:ht"], limit=None, **NB_METRICS),
         "stream": "s", "reeval_k": 10, "bins": 5, "detectors": ["ph"], "seed": 3}
    )  # fmt: skip
    assert in_common_form(config.to_dict())  # what run checks before it submits
    assert in_common_form(json.loads(codec.encode(config.to_dict())))  # what its worker reads


def test_fixed_corpus_agreement() -> None:
    # Python values JSON has no form for: a tuple is no array to the schema
    python = [{**EXPERIMENT, key: ("nb",)} for key in ("learners", "detectors", "features")]
    for message in VALID["experiments"] + INVALID["experiments"] + python:
        if not any(isinstance(v, tuple) for v in message.values()):
            message = json.loads(json.dumps(message))
        assert schemas.validate("experiments", message) == schemas.validate(
            "experiments", message, reference=True
        ), message
    for kind in ("features", "labels", "predictions"):
        for message in VALID[kind] + INVALID[kind]:
            if isinstance(message, dict):
                message = json.loads(json.dumps(message))
            fast = schemas.validate(kind, message)
            ref = schemas.validate(kind, message, reference=True)
            assert (fast is None) == (ref is None), (kind, message, fast, ref)
