"""Abuse of the Kafka-facing surface: remote learner specs, forged checkpoints, leaked secrets.

* Learner and detector specs arrive in experiments messages, from anyone who can write the
  topic: only the allow-list is built; ``import[...]`` is refused (and nothing is imported)
  unless a *local* caller passes ``allow_import=True``.
* A checkpoint is a pickle: one whose HMAC does not verify is refused with
  :class:`~streameval.agents.checkpoint.CheckpointError` before anything is unpickled.
* A SASL password never reaches a log line, a repr or the worker's startup output.
* The dashboard binds to loopback unless told otherwise.
"""

from __future__ import annotations

import base64
import importlib
import ipaddress
import json
import logging
import pickle
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from streameval.agents.checkpoint import (
    CheckpointError,
    CheckpointReader,
    dumps,
    loads,
    sign,
    to_messages,
)
from streameval.agents.codec import encode
from streameval.agents.config import KafkaSettings, redact_config
from streameval.agents.worker import StreamWorker
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.drift.spec import build_detector
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.learners.spec import build_learner
from streameval.pipeline.runner import StreamRunner
from streameval.pipeline.spec import SpecError

KEY = b"test-checkpoint-key-0123456789abcdef"
SECRET = "pa55-Sekret-7f3a"  # a SASL password that must never be printed


class RecordingProducer:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes, bytes]] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any = None) -> None:
        self.messages.append((topic, key, value))

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        return 0


def worker() -> tuple[StreamWorker, RecordingProducer]:
    producer = RecordingProducer()
    settings = KafkaSettings(bootstrap_servers="127.0.0.1:1", topic_prefix="sec.")
    return StreamWorker(settings, key=KEY, producer=producer), producer


def deadletters(producer: RecordingProducer) -> list[dict[str, Any]]:
    return [json.loads(v) for t, _, v in producer.messages if t == "sec.deadletter"]


@pytest.fixture
def trap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A module that leaves a marker file when imported, and a spy on ``import_module``."""
    package = tmp_path / "trap_pkg"
    package.mkdir()
    marker = tmp_path / "imported.marker"
    (package / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "class Learner:\n    def __init__(self, **kw):\n        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    calls: list[str] = []
    real = importlib.import_module

    def spy(name: str, package: str | None = None) -> Any:
        calls.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", spy)
    return {"marker": marker, "calls": calls, "path": "trap_pkg.Learner"}


# -- learner specs from experiments messages ------------------------------------------------------


@pytest.mark.parametrize(
    "learners, detectors",
    [
        (["import[path=os.system]"], []),
        (["nochange", "import[path=trap_pkg.Learner]"], []),
        (["ta:import[path=trap_pkg.Learner]"], []),
        (["nochange"], ["import[path=trap_pkg.Learner]"]),
        (["evil"], []),
        (["nb[__class__=1]"], []),
        (["ht[grace_period=os.system]"], []),
    ],
)
def test_experiment_with_a_spec_off_the_allow_list_is_refused_and_imports_nothing(
    trap: dict[str, Any], learners: list[str], detectors: list[str]
) -> None:
    w, producer = worker()
    message = {"stream": "s", "learners": learners, "detectors": detectors}
    w.handle("experiments", encode(message), b"s", 0, 7)
    assert "s" not in w.runners
    [letter] = deadletters(producer)
    assert letter["kind"] == "bad_experiment" and letter["offset"] == 7
    assert letter["reason"].startswith("experiment refused: ")
    if any("import[" in spec for spec in learners):
        assert "import[...] is disabled" in letter["reason"]
    if detectors:  # there is no import for detectors at all
        assert "unknown drift detector 'import'" in letter["reason"]
    assert not trap["marker"].exists()
    assert "trap_pkg" not in sys.modules and "trap_pkg" not in trap["calls"]
    # events for the refused stream wait, then go to the deadletter: never to a learner
    w.handle(
        "features", encode({"stream": "s", "id": "1", "ts": 0, "x": {"a": 1}, "seq": 0}), b"s", 0, 0
    )
    w.parking.timeout = -1.0
    w.tick()
    assert [d["kind"] for d in deadletters(producer)] == ["bad_experiment", "unknown_stream"]


def test_a_message_cannot_switch_allow_import_on(trap: dict[str, Any]) -> None:
    w, producer = worker()
    message = {"stream": "s", "learners": [f"import[path={trap['path']}]"], "allow_import": True}
    w.handle("experiments", encode(message), b"s", 0, 0)
    [letter] = deadletters(producer)
    assert letter["kind"] == "bad_experiment" and "allow_import" in letter["reason"]
    assert not trap["marker"].exists() and "trap_pkg" not in trap["calls"]


def test_import_is_refused_on_every_remote_path(trap: dict[str, Any]) -> None:
    """ExperimentConfig -> Experiment / StreamRunner, detectors: never with allow_import."""
    spec = f"import[path={trap['path']}]"
    for build in (
        lambda: Experiment(ExperimentConfig("s", [spec])),
        lambda: StreamRunner(ExperimentConfig("s", ["nochange"], detectors=[spec])),
        lambda: build_learner(spec, context=None),
        lambda: build_learner(f"ta:{spec}", context=None),
        lambda: build_detector(spec),
    ):
        with pytest.raises(SpecError):
            build()
    assert not trap["marker"].exists() and "trap_pkg" not in trap["calls"]


def test_allow_import_works_for_a_local_caller(trap: dict[str, Any]) -> None:
    learner = build_learner(
        "import[path=river.naive_bayes.GaussianNB]", context=None, allow_import=True
    )
    learner.learn_one({"a": 1.0}, "x", at=0)
    assert learner.predict_proba_one({"a": 1.0}, at=1)
    assert "river.naive_bayes" in trap["calls"]
    with pytest.raises(SpecError, match="import"):  # still checked: a class, a path
        build_learner("import[path=nodots]", context=None, allow_import=True)


# -- checkpoints ----------------------------------------------------------------------------------


class Bomb:
    """A pickle that writes a file when loaded: proof of whether anything was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('unpickled')",))


def flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def test_the_bomb_goes_off_when_signed_properly(tmp_path: Path) -> None:
    """The control: a validly signed bomb is unpickled (so the tests below prove something)."""
    marker = tmp_path / "boom"
    blob, signature = dumps(Bomb(marker), KEY)
    loads(blob, signature, KEY)
    assert marker.read_text() == "unpickled"


@pytest.mark.parametrize(
    "tamper",
    [
        "data-first-byte",
        "data-middle-byte",
        "data-last-byte",
        "data-truncated",
        "data-extended",
        "hmac-flipped",
        "hmac-uppercase",
        "hmac-empty",
        "hmac-non-ascii",
        "hmac-none",
        "other-key",
    ],
)
def test_tampered_checkpoint_is_refused_before_unpickling(tmp_path: Path, tamper: str) -> None:
    marker = tmp_path / "boom"
    blob, signature = dumps(Bomb(marker), KEY)
    key = KEY
    if tamper.startswith("data-"):
        where = {"first": 0, "middle": len(blob) // 2, "last": len(blob) - 1}
        kind = tamper.split("-")[1]
        if kind in where:
            blob = flip(blob, where[kind])
        elif kind == "truncated":
            blob = blob[:-1]
        else:
            blob = blob + b"."
    elif tamper == "hmac-flipped":
        signature = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    elif tamper == "hmac-uppercase":
        signature = signature.upper()
    elif tamper == "hmac-empty":
        signature = ""
    elif tamper == "hmac-non-ascii":
        signature = "é" * len(signature)
    elif tamper == "hmac-none":
        signature = None  # type: ignore[assignment]
    else:
        key = b"another-key"
    with pytest.raises(CheckpointError, match=r"HMAC does not match.*nothing was unpickled"):
        loads(blob, signature, key)
    assert not marker.exists()


def test_checkpoint_reader_refuses_a_forged_part(tmp_path: Path) -> None:
    marker = tmp_path / "boom"
    state = {"runner": "pretend", "payload": b"x" * 600_000}  # several parts
    blob, signature = dumps(state, KEY)
    parts = to_messages("s", 3, blob, signature)
    assert len(parts) > 2

    reader = CheckpointReader()
    for part in parts:
        reader.add(part)
    assert reader.load("s", KEY) == state  # intact: loads

    # an attacker swaps one part for a bomb, keeping the stream, id and hmac
    bomb = pickle.dumps(Bomb(marker))
    forged = [dict(p) for p in parts]
    forged[0]["data"] = base64.b64encode(bomb).decode()
    reader = CheckpointReader()
    for part in forged:
        reader.add(part)
    with pytest.raises(CheckpointError, match="nothing was unpickled"):
        reader.load("s", KEY)
    # ... or writes a whole checkpoint of its own, with a newer id and its own "signature"
    reader = CheckpointReader()
    for part in [*parts, *to_messages("s", 4, bomb, sign(bomb, b"guessed-key"))]:
        reader.add(part)
    with pytest.raises(CheckpointError):
        reader.load("s", KEY)
    assert not marker.exists()


@pytest.mark.parametrize(
    "change",
    [{"part": 5}, {"part": -1}, {"parts": 0}, {"data": "not base64!"}, {"id": "x"}],
)
def test_checkpoint_reader_rejects_malformed_parts(change: dict[str, Any]) -> None:
    """What ``read_checkpoints`` skips with a warning: never a half-assembled checkpoint."""
    blob, signature = dumps({"a": 1}, KEY)
    [part] = to_messages("s", 1, blob, signature)
    reader = CheckpointReader()
    with pytest.raises((ValueError, KeyError, TypeError)):
        reader.add({**part, **change})
    assert reader.latest == {}


# -- secrets ---------------------------------------------------------------------------------

SASL_ENV = {
    "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
    "KAFKA_SASL_USERNAME": "streameval",
    "KAFKA_SASL_PASSWORD": SECRET,
    "KAFKA_SSL_KEY_PASSWORD": SECRET + "-key",
}


def test_settings_never_show_the_password(caplog: pytest.LogCaptureFixture) -> None:
    settings = KafkaSettings.from_env(SASL_ENV)
    assert settings.confluent_config()["sasl.password"] == SECRET  # librdkafka needs it...
    shown = [
        repr(settings),
        str(settings),
        f"{settings}",
        json.dumps(settings.redacted()),
        json.dumps(redact_config(settings.confluent_config())),
        repr(settings.faust_broker_kwargs()),
    ]
    log = logging.getLogger("streameval.test")
    with caplog.at_level(logging.DEBUG):
        log.info("settings %s %r", settings, settings)
        log.info("redacted %s", settings.redacted())
        log.info("config %s", redact_config(settings.confluent_config()))
    for text in [*shown, caplog.text]:
        assert SECRET not in text  # ... and nothing else shows it
    assert settings.redacted()["KAFKA_SASL_PASSWORD"] == "***"
    assert settings.redacted()["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:1"


def test_config_errors_name_the_variable_not_the_secret() -> None:
    for bad in (
        {"KAFKA_SASL_MECHANISM": "BOGUS"},
        {"STREAMEVAL_PARTITIONS": "zero"},
        {"KAFKA_SSL_CERTIFICATE_LOCATION": "/nonexistent.pem"},
    ):
        with pytest.raises(ValueError) as err:
            KafkaSettings.from_env({**SASL_ENV, **bad})
        assert SECRET not in str(err.value)


def test_worker_startup_output_and_logs_hide_the_password(
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``streameval worker`` up to its startup line, with the broker parts stubbed out."""
    import streameval.agents.app

    from streameval.cli.kafka import cmd_worker
    from streameval.cli.main import build_parser

    for name, value in {**SASL_ENV, "STREAMEVAL_CHECKPOINT_KEY": "k" * 32}.items():
        monkeypatch.setenv(name, value)
    started: dict[str, Any] = {}
    monkeypatch.setattr(StreamWorker, "restore", lambda self: 0)
    monkeypatch.setattr(
        streameval.agents.app,
        "create_app",
        lambda settings, worker, **kw: started.update(kw) or "app",
    )
    monkeypatch.setattr(streameval.agents.app, "run_app", lambda app, **kw: started.update(run=kw))
    args = build_parser().parse_args(["worker", "--loglevel", "debug"])
    with caplog.at_level(logging.DEBUG):
        assert cmd_worker(args) == 0
    out, err = capfd.readouterr()
    assert "streameval worker: 127.0.0.1:1, checkpoints of 0 stream(s) found" in err
    for text in (out, err, caplog.text, repr(started)):
        assert SECRET not in text
    assert started["web_host"] == "127.0.0.1" and started["web"] is False


# -- the dashboard binds to loopback by default ----------------------------------------------------


def _listening(port: int) -> set[str]:
    """The local addresses with a socket listening on TCP ``port`` (the kernel's table)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for line in f:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                    continue
                raw = bytes.fromhex(address)
                if width == 8:
                    found.add(".".join(str(b) for b in reversed(raw)))
                else:
                    words = [raw[i : i + 4][::-1].hex() for i in range(0, 16, 4)]
                    found.add(str(ipaddress.IPv6Address(bytes.fromhex("".join(words)))))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.kafka
@pytest.mark.slow
def test_the_web_views_listen_on_loopback_unless_told(kafka_settings, tmp_path: Path) -> None:
    """The real listening socket of a worker's web views: 127.0.0.1 by default, the
    address of ``--web-bind`` when given (``--web-host`` only names the advertised host)."""
    from streameval.agents.run import start_worker, stop_worker

    env = {"STREAMEVAL_CHECKPOINT_KEY": KEY.decode()}
    for bind, expected in ((None, {"127.0.0.1"}), ("0.0.0.0", {"0.0.0.0"})):
        port = _free_port()
        args = ["--web", "--web-port", str(port), "--web-host", "worker.example"]
        args += ["--web-bind", bind] if bind else []
        worker = start_worker(kafka_settings, env, log_path=tmp_path / "w.log", extra_args=args)
        try:
            deadline = time.monotonic() + 120
            while not _listening(port):
                assert worker.poll() is None, (tmp_path / "w.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "the web views never listened"
                time.sleep(0.2)
            assert _listening(port) == expected
        finally:
            stop_worker(worker)


# -- resource bombs in experiments messages -------------------------------------------------------

#: Experiment fields that size a data structure up front. On the compacted experiments topic a
#: crash here is a poison pill: every restarted worker reads the message again.
BOMBS = {
    "window": {"window": 10**10},
    "bins": {"reeval_k": 1, "bins": 10**10},
    "max_lag": {"max_lag": 10**10},
    "ph-window": {"detectors": ["ph[estimator=window,w=10000000000]"]},
    "ratio-window": {"detectors": ["ratio_window[w1=10000000000,w2=10]"]},
    "bins-slow": {"reeval_k": 1, "bins": 10**7},
}
BOMB_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # 3 GiB: fail, don't swap
    from streameval.agents.config import KafkaSettings
    from streameval.agents.worker import StreamWorker
    from streameval.pipeline.events import FeatureEvent, LabelEvent
    from streameval.agents.codec import encode

    class Producer:
        def __init__(self): self.kinds = []
        def produce(self, topic, value, key, on_delivery=None):
            self.kinds.append(json.loads(value).get("kind"))
        def poll(self, t=0): return 0
        def flush(self, t=0): return 0

    out = {}
    for name, extra in json.loads(sys.argv[1]).items():
        p = Producer()
        w = StreamWorker(KafkaSettings(bootstrap_servers="127.0.0.1:1"), key=b"k", producer=p)
        start = time.perf_counter()
        try:
            w.handle("experiments", encode({"stream": name, "learners": ["nochange"], **extra}),
                     name.encode(), 0, 0)
            for i, kind in enumerate(("features", "labels")):
                x = {"stream": name, "id": "1", "ts": 0.0, "seq": i}
                x.update({"x": {"a": 1.0}} if kind == "features" else {"y": "a"})
                w.handle(kind, encode(x), name.encode(), 0, 0)
            refused = {"bad_experiment", "over_budget"} & set(p.kinds)
            outcome = "refused" if refused else "defined"
        except BaseException as exc:
            outcome = "crashed: " + type(exc).__name__
        out[name] = {"outcome": outcome, "seconds": round(time.perf_counter() - start, 2)}
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def bomb_outcomes() -> dict[str, dict[str, Any]]:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", BOMB_SCRIPT, json.dumps(BOMBS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcomes


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_experiment_sized_to_exhaust_memory_is_refused(
    bomb_outcomes: dict[str, dict[str, Any]], bomb: str
) -> None:
    result = bomb_outcomes[bomb]
    assert result["outcome"] == "refused", result
    assert result["seconds"] < 1.0, result


# -- a worker that could never resume refuses to start ---------------------------------------------


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "STREAMEVAL_CHECKPOINT_KEY is not set: a worker without it could never resume"),
        ("", "STREAMEVAL_CHECKPOINT_KEY is not set"),
        ("k" * 31, "STREAMEVAL_CHECKPOINT_KEY is 31 bytes: use at least 32"),
    ],
)
def test_a_worker_without_a_usable_key_refuses_to_start(key: str | None, message: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    if key is not None:
        env["STREAMEVAL_CHECKPOINT_KEY"] = key
    done = subprocess.run(
        [sys.executable, "-m", "streameval.cli", "worker"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "openssl rand -hex 32" in lines[0] and "Traceback" not in done.stderr


def test_ephemeral_says_it_cannot_resume(caplog: pytest.LogCaptureFixture) -> None:
    from streameval.agents.checkpoint import checkpoint_key

    with caplog.at_level(logging.WARNING):
        one = checkpoint_key({}, ephemeral=True)
        two = checkpoint_key({}, ephemeral=True)
    assert len(one) == 32 and one != two  # a fresh random key per process
    assert "cannot resume" in caplog.text
