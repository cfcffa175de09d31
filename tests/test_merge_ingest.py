"""The watermark merge of the two topics and the ingest guard for bad input."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
from streameval.pipeline.ingest import IngestGuard
from streameval.pipeline.merge import FEATURES, LABELS, EventMerger, topic_of
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.delay import InstanceDelay, TimeDelay
from streameval.pipeline.streams.schedule import replay_schedule


def schedule(n: int, delay, same_time: bool = False):
    rows = [
        Instance(str(i), float(i // 3 if same_time else i), {"x": float(i)}, "ab"[i % 2])
        for i in range(n)
    ]
    return list(replay_schedule("s", rows, delay))


def split(events):
    """What each topic carries: its events, plus the end marker on both."""
    feats = [e for e in events if isinstance(e, FeatureEvent)]
    labels = [e for e in events if isinstance(e, LabelEvent)]
    end = events[-1]
    assert isinstance(end, EndOfStream)
    return [*feats, end], [*labels, end]


def interleave(a, b, rng):
    a, b = list(a), list(b)
    out = []
    while a or b:
        side = rng.random() < 0.5
        if (side and a) or not b:
            out.append((FEATURES, a.pop(0)))
        else:
            out.append((LABELS, b.pop(0)))
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 60),
    delay=st.sampled_from([0, 1, 5, 30, "t0", "t4.5"]),
    same_time=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_merge_restores_the_schedule_from_any_interleaving(n, delay, same_time, seed) -> None:
    model = TimeDelay(float(delay[1:])) if isinstance(delay, str) else InstanceDelay(delay)
    events = schedule(n, model, same_time)
    merger = EventMerger()
    merged = []
    for topic, event in interleave(*split(events), random.Random(seed)):
        merger.push(topic, event)
        merged.extend(merger.ready())
    assert merged == events


def test_redeliveries_are_dropped_by_position_and_a_second_replay_by_id() -> None:
    """A restarted consumer re-reads messages; a replay run twice re-sends every event."""
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import Experiment
    from streameval.pipeline.runner import StreamRunner

    events = schedule(30, InstanceDelay(3))
    feats, labels = split(events)
    reference = Experiment(ExperimentConfig("s", ["nochange", "nb"]))
    reference.run(events)

    runner = StreamRunner(ExperimentConfig("s", ["nochange", "nb"]), emit_predictions=False)
    rejected = []
    for replay in range(2):  # the same replay twice into the same topics ...
        base = replay * 10_000  # (the second replay's messages come at later offsets)
        for offset, e in enumerate(feats):
            for _redelivery in range(2):  # ... and every message delivered twice
                rejected += runner.push(FEATURES, e, (0, base + offset, 0))[1]
        for offset, e in enumerate(labels):
            rejected += runner.push(LABELS, e, (0, base + offset, 0))[1]
    assert runner.n_redelivered == 2 * len(feats)
    assert runner.results() == reference.results()
    # the second replay came after the end-of-stream marker: ignored, nothing double-counted
    assert runner.finished and rejected == []


def test_a_second_replay_before_the_end_is_rejected_by_id() -> None:
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.runner import StreamRunner

    *events, end = schedule(10, InstanceDelay(0))
    runner = StreamRunner(ExperimentConfig("s", ["nochange"]), emit_predictions=False)
    kinds = []
    for _ in range(2):  # the second replay starts before the first one's end marker
        for e in events:
            kinds += [r.kind for r in runner.push(topic_of(e), e)[1]]
    for topic in (FEATURES, LABELS):
        kinds += [r.kind for r in runner.push(topic, end)[1]]
    assert runner.finished and runner.experiment.n_labelled == 10
    # merged by time, the second F9 comes before the first L9: instance 9 is still
    # pending, so it counts as an evolving-features update, not a rejection
    assert kinds.count("already_labelled") == 9 and kinds.count("duplicate_label") == 10
    assert runner.experiment.counters["feature_updates"] == 1


def test_idle_release_lets_features_through() -> None:
    merger = EventMerger()
    merger.push(FEATURES, FeatureEvent("s", "0", 0.0, {}, 0))
    merger.push(FEATURES, FeatureEvent("s", "1", 1.0, {}, 1))
    assert merger.ready() == []
    assert [e.id for e in merger.release_idle(FEATURES)] == ["0", "1"]
    assert merger.n_idle_released == 2


def test_topic_of() -> None:
    assert topic_of(LabelEvent("s", "1", 0.0, "a", 0)) == LABELS
    assert topic_of(FeatureEvent("s", "1", 0.0, {}, 0)) == FEATURES


def test_guard_wrong_width_duplicate_label_and_orphans() -> None:
    pending: set[str] = set()
    guard = IngestGuard(orphan_ttl=5.0)

    def admit(event):
        ok, bad = guard.admit(event, pending.__contains__)
        for e in ok:
            if isinstance(e, FeatureEvent):
                pending.add(e.id)
            elif isinstance(e, LabelEvent):
                pending.discard(e.id)
        return [(e.kind, getattr(e, "id", None)) for e in ok], [r.kind for r in bad]

    assert admit(FeatureEvent("s", "1", 0.0, {"a": 1.0, "b": 2.0}, 0)) == ([("features", "1")], [])
    assert admit(FeatureEvent("s", "2", 0.0, {"a": 1.0, "zz": 1.0}, 1)) == ([], ["wrong_width"])
    assert admit(FeatureEvent("s", "2", 0.0, {}, 1)) == ([], ["wrong_width"])
    assert admit(LabelEvent("s", "1", 1.0, "x", 2)) == ([("label", "1")], [])
    assert admit(LabelEvent("s", "1", 1.5, "x", 3)) == ([], ["duplicate_label"])
    assert admit(FeatureEvent("s", "1", 1.6, {"a": 1.0, "b": 2.0}, 4)) == (
        [],
        ["already_labelled"],
    )
    # orphan that finds its features within the ttl
    assert admit(LabelEvent("s", "9", 2.0, "y", 5)) == ([], [])
    assert guard.n_orphans == 1
    assert admit(FeatureEvent("s", "9", 3.0, {"a": 0.0, "b": 0.0}, 6)) == (
        [("features", "9"), ("label", "9")],
        [],
    )
    # orphan that never does: rejected once event time passes ts + ttl
    assert admit(LabelEvent("s", "77", 4.0, "y", 7)) == ([], [])
    assert admit(FeatureEvent("s", "3", 8.0, {"a": 0.0, "b": 0.0}, 8)) == ([("features", "3")], [])
    assert admit(FeatureEvent("s", "4", 9.5, {"a": 0.0, "b": 0.0}, 9)) == (
        [("features", "4")],
        ["orphan_label"],
    )
    # the end of the stream rejects every orphan still waiting
    assert admit(LabelEvent("s", "88", 10.0, "y", 10)) == ([], [])
    ok, bad = guard.admit(EndOfStream("s", 10.0, 11, 11), pending.__contains__)
    assert [r.kind for r in bad] == ["orphan_label"] and ok[0].kind == "end"
    assert guard.counts == {
        "wrong_width": 2,
        "duplicate_label": 1,
        "already_labelled": 1,
        "orphan_label": 2,
    }
