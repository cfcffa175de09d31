"""Operator-registered learners: entry points, ``[learners]``, and what a worker refuses.

An experiment message may name a learner the worker's operator registered, and nothing
else off the allow-list: a worker without the registration refuses the same message.
The end-to-end test runs a registered class in a real worker process on the embedded
broker and compares its results with ``evaluate`` of the same class in-process.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from streameval.agents.codec import encode
from streameval.agents.config import KafkaSettings
from streameval.agents.run import (
    ResultsWaiter,
    replay_dataset,
    start_worker,
    stop_worker,
    submit_experiment,
)
from streameval.agents.topics import TopicNames, ensure_topics
from streameval.agents.worker import StreamWorker
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare
from streameval.pipeline.learners.registry import REGISTRY, LearnerRegistry
from streameval.pipeline.learners.spec import build_learner
from streameval.pipeline.spec import SpecError

from streameval.cli.main import main

MODULE = textwrap.dedent(
    """
    from river import tree

    class ShallowTree(tree.HoeffdingTreeClassifier):
        def __init__(self, depth: int = 3):
            super().__init__(max_depth=depth, grace_period=50)
            self.depth = depth

    class NotALearner:
        pass
    """
)
KEY = "registry-test-key-" + "k" * 20


@pytest.fixture
def operator_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``oplearners`` importable here and, through PYTHONPATH, in worker processes."""
    name = f"oplearners_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    yield tmp_path / f"{name}.py"
    REGISTRY.unregister("shallow")


def test_a_registered_class_is_a_model_in_every_spec(operator_module: Path) -> None:
    registry = LearnerRegistry(entry_points=False)
    registry.register("shallow", f"{operator_module.stem}:ShallowTree")
    learner = registry.build("shallow", {"depth": 2}, "classification")
    assert learner.model.max_depth == 2 and learner.model.grace_period == 50
    with pytest.raises(SpecError, match="shallow"):
        build_learner("shallow", context=None)  # the process registry does not have it
    REGISTRY.register("shallow", f"{operator_module.stem}.ShallowTree")
    wrapped = build_learner("ta2:shallow[depth=4]", context=None)
    assert wrapped.n_labels == 2 and wrapped.model.model.max_depth == 4
    with pytest.raises(SpecError, match=r"registered learner 'shallow'.*depht"):
        build_learner("shallow[depht=4]", context=None)
    with pytest.raises(ValueError, match="built-in learner"):
        registry.register("ht", f"{operator_module.stem}:ShallowTree")
    with pytest.raises(ValueError, match="cannot import"):
        registry.register("other", f"{operator_module.stem}:Missing")
    with pytest.raises(ValueError, match="lower case"):
        registry.register("Bad-Name", f"{operator_module.stem}:ShallowTree")
    registry.register("notone", f"{operator_module.stem}:NotALearner")
    with pytest.raises(SpecError, match="not a classification learner"):
        registry.build("notone", {}, "classification")


def test_entry_points_of_installed_packages_are_read(
    tmp_path: Path, operator_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "opmodels-1.0.dist-info"  # what pip writes for an installed package
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: opmodels\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[streameval.learners]\nshallowep = {operator_module.stem}:ShallowTree\n"
    )
    registry = LearnerRegistry()
    assert "shallowep" in registry.names()
    assert registry.build("shallowep", {}, "classification").model.max_depth == 3


def _worker() -> tuple[StreamWorker, list[tuple[str, bytes, bytes]]]:
    sent: list[tuple[str, bytes, bytes]] = []

    class Producer:
        def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any = None) -> None:
            sent.append((topic, key, value))

        def poll(self, timeout: float = 0.0) -> int:
            return 0

        def flush(self, timeout: float | None = None) -> int:
            return 0

    settings = KafkaSettings(bootstrap_servers="127.0.0.1:1", topic_prefix="reg.")
    return StreamWorker(settings, key=KEY.encode(), producer=Producer(), checkpoints=False), sent


