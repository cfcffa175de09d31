"""First predictions put off to the next batched call give the results of one call each.

With re-evaluation, an :class:`~streameval.pipeline.experiment.Experiment` that emits no
prediction events and keeps no AUC makes the learners' first predictions in the next
round's batched call instead of one call per instance at the features. Nothing learns in
between, so every number must be the same as with one call per instance: the whole
results document (every bin, counter and indicator) and every output, whatever comes
between the features and that call (a feature update, the instance's own label, a
pickle, a request for results, the end of the stream), and an instance evicted while it
waits needs none.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import prepare, schedule
from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent
from streameval.pipeline.experiment import MAX_DEFERRED, Experiment
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay
from streameval.pipeline.streams.schedule import replay_schedule

LEARNERS = ["nochange", "majority", "nb", "ht", "ta:nb", "tc:ht"]


def _pair(config: ExperimentConfig) -> tuple[Experiment, Experiment]:
    """The experiment as built (first predictions put off) and one calling per instance."""
    deferred, each = Experiment(config), Experiment(config)
    assert deferred._defer_firsts, "this configuration must put first predictions off"
    each._defer_firsts = False
    return deferred, each


def _same_run(config: ExperimentConfig, events: list[InputEvent]) -> dict[str, Any]:
    deferred, each = _pair(config)
    waited = 0
    for ev in events:
        assert deferred.process(ev) == each.process(ev)
        waited = max(waited, len(deferred._deferred))
    assert 0 < waited < MAX_DEFERRED  # some waited; never more than the bound
    got, want = deferred.results(), each.results()
    got.pop("runtime", None)
    want.pop("runtime", None)
    assert got == want
    return got


def _crafted(n: int, n_classes: int = 3) -> list[Instance]:
    """Runs of equal labels, two informative features."""
    out = []
    for i in range(n):
        c = (i // 5) % n_classes
        x = {"a": c + 0.1 * (i % 4), "b": float((i * 7) % 11) - c}
        out.append(Instance(str(i), float(i), x, f"c{c}"))
    return out


@pytest.mark.parametrize(
    ("delay", "k", "protocol"),
    [(0, 1, "papers"), (1, 1, "papers"), (9, 3, "papers"), (40, 10, "papers"), (40, 7, "moa")],
)
def test_crafted_stream_same_results(delay: int, k: int, protocol: str) -> None:
    config = ExperimentConfig(
        "s",
        LEARNERS,
        reeval_k=k,
        bins=5,
        window=25,
        protocol=protocol,
        classes=["c0", "c1", "c2"],
        snapshot_every=17,
    )
    events = list(replay_schedule("s", _crafted(300), InstanceDelay(delay)))
    res = _same_run(config, events)
    assert res["n_labelled"] == 300


def test_covtype_prefix_same_results(data_dir: Path) -> None:
    config = ExperimentConfig(
        "c", LEARNERS, dataset="covtype", limit=1500, delay="200", reeval_k=10, bins=8
    )
    dataset, config = prepare(config, data_dir)
    res = _same_run(config, list(schedule(config, dataset)))
    assert res["overhead"]["n_repredictions"] > 10_000


def _hand_events() -> list[InputEvent]:
    """Updates of a waiting instance, a label before any learning since its features, an
    unknown label, and more arrivals than the pending cap."""
    evs: list[InputEvent] = []
    t = 0.0

    def feat(uid: str, a: float) -> None:
        nonlocal t
        t += 1
        evs.append(FeatureEvent("s", uid, t, {"a": a, "b": -a}, len(evs)))

    def label(uid: str, y: str) -> None:
        nonlocal t
        t += 1
        evs.append(LabelEvent("s", uid, t, y, len(evs)))

    for i in range(6):  # the learners learn both classes
        feat(f"w{i}", float(i))
        label(f"w{i}", "u" if i < 3 else "v")
    feat("p", 1.0)
    feat("p", 5.0)  # updated before its first prediction was made
    label("p", "u")  # labelled before any learner learned since its features
    for i in range(12):  # the cap (4) evicts waiting instances
        feat(f"q{i}", float(i % 3))
    label("zzz", "v")  # unknown
    for i in range(8, 12):
        feat(f"q{i}", float(i))  # pending ones updated
        label(f"q{i}", "u" if i % 2 else "v")
    for i in range(30):
        feat(f"r{i}", float(i % 5))
        if i >= 3:
            label(f"r{i - 3}", "u" if (i // 4) % 2 else "v")
    evs.append(EndOfStream("s", t + 1, len(evs)))
    return evs


def test_updates_evictions_and_early_labels_same_results() -> None:
    config = ExperimentConfig("s", LEARNERS, reeval_k=2, bins=3, pending_cap=4)
    res = _same_run(config, _hand_events())
    assert res["counters"]["feature_updates"] == 5
    assert res["counters"]["unknown_labels"] == 1
    assert res["overhead"]["evicted"] == 8


def test_pickle_and_results_while_first_predictions_wait() -> None:
    """A checkpoint taken with first predictions waiting resumes to the same results,
    and results asked mid-stream count the entries they will hold."""
    config = ExperimentConfig("s", LEARNERS, reeval_k=4, bins=4, window=20)
    events = list(replay_schedule("s", _crafted(200), InstanceDelay(15)))
    cut = next(i for i in range(100, 200) if isinstance(events[i], FeatureEvent)) + 1
    deferred, each = _pair(config)
    for ev in events[:cut]:
        deferred.process(ev)
        each.process(ev)
    assert deferred._deferred  # a feature event last: its first predictions wait
    resumed = pickle.loads(pickle.dumps(deferred))
    mid, mid_each = deferred.results(), each.results()
    assert not deferred._deferred
    for doc in (mid, mid_each):
        doc.pop("runtime", None)
    assert mid == mid_each
    for ev in events[cut:]:
        resumed.process(ev)
        each.process(ev)
    got, want = resumed.results(), each.results()
    got.pop("runtime", None)
    want.pop("runtime", None)
    assert got == want


@pytest.mark.parametrize(
    ("kw", "emit"),
    [
        ({"reeval_k": None}, False),
        ({"reeval_k": 3}, True),
        ({"reeval_k": 3, "positive": "c1"}, False),
    ],
)
def test_first_predictions_wait_only_when_nothing_needs_them(kw: dict, emit: bool) -> None:
    """Without re-evaluation there is no batched call to wait for; prediction events and
    AUC scores need each first prediction when its features arrive."""
    config = ExperimentConfig("s", ["nb"], **kw)
    exp = Experiment(config, emit_predictions=emit)
    assert not exp._defer_firsts
    exp.process(FeatureEvent("s", "a", 0.0, {"a": 1.0}, 0))
    assert not exp._deferred and "nb" in exp.buffer.get("a").history


def test_without_labels_first_predictions_are_made_every_max_deferred_arrivals() -> None:
    config = ExperimentConfig("s", ["nb", "ht"], reeval_k=3)
    exp = Experiment(config)
    n = 2 * MAX_DEFERRED + MAX_DEFERRED // 2
    for i in range(n):
        exp.process(FeatureEvent("s", str(i), float(i), {"a": float(i)}, i))
    made = [uid for uid in map(str, range(n)) if "nb" in exp.buffer.get(uid).history]
    assert made == [str(i) for i in range(2 * MAX_DEFERRED)]
    assert list(exp._deferred) == [str(i) for i in range(2 * MAX_DEFERRED, n)]
