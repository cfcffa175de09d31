"""The pending buffer: due instances, eviction, evolving features, counters, pickling."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.reeval.bins import average_per_bin, dominant_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer, PendingInstance


def _add(buf: PendingBuffer, uid: str, at: int, labels_seen: int, ts: float | None = None) -> None:
    ts = float(at) if ts is None else ts
    buf.add(uid, at=at, ts=ts, x={"at": at}, labels_seen=labels_seen)
    buf.record(uid, "m", ts, "first")


def test_due_every_k_labels_counted_since_arrival() -> None:
    buf = PendingBuffer(k=3)
    _add(buf, "a", 0, labels_seen=0)
    _add(buf, "b", 1, labels_seen=2)  # two labels came before b
    got = [[m.uid for m in buf.due(n)] for n in range(1, 12)]
    # n:     1   2     3    4     5      6    7     8      9   10     11
    assert got == [[], [], ["a"], [], ["b"], ["a"], [], ["b"], ["a"], [], ["b"]]
    assert buf.get("a").n_repredictions == 3 and buf.get("b").n_repredictions == 3


def test_an_instance_added_at_the_current_count_is_not_due_yet() -> None:
    buf = PendingBuffer(k=2)
    _add(buf, "a", 0, labels_seen=0)
    assert buf.due(1) == []
    _add(buf, "b", 1, labels_seen=1)
    _add(buf, "c", 2, labels_seen=2)  # same bucket as a, but no label since it arrived
    assert [m.uid for m in buf.due(2)] == ["a"]
    assert [m.uid for m in buf.due(3)] == ["b"]
    assert [m.uid for m in buf.due(4)] == ["a", "c"]


def test_no_reevaluation_without_k() -> None:
    buf = PendingBuffer(k=None)
    _add(buf, "a", 0, 0)
    assert [buf.due(n) for n in (1, 1, 2)] == [[], [], []]
    assert buf.pop("a").n_repredictions == 0


def test_due_counts_must_grow_and_arrivals_may_not_lag() -> None:
    buf = PendingBuffer(k=2)
    buf.due(3)
    with pytest.raises(ValueError):
        buf.due(3)
    with pytest.raises(ValueError):
        buf.add("late", at=0, ts=0.0, x={}, labels_seen=2)


def test_bad_arguments() -> None:
    for k, cap in ((0, None), (1.5, None), (True, None), (2, 0)):
        with pytest.raises(ValueError):
            PendingBuffer(k, cap)  # type: ignore[arg-type]
    buf = PendingBuffer(k=2)
    _add(buf, "a", 0, 0)
    with pytest.raises(ValueError):
        buf.add("a", at=1, ts=1.0, x={}, labels_seen=0)
    with pytest.raises(KeyError):
        buf.record("nobody", "m", 1.0, "x")
    buf.record("a", "m", 5.0, "y")
    with pytest.raises(ValueError):
        buf.record("a", "m", 4.0, "z")


def test_eviction_of_the_oldest_and_its_counters() -> None:
    buf = PendingBuffer(k=2, cap=2)
    _add(buf, "a", 0, 0)
    _add(buf, "b", 1, 0)
    assert buf.add("c", at=2, ts=2.0, x={}, labels_seen=0).uid == "a"
    assert len(buf) == 2 and "a" not in buf and buf.n_evicted == 1
    assert buf.was_evicted("a")
    assert [m.uid for m in buf.due(2)] == ["b", "c"]  # a left its bucket too
    assert buf.pop("a") is None
    assert (buf.n_evicted_labels, buf.n_unknown_labels) == (1, 0)
    assert buf.pop("zzz") is None
    assert (buf.n_evicted_labels, buf.n_unknown_labels) == (1, 1)
    assert buf.pop("a") is None  # a second label for a is simply unknown
    assert (buf.n_evicted_labels, buf.n_unknown_labels) == (1, 2)


def test_evicted_ids_are_remembered_for_cap_evictions_only() -> None:
    buf = PendingBuffer(k=None, cap=1)
    for i, uid in enumerate("abc"):
        _add(buf, uid, i, 0)  # evicts a, then b
    assert buf.n_evicted == 2 and not buf.was_evicted("a") and buf.was_evicted("b")
    assert buf.pop("a") is None and buf.pop("b") is None
    assert (buf.n_evicted_labels, buf.n_unknown_labels) == (1, 1)


def test_readding_an_evicted_id_makes_it_pending_again() -> None:
    buf = PendingBuffer(k=None, cap=1)
    _add(buf, "a", 0, 0)
    _add(buf, "b", 1, 0)
    _add(buf, "a", 2, 0)  # evicts b
    assert not buf.was_evicted("a") and buf.pop("a") is not None


def test_evolving_features_replace_the_old_ones() -> None:
    buf = PendingBuffer(k=1)
    buf.add("a", at=0, ts=0.0, x={"wind": 3.0}, labels_seen=0)
    assert buf.update_features("a", {"wind": 9.0})
    assert not buf.update_features("zzz", {"wind": 1.0})
    (m,) = buf.due(1)
    assert m.x == {"wind": 9.0} and m.ts == 0.0 and m.at == 0


def test_resource_indicators() -> None:
    buf = PendingBuffer(k=1)
    for i in range(3):
        buf.add(i, at=i, ts=float(i), x={}, labels_seen=0)
        for key in ("nb", "__maj__"):
            buf.record(i, key, float(i), "UP")
    assert (buf.n_predictions_held, buf.n_entries_held) == (0, 6)
    for n, ts in ((1, 10.0), (2, 11.0)):
        for m in buf.due(n):
            buf.record(m.uid, "nb", ts, "DOWN" if m.uid == 0 else "UP")
            buf.record(m.uid, "__maj__", ts, "UP")
    # 2 rounds x 3 instances made; stored: instance 0 got one new "nb" entry (DOWN),
    # everything else merged into the previous identical prediction
    assert buf.n_repredictions_total == 6 and buf.n_predictions_held == 6
    assert buf.n_entries_held == 7
    m = buf.pop(0)
    assert m.history["nb"] == [(0.0, "UP"), (10.0, "DOWN")] and m.n_entries == 3
    assert (buf.n_predictions_held, buf.n_entries_held, buf.n_repredictions_total) == (4, 4, 6)


def test_without_compaction_every_prediction_is_stored() -> None:
    buf = PendingBuffer(k=1, compact=False)
    _add(buf, "a", 0, 0)
    for n in (1, 2):
        for m in buf.due(n):
            assert buf.record(m.uid, "m", 10.0 * n, "first")
    assert buf.n_entries_held == 3 and len(buf.get("a").history["m"]) == 3


def test_nan_predictions_never_merge() -> None:
    buf = PendingBuffer(k=None)
    buf.add("a", at=0, ts=0.0, x={}, labels_seen=0)
    assert buf.record("a", "r", 0.0, float("nan"))
    assert buf.record("a", "r", 1.0, float("nan"))


def test_pickle_round_trip_keeps_state_and_shared_instances() -> None:
    buf = PendingBuffer(k=2, cap=3)
    for i in range(4):
        _add(buf, f"i{i}", i, labels_seen=i // 2)
    buf.due(2)
    buf.pop("i1")
    copy = pickle.loads(pickle.dumps(buf))
    assert isinstance(copy.get("i2"), PendingInstance)
    assert [m.uid for m in copy] == [m.uid for m in buf]
    for b in (buf, copy):
        due = b.due(3)  # i2 and i3 arrived after 1 label
        assert due and all(m is b.get(m.uid) for m in due)
        for m in due:
            b.record(m.uid, "m", 9.0, "later")
    for uid in ("i2", "i3"):
        assert copy.get(uid).history == buf.get(uid).history
    keys = (
        "n_added",
        "n_evicted",
        "n_predictions_held",
        "n_entries_held",
        "n_repredictions_total",
        "n_unknown_labels",
        "n_evicted_labels",
    )
    assert [getattr(copy, k) for k in keys] == [getattr(buf, k) for k in keys]


# --- property: the buckets answer like a scan of the buffer ------------------------------

ops = st.lists(
    st.one_of(
        st.just(("features",)),
        st.tuples(st.just("label"), st.integers(0, 1_000)),
        st.tuples(st.just("update"), st.integers(0, 1_000)),
    ),
    max_size=120,
)


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 6), cap=st.one_of(st.none(), st.integers(1, 8)), script=ops)
def test_due_matches_a_brute_force_scan(k: int, cap: int | None, script: list[tuple]) -> None:
    buf = PendingBuffer(k=k, cap=cap)
    pending: list[PendingInstance] = []  # the model: pending instances, oldest first
    evicted: list[str] = []
    n_labels = 0
    arrivals = 0
    expected_repredictions = 0
    for op in script:
        if op[0] == "features":
            uid = f"u{arrivals}"
            gone = buf.add(uid, at=arrivals, ts=float(arrivals), x={}, labels_seen=n_labels)
            buf.record(uid, "m", float(arrivals), 0)
            arrivals += 1
            pending.append(buf.get(uid))
            if cap is not None and len(pending) > cap:
                oldest = pending.pop(0)
                evicted.append(oldest.uid)
                assert gone is oldest
            else:
                assert gone is None
        elif op[0] == "update":
            if pending:
                target = pending[op[1] % len(pending)]
                assert buf.update_features(target.uid, {"v": op[1]})
        else:
            n_labels += 1
            choice = op[1] % (len(pending) + 1)
            if choice < len(pending):
                assert buf.pop(pending.pop(choice).uid) is not None
            else:
                assert buf.pop("never-seen") is None
            scan = [
                m
                for m in pending
                if n_labels - m.labels_seen > 0 and (n_labels - m.labels_seen) % k == 0
            ]
            due = buf.due(n_labels)
            assert [m.uid for m in due] == [m.uid for m in scan]
            expected_repredictions += len(due)
            for m in due:
                buf.record(m.uid, "m", float(arrivals), n_labels)
        assert len(buf) == len(pending)
        assert [m.uid for m in buf] == [m.uid for m in pending]
    assert buf.n_evicted == len(evicted)
    assert buf.n_repredictions_total == expected_repredictions
    assert buf.n_predictions_held == sum(m.n_repredictions for m in pending)
    assert buf.n_entries_held == sum(m.n_entries for m in pending)
    for m in pending:  # every instance was due exactly once per K labels since it arrived
        assert m.n_repredictions == (n_labels - m.labels_seen) // k


@settings(deadline=None)
@given(
    labels=st.lists(st.sampled_from("ab"), min_size=1, max_size=30),
    latency=st.integers(1, 60),
    n_bins=st.integers(0, 12),
)
def test_compaction_does_not_change_the_binned_predictions(
    labels: list[str], latency: int, n_bins: int
) -> None:
    results = []
    for compact in (True, False):
        buf = PendingBuffer(k=1, compact=compact)
        buf.add("a", at=0, ts=0.0, x={}, labels_seen=0)
        buf.record("a", "c", 0.0, labels[0])
        buf.record("a", "r", 0.0, float(labels[0] == "a"))
        for n, y in enumerate(labels[1:], start=1):
            (m,) = buf.due(n)
            t = min(float(n * 2), float(latency))
            buf.record(m.uid, "c", t, y)
            buf.record(m.uid, "r", t, float(y == "a"))
        m = buf.pop("a")
        results.append(
            (
                dominant_per_bin(m.history["c"], 0.0, float(latency), n_bins),
                average_per_bin(m.history["r"], 0.0, float(latency), n_bins),
            )
        )
    assert results[0] == results[1]