def test_a_worker_refuses_a_name_it_has_not_registered(operator_module: Path) -> None:
    message = encode({"stream": "s", "learners": ["nochange", "shallow"]})
    worker, sent = _worker()
    worker.handle("experiments", message, b"s", 0, 3)
    [letter] = [json.loads(v) for t, _, v in sent if t == "reg.deadletter"]
    assert letter["kind"] == "bad_experiment" and letter["offset"] == 3
    assert "unknown classification learner 'shallow'" in letter["reason"]
    assert "s" not in worker.runners
    REGISTRY.register("shallow", f"{operator_module.stem}:ShallowTree")
    worker, sent = _worker()
    worker.handle("experiments", message, b"s", 0, 3)
    assert "s" in worker.runners and not [t for t, _, _ in sent if t == "reg.deadletter"]


def test_the_config_files_learners_section_registers_and_is_checked(
    tmp_path: Path, operator_module: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[learners]\nshallow = "{operator_module.stem}:ShallowTree"\n')
    out = tmp_path / "r.json"
    args = ["evaluate", "--config", str(config), "--dataset", "electricity[n=600]"]
    assert main([*args, "--learner", "shallow[depth=2]", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["config"]["learners"] == ["shallow[depth=2]"]
    config.write_text('[learners]\nbroken = "nowhere_at_all:Model"\n')
    assert main([*args, "--learner", "nb"]) == 2
    err = capsys.readouterr().err
    assert "c.toml:2: cannot import 'nowhere_at_all:Model'" in err
    config.write_text("[learners]\nnumber = 3\n")
    with pytest.raises(SystemExit):
        main([*args, "--learner", "nb"])
    assert "[learners] number must be a str" in capsys.readouterr().err


@pytest.mark.kafka
@pytest.mark.slow
def test_a_registered_learner_runs_on_the_worker_and_an_unregistered_one_is_refused(
    kafka_settings: KafkaSettings, operator_module: Path, tmp_path: Path
) -> None:
    REGISTRY.register("shallow", f"{operator_module.stem}:ShallowTree")  # for submit's checks
    config = tmp_path / "worker.toml"
    config.write_text(f'[learners]\nshallow = "{operator_module.stem}:ShallowTree"\n')
    stream = f"reg-{uuid.uuid4().hex[:6]}"
    experiment = ExperimentConfig(
        stream=stream,
        learners=["nochange", "shallow[depth=2]", "ta:shallow"],
        dataset="electricity",
        limit=1500,
        delay="48",
        window=500,
    )
    reference = evaluate_config(experiment)
    results = {}
    for registered in (True, False):
        prefix = f"reg{uuid.uuid4().hex[:6]}."
        settings = replace(kafka_settings, topic_prefix=prefix)
        ensure_topics(settings.confluent_config(), settings.partitions, prefix=prefix)
        waiter = ResultsWaiter(settings, stream)
        extra = ["--config", str(config)] if registered else []
        log = tmp_path / f"worker-{registered}.log"
        worker = start_worker(
            settings, {"STREAMEVAL_CHECKPOINT_KEY": KEY}, log_path=log, extra_args=extra
        )
        try:
            submit_experiment(settings, prepare(experiment)[1])
            replay_dataset(settings, experiment, speed=None, pack=100, progress=False)
            if registered:
                results = waiter.wait(180, alive=lambda w=worker: w.poll() is None)
            else:
                letter = _wait_deadletter(settings, "bad_experiment")
        finally:
            stop_worker(worker)
            if not registered:
                waiter.consumer.close()  # wait() closes it when results come
    for doc in (results, reference):
        for key in ("stream", "runtime", "ingest", "curves"):
            doc.pop(key, None)
        doc["config"].pop("stream")
    assert results == reference
    assert "unknown classification learner 'shallow'" in letter["reason"]


def _wait_deadletter(settings: KafkaSettings, kind: str, timeout: float = 120.0) -> dict:
    import time

    from confluent_kafka import Consumer

    topic = TopicNames.for_prefix(settings.topic_prefix).deadletter
    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"reg-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                letter = json.loads(msg.value())
                if letter["kind"] == kind:
                    return letter
    finally:
        consumer.close()
    raise TimeoutError(f"no {kind} deadletter on {topic} within {timeout} s")
