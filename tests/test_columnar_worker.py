"""The worker's runner on the columnar core, without a broker.

* A packed message taken at once (``StreamRunner.push_message``) gives exactly what its
  events pushed one by one give: outputs, rejections, counts, budgets, results -- on a stream
  that has every kind of bad input and runs against its byte budget, and on one whose
  learner fails half-way.
* ``/metrics`` shows the metrics of the columnar core as they are now (its scorecards are
  only filled when a snapshot is read), equal to the per-event core's at the same label.
* A checkpoint of a columnar stream, written half-way, restores it: the restored runner
  finishes with ``evaluate``'s results.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from prometheus_client import generate_latest
from streameval.agents.checkpoint import CheckpointReader, StreamCheckpoints
from streameval.agents.codec import encode, input_events
from streameval.agents.prometheus import registry_for
from streameval.agents.replay import PackedMessages
from streameval.pipeline.columnar import ColumnarExperiment
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config, prepare, schedule
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.memory import BytePool
from streameval.pipeline.runner import StreamRunner
from test_fuzz_ingest import Exploding, Harness

KEY = b"columnar-worker-checkpoint-key-0123456789"


def messy_messages(
    seed: int, delay: str = "30", pack: int = 7, orphans: bool = True
) -> tuple[ExperimentConfig, list[tuple[str, bytes]]]:
    """An Electricity prefix with a delay, packed ``pack`` events a message, with bad input
    of every kind mixed in: out-of-order and duplicate labels, orphans, unknown ids, wrong
    widths, magnitudes out of range, strings too long, redelivered messages (``orphans``
    False: no features left out and no unknown id, the two kinds that leave labels
    waiting for features that never come)."""
    rng = random.Random(seed)
    dataset, config = prepare(
        ExperimentConfig(
            "messy", ["nochange", "majority", "nb"], dataset="electricity", limit=400,
            delay=delay, window=50, snapshot_every=60,
        )
    )  # fmt: skip
    sides: dict[str, list[dict[str, Any]]] = {"features": [], "labels": []}
    for event in schedule(config, dataset):
        if isinstance(event, EndOfStream):
            end = {"stream": "messy", "end": True, "ts": event.ts, "seq": event.seq}
            end["n_events"] = event.n_events
            continue
        d = event.to_dict()
        kind = "features" if isinstance(event, FeatureEvent) else "labels"
        r = rng.random()
        left_out = kind == "features" and r < 0.03
        if not orphans and (left_out or (kind == "labels" and 0.04 <= r < 0.06)):
            r = 1.0
        if kind == "features" and r < 0.03:
            continue  # its label becomes an orphan
        if kind == "features" and r < 0.06:
            d["x"] = {**d["x"], "extra": 1.0}  # wrong width
        elif kind == "features" and r < 0.08:
            d["x"] = {**d["x"], "nswprice": 1e60}  # out of range
        elif kind == "features" and r < 0.10:
            d["x"] = {**d["x"], "day": "7" * 70}  # too long
        elif kind == "labels" and r < 0.04:
            sides[kind].append(dict(d))  # duplicate label
        elif kind == "labels" and r < 0.06:
            sides[kind].append({**d, "id": f"ghost-{d['id']}"})  # never seen
        sides[kind].append(d)
    for i in range(0, len(sides["labels"]) - 3, 37):  # out of order on the labels topic
        labels = sides["labels"]
        labels[i], labels[i + 2] = labels[i + 2], labels[i]
    f, lab = (
        [(kind, encode(items[i : i + pack])) for i in range(0, len(items), pack)]
        for kind, items in sides.items()
    )
    interleaved: list[tuple[str, bytes]] = []
    while f or lab:  # the two topics interleave anyhow; each keeps its own order
        side = f if f and (not lab or rng.random() < 0.5) else lab
        interleaved.append(side.pop(0))
    for i in rng.sample(range(len(interleaved)), 6):  # redelivered
        interleaved.insert(i + 1, interleaved[i])
    interleaved += [("features", encode(end)), ("labels", encode(end))]
    return config, interleaved


def fed(runner: StreamRunner, messages: list[tuple[str, bytes]], at_once: bool) -> dict[str, Any]:
    """Feed ``messages`` (offsets counted per topic, a redelivery keeps its offset) to
    ``runner`` at once or event by event; what came out."""
    outputs, rejections = [], []
    offsets: dict[str, int] = {"features": 0, "labels": 0}
    seen: dict[bytes, int] = {}
    for kind, raw in messages:
        if (kind, raw) in seen:
            offset = seen[kind, raw]  # type: ignore[index]
        else:
            offset = seen[kind, raw] = offsets[kind]  # type: ignore[index]
            offsets[kind] += 1
        events, reasons = input_events(kind, raw)
        assert not reasons
        if at_once:
            out, rej = runner.push_message(kind, events, 0, offset)
        else:
            out, rej = [], []
            for i, event in enumerate(events):
                o, r = runner.push(kind, event, (0, offset, i))
                out += o
                rej += r
        outputs += [o.to_dict() for o in out]
        rejections += [(r.kind, r.reason, r.event, r.source) for r in rej]
    return {
        "outputs": outputs,
        "rejections": rejections,
        "counts": runner.ingest_counts(),
        "n_outputs": runner.n_outputs,
        "failed": runner.failed,
        "finished": runner.finished,
        "held": runner.held,
        "results": runner.results() if runner.finished else None,
    }


def runner_for(config: ExperimentConfig, pool: BytePool) -> StreamRunner:
    runner = StreamRunner(config, emit_predictions=True, orphan_ttl=5e4)
    runner.bind(pool, 100_000, 60)  # tight: some events are refused; strings of 60 characters
    assert isinstance(runner.experiment, ColumnarExperiment)
    return runner


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_message_at_once_gives_what_its_events_one_by_one_give(seed: int) -> None:
    config, messages = messy_messages(seed)
    pools = BytePool(400_000), BytePool(400_000)
    at_once = fed(runner_for(config, pools[0]), messages, True)
    one_by_one = fed(runner_for(config, pools[1]), messages, False)
    kinds = {r[0] for r in one_by_one["rejections"]}
    # every rule of the guard and the budgets had something to do
    assert {"wrong_width", "out_of_range", "too_long", "duplicate_label"} <= kinds, kinds
    assert {"orphan_label", "over_budget"} <= kinds, kinds
    assert one_by_one["counts"]["redelivered"] > 0 and one_by_one["counts"]["retimed"] > 0
    assert one_by_one["finished"] and one_by_one["results"]["n_labelled"] > 100
    assert at_once == one_by_one
    assert pools[0].held == pools[1].held == at_once["held"]


def test_a_failing_learner_stops_the_stream_alike_at_once_and_one_by_one() -> None:
    config, messages = messy_messages(4)
    got = []
    for at_once in (True, False):
        runner = runner_for(config, BytePool(None))
        experiment = runner.experiment
        experiment.slots[2].learner = Exploding(experiment.slots[2].learner)
        experiment._plan()  # type: ignore[union-attr]  # it binds its learners' methods once
        boom = [(k, raw.replace(b'"y":"UP"', b'"y":"boom"', 1)) for k, raw in messages]
        got.append(fed(runner, boom, at_once))
    assert got[0]["failed"] is not None and "cannot learn boom" in got[0]["failed"]
    assert got[0]["counts"]["after_failure"] > 0
    assert got[0] == got[1]


def electricity_messages(config: ExperimentConfig) -> list[tuple[str, bytes]]:
    dataset, config = prepare(config)
    fmt = PackedMessages(50)
    messages = [m for event in schedule(config, dataset) for m in fmt.add(event)]
    return [(m.kind, m.value) for m in messages + fmt.flush()]


def test_metrics_gauges_are_those_of_now_on_the_columnar_core() -> None:
    """Half-way through a stream, ``/metrics`` equals the per-event core's scorecards after
    the same labels (the columnar core's own cards are not filled before a snapshot)."""
    config = prepare(
        ExperimentConfig(
            "gauges", ["nochange", "nb"], dataset="electricity", limit=2000, delay="24",
            window=200, snapshot_every=0,
        )
    )[1]  # fmt: skip
    h = Harness(checkpoints=False)
    h.send("experiments", encode(config.to_dict()), b"gauges")
    messages = electricity_messages(config)
    for kind, raw in messages[: len(messages) // 2]:
        h.send(kind, raw, b"gauges")
    runner = h.worker.runners["gauges"]
    assert isinstance(runner.experiment, ColumnarExperiment)
    n = runner.experiment.n_labelled
    assert 500 < n < 1500
    text = generate_latest(registry_for(h.worker)).decode()
    reference = Experiment(config)
    for event in schedule(config, prepare(config)[0]):
        if isinstance(event, LabelEvent) and reference.n_labelled == n:
            break
        reference.process(event)
    for slot in reference.slots:
        flat = slot.card.flat()
        for key in ("accuracy", "kappa_per", "kappa_plus", "auc"):
            line = f'streameval_{key}{{learner="{slot.name}",stream="gauges"}}'
            [sample] = [s for s in text.splitlines() if s.startswith(line + " ")]
            assert float(sample.split()[-1]) == pytest.approx(flat[key], rel=1e-12), line
    assert f'streameval_labels_total{{stream="gauges"}} {float(n)}' in text


def test_a_columnar_checkpoint_restores_the_stream_half_way() -> None:
    config = prepare(
        ExperimentConfig(
            "restored", ["nochange", "nb", "ta:ht"], dataset="electricity", limit=1500,
            delay="48", window=300, fading=0.99, snapshot_every=250,
        )
    )[1]  # fmt: skip
    reference = evaluate_config(config)
    assert reference["runtime"]["path"] == "columnar"
    messages = electricity_messages(config)
    runner = StreamRunner(config, emit_predictions=False)
    outputs = []
    for offset, (kind, raw) in enumerate(messages[: len(messages) // 2]):
        outputs += runner.push_message(kind, input_events(kind, raw)[0], 0, offset)[0]
    checkpoints = StreamCheckpoints(KEY)
    reader = CheckpointReader()
    for _, message in checkpoints.parts("restored", runner):
        reader.add(message)
    restoring = StreamCheckpoints(KEY)
    restoring.reader = reader
    restored = restoring.take("restored")
    assert restored is not None and isinstance(restored.experiment, ColumnarExperiment)
    assert restored.n_outputs == runner.n_outputs == len(outputs)
    # the whole stream again: what the checkpoint holds is dropped by its Kafka positions
    for offset, (kind, raw) in enumerate(messages):
        outputs += restored.push_message(kind, input_events(kind, raw)[0], 0, offset)[0]
    assert restored.finished and restored.n_outputs == len(outputs)
    got = copy.deepcopy(restored.results())
    for doc in (got, reference):
        doc.pop("runtime", None)
    assert got == {k: v for k, v in reference.items() if k != "runtime"}
    snapshots = [o.to_dict() for o in outputs]
    assert [s["n_labelled"] for s in snapshots if s["kind"] == "periodic"][:3] == [250] * 3
