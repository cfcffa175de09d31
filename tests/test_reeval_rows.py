"""The matrix of pending rows, bulk recording, and the fast paths of a re-evaluation round.

Every fast path is checked against the plain code it replaces: the frame of a
round against ``NumericFrame`` of the cleaned dicts, ``record_many`` against
``record`` one by one, the vectorised argmax against ``argmax`` of each dict,
the tree's vectorised routing against routing one instance at a time, the
cached naive Bayes sums against computing them afresh, and the bisection
``d_D`` against the plain sweep.
"""

from __future__ import annotations

import math
import pickle
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import tree
from streameval.pipeline.learners.base import argmax, argmax_rows
from streameval.pipeline.learners.frame import NumericFrame
from streameval.pipeline.learners.logmath import argmax_log_rows, log_sum_exp_normalise
from streameval.pipeline.learners.naive_bayes import MixedNB
from streameval.pipeline.learners.river_adapter import RiverClassifier, clean
from streameval.pipeline.learners.tree_batch import TreeBatch
from streameval.pipeline.reeval.bins import _dominant_by_sweep, dominant_per_bin
from streameval.pipeline.reeval.buffer import PendingBuffer
from streameval.pipeline.reeval.rows import FeatureRows, PendingRows


def _same_frame(got: NumericFrame, want: NumericFrame) -> None:
    """Equal feature by feature (column order and never-present columns may differ)."""
    assert got.odd == want.odd and got.text == want.text and got.strings == want.strings
    for feature in set(got.index) | set(want.index):
        g, w = got.index.get(feature), want.index.get(feature)
        g_present = got.present[:, g] if g is not None else np.zeros(len(got.values), bool)
        w_present = want.present[:, w] if w is not None else np.zeros(len(want.values), bool)
        assert g_present.tolist() == w_present.tolist(), feature
        if g is not None and w is not None:
            assert got.values[g_present, g].tolist() == want.values[w_present, w].tolist()


# -- the matrix -------------------------------------------------------------------------------


def test_rows_are_reused_and_a_released_row_keeps_its_values_until_then() -> None:
    rows = FeatureRows(capacity=2)
    a = rows.acquire({"x": 1.0})
    b = rows.acquire({"x": 2.0})
    c = rows.acquire({"x": 3.0})  # the matrix doubles
    assert (a, b, c) == (0, 1, 2) and rows.capacity == 4 and len(rows) == 3
    rows.release(b)
    assert rows.frame([b]).values.tolist() == [[2.0]]  # still readable after release
    d = rows.acquire({"x": 4.0, "y": 5})
    assert d == b and rows.n_used == 3 and len(rows) == 3
    frame = rows.frame([a, d, c])
    assert frame.index == {"x": 0, "y": 1}
    assert frame.values.tolist() == [[1.0, 0.0], [4.0, 5.0], [3.0, 0.0]]
    assert frame.present.tolist() == [[True, False], [True, True], [True, False]]


def test_an_overwritten_row_has_only_its_new_features_and_a_new_stamp() -> None:
    rows = FeatureRows()
    r = rows.acquire({"x": 1.0, "y": 2.0, "c": "UP"})
    stamp = rows.stamps[r]
    rows.write(r, {"x": 7.0, "z": float("nan")})
    frame = rows.frame([r])
    # a NaN is missing (no column for it); y is gone; the str went with the old features
    assert frame.index == {"x": 0, "y": 1} and frame.present.tolist() == [[True, False]]
    assert frame.values[0, 0] == 7.0 and frame.strings == [[]] and frame.text == set()
    assert rows.stamps[r] > stamp and rows.needs_clean([r]) and rows.n_text_rows == 0


def test_odd_values_and_non_dicts_leave_the_round_to_the_dicts() -> None:
    rows = FeatureRows()
    ok = rows.acquire({"x": 1.0})
    odd = rows.acquire({"x": [1, 2]})
    big = rows.acquire({"x": 10**400})
    other = rows.acquire(("not", "a", "dict"))
    assert rows.frame([ok]) is not None
    for r in (odd, big, other):
        assert rows.frame([ok, r]) is None


MIXED = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.booleans(),
    st.sampled_from(["UP", "DOWN", "CO"]),
    st.none(),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), MIXED, max_size=4),
        min_size=1,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_the_frame_of_a_round_is_the_frame_of_the_cleaned_dicts(
    xs: list, rnd: random.Random
) -> None:
    rows = FeatureRows(capacity=1)
    ids = [rows.acquire(x) for x in xs]
    for _ in range(len(xs) // 2):  # evolving instances: some rows overwritten
        i = rnd.randrange(len(xs))
        xs[i] = dict(reversed(list(xs[i].items())))
        rows.write(ids[i], xs[i])
    order = list(range(len(xs)))
    rnd.shuffle(order)
    batch = rows.batch([xs[i] for i in order], [ids[i] for i in order])
    cleaned = [clean(xs[i]) for i in order]
    assert batch.frame is not None
    _same_frame(batch.frame, NumericFrame(cleaned))
    assert batch.needs_clean == any(c is not xs[i] for c, i in zip(cleaned, order, strict=True))


# -- the buffer -------------------------------------------------------------------------------


def test_rows_follow_the_buffer_through_labels_evictions_and_updates() -> None:
    buf = PendingBuffer(k=2, cap=2)
    buf.add("a", at=0, ts=0.0, x={"f": 0.0}, labels_seen=0)
    buf.add("b", at=1, ts=1.0, x={"f": 1.0}, labels_seen=0)
    evicted = buf.add("c", at=2, ts=2.0, x={"f": 2.0}, labels_seen=0)  # a is evicted
    assert evicted is not None and evicted.uid == "a"
    assert len(buf.rows) == 2 and buf.rows.n_used == 3
    d = buf.add("d", at=3, ts=3.0, x={"f": 3.0}, labels_seen=0)  # b is evicted
    assert d is not None and buf.get("d").row == evicted.row  # a's row, reused
    assert buf.rows.n_used == 3 and len(buf.rows) == 2
    buf.update_features("c", {"f": 20.0, "g": 1.0})  # an evolving instance
    popped = buf.pop("d")
    batch = buf.batch([buf.get("c"), popped])  # the popped row is still readable
    assert batch == [{"f": 20.0, "g": 1.0}, {"f": 3.0}]
    assert batch.frame is not None
    assert batch.frame.values[:, batch.frame.index["f"]].tolist() == [20.0, 3.0]
    assert batch[1:] == [{"f": 3.0}] and not isinstance(batch[1:], PendingRows)


def test_a_drained_buffer_gives_its_matrix_back_and_keeps_every_row_and_prediction() -> None:
    buf = PendingBuffer(k=3)
    for i in range(1000):
        buf.add(i, at=i, ts=float(i), x={"f": float(i), "c": f"s{i % 7}"}, labels_seen=0)
        buf.record(i, "nb", float(i), "UP" if i % 3 else "DOWN")
    assert buf.rows.capacity == 1024
    for seen, i in enumerate(range(960), start=1):  # the oldest 960 labelled: it shrinks
        popped = buf.pop(i)
        assert popped is not None and popped.x["f"] == float(i)
        due = buf.due(seen)
        if due:  # a round of the due instances plus the one just popped, as in Algorithm 1
            batch = buf.batch([*due, popped])
            assert batch.frame is not None
            got = batch.frame.values[:, batch.frame.index["f"]].tolist()
            assert got == [m.x["f"] for m in [*due, popped]]
            assert batch.frame.strings == [[("c", m.x["c"])] for m in [*due, popped]]
            labels = ["DOWN"] * len(due)
            stored = buf.record_many(due, "nb", 1000.0 + seen, labels)
            # an entry only for those whose last prediction was not DOWN already
            assert stored == sum(1 for m in due if m.history["nb"][-1] == (1000.0 + seen, "DOWN"))
    assert len(buf) == 40 and buf.rows.capacity == 128 and len(buf.rows) == 40  # 1024 -> 128
    rows = [m.row for m in buf]
    assert len(set(rows)) == 40 and max(rows) < 128  # each pending instance has its own row
    batch = buf.batch(list(buf))
    assert batch.frame is not None
    assert batch.frame.values[:, batch.frame.index["f"]].tolist() == list(
        map(float, range(960, 1000))
    )
    for m in buf:  # the last stored label of each row followed its instance
        code = buf._last["nb"][m.row]
        assert buf._labels[code] == m.history["nb"][-1][1]


def test_a_buffer_without_k_keeps_no_rows() -> None:
    buf = PendingBuffer(k=None)
    buf.add("a", at=0, ts=0.0, x={"f": 0.0}, labels_seen=0)
    assert buf.get("a").row == -1 and len(buf.rows) == 0
    assert buf.batch([buf.get("a")]).frame is None


def _twin_buffers(n: int, keys: list[str]) -> tuple[PendingBuffer, PendingBuffer]:
    one, many = PendingBuffer(k=1), PendingBuffer(k=1)
    for buf in (one, many):
        for i in range(n):
            buf.add(f"i{i}", at=i, ts=float(i), x={"f": float(i)}, labels_seen=0)
            for key in keys:
                buf.record(f"i{i}", key, float(i), "A" if i % 2 else None)
    return one, many


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["A", "B", None]), min_size=6, max_size=6), min_size=1, max_size=6
    ),
    st.booleans(),
)
def test_record_many_stores_what_record_stores(rounds: list[list], compact: bool) -> None:
    one, many = _twin_buffers(6, ["m"])
    one.compact = many.compact = compact
    for r, labels in enumerate(rounds, start=1):
        ts = 10.0 * r
        due_one, due_many = one.due(r), many.due(r)
        stored = [one.record(m.uid, "m", ts, y) for m, y in zip(due_one, labels, strict=True)]
        assert many.record_many(due_many, "m", ts, labels) == sum(stored)
    for uid in [f"i{i}" for i in range(6)]:
        assert many.get(uid).history == one.get(uid).history
    assert many.n_entries_held == one.n_entries_held
    copy_ = pickle.loads(pickle.dumps(many))  # the codes survive a checkpoint
    due = copy_.due(len(rounds) + 1)
    copy_.record_many(due, "m", 1e6, ["A"] * len(due))
    one.record_many(one.due(len(rounds) + 1), "m", 1e6, ["A"] * len(due))
    assert [m.history for m in copy_] == [m.history for m in one]


def test_record_many_falls_back_to_record_for_other_labels_and_its_errors() -> None:
    one, many = _twin_buffers(3, ["m"])
    due_one, due_many = one.due(1), many.due(1)
    labels = [1, 1.0, True]  # equal but not the same label: never merged
    for m, y in zip(due_one, labels, strict=True):
        one.record(m.uid, "m", 5.0, y)
    many.record_many(due_many, "m", 5.0, labels)
    assert [m.history for m in many] == [m.history for m in one]
    with pytest.raises(ValueError, match="older"):
        many.record_many(many.due(2), "m", 4.0, ["A", "A", "A"])  # before the last entry
    with pytest.raises(ValueError):
        many.record_many(many.due(3), "m", 9.0, ["A"])  # one label for three
    gone = many.pop("i0")
    with pytest.raises(KeyError):
        many.record_many([gone], "m", 9.0, ["A"])


# -- argmax -----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["b", "a", "10", "9", 2, None]), min_size=1, max_size=5, unique=True),
    st.lists(
        st.sampled_from([0.0, 0.25, 0.5, 1.0, math.nan, math.inf, -math.inf]),
        min_size=25,
        max_size=25,
    ),
)
def test_argmax_rows_is_argmax_of_each_row(classes: list, pool: list[float]) -> None:
    k = len(classes)
    values = np.array(pool[: 5 * k]).reshape(5, k)
    want = [argmax(dict(zip(classes, row, strict=True))) for row in values.tolist()]
    assert argmax_rows(classes, values) == want


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=5),
    st.lists(st.floats(min_value=-50, max_value=5), min_size=30, max_size=30),
    st.lists(st.integers(min_value=0, max_value=4), min_size=6, max_size=6),
)
def test_argmax_of_log_likelihoods_normalises_only_close_rows(
    k: int, pool: list[float], ties: list[int]
) -> None:
    values = np.array(pool[: 6 * k]).reshape(6, k)
    for r, j in enumerate(ties):  # some exact ties and near ties with the row's top
        top = int(np.argmax(values[r]))
        if j < k and j != top:
            values[r, j] = values[r, top] if r % 2 else np.nextafter(values[r, top], -np.inf)
    classes = [f"c{j}" for j in reversed(range(k))]
    want = argmax_rows(classes, log_sum_exp_normalise(values))
    assert argmax_log_rows(classes, values, log_sum_exp_normalise) == want


# -- d_D --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=0, max_value=1e3),
    st.sampled_from([0.0, 1e-9, 1.0, 3.0, 7.0, 100.0]),
    st.integers(min_value=1, max_value=12),
    st.lists(
        st.tuples(st.integers(min_value=-2, max_value=14), st.sampled_from(["a", "b", "c"])),
        max_size=10,
    ),
    st.sampled_from(["a", "b"]),
)
def test_dominant_by_bisection_equals_the_sweep(
    t_start: float, delta: float, n_bins: int, raw: list, first: str
) -> None:
    t_end = t_start + delta
    # entries on edges, inside bins, before the start and after the end
    times = sorted(
        t_start + delta * b / max(n_bins, 1) + (0.3 * delta / n_bins) * (b % 2) for b, _ in raw
    )
    history = [(t_start, first), *zip(times, (y for _, y in raw), strict=True)]
    assert dominant_per_bin(history, t_start, t_end, n_bins) == _dominant_by_sweep(
        history, t_start, t_end, n_bins
    )


# -- learners on a round ----------------------------------------------------------------------


def _covtype_like(n: int, seed: int) -> list[tuple[dict, str]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        y = rnd.choice("abc")
        shift = {"a": 0.0, "b": 1.5, "c": 3.0}[y]
        x = {f"f{j}": rnd.gauss(shift * j / 2, 1.0) for j in range(6)}
        if rnd.random() < 0.05:
            del x["f1"]  # a missing feature
        out.append((x, y))
    return out


def test_tree_and_nb_rank_a_round_as_their_dict_answers() -> None:
    data = _covtype_like(1500, seed=3)
    learners = {
        "ht": RiverClassifier(tree.HoeffdingTreeClassifier(grace_period=30, delta=0.01)),
        "nb": RiverClassifier(MixedNB()),
    }
    buf = PendingBuffer(k=1)
    for i, (x, _) in enumerate(data[:200]):
        buf.add(i, at=i, ts=float(i), x=x, labels_seen=0)
    checked = 0
    for i, (x, y) in enumerate(data):
        if i % 100 == 99:
            pending = list(buf)
            batch = buf.batch(pending)
            for name, learner in learners.items():
                want = [argmax(p) for p in learner.predict_proba_many([m.x for m in pending])]
                assert learner.predict_labels_many(batch) == want, (name, i)
                assert learner.predict_labels_many(batch) == want  # cached sums, same answers
            checked += 1
        for learner in learners.values():
            learner.learn_one(x, y)
        if i % 7 == 0:  # an evolving instance
            m = buf.get((i // 7) % 200)
            if m is not None:
                buf.update_features(m.uid, data[(i + 13) % len(data)][0])
    assert checked == 15
    model = learners["ht"].model
    assert model.n_nodes > 1  # the routing went through branches
    batch = buf.batch(list(buf))
    groups = TreeBatch()._groups_frame(model, batch, batch.frame)
    plain = TreeBatch()._groups(model, batch)
    assert [(id(leaf), rows) for leaf, rows in groups.values()] == [
        (id(leaf), rows) for leaf, rows in plain.values()
    ]


def test_an_experiment_with_the_fast_paths_equals_one_with_the_dict_paths(monkeypatch) -> None:
    """Whole results, with evolving instances, a pending cap and emitted predictions."""
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
    from streameval.pipeline.experiment import Experiment
    from streameval.pipeline.learners.mixins import ProbaMixin

    data = _covtype_like(900, seed=11)
    events: list = []
    for i, (x, _) in enumerate(data):
        events.append(FeatureEvent("s", str(i), float(i), x))
        if i % 5 == 0 and i >= 3:  # a newer version of a pending instance's features
            events.append(FeatureEvent("s", str(i - 3), float(i), data[(i * 7) % 900][0]))
        if i >= 120:
            j = i - 120 + (i % 3) * 20  # varied latencies
            if j < i and j % 4 != 3:
                events.append(LabelEvent("s", str(j), float(i), data[j][1]))
    events.append(EndOfStream("s", 1e9, 0))
    config = ExperimentConfig.from_dict(
        {
            "stream": "s",
            "learners": ["nochange", "majority", "nb", "ht"],
            "reeval_k": 3,
            "bins": 8,
            "pending_cap": 150,
            "window": 100,
        }
    )

    def run() -> tuple[dict, list]:
        exp = Experiment(config, emit_predictions=True)
        out = [o for ev in events for o in exp.process(ev)]
        return exp.results(), [o for o in out if type(o).__name__ == "PredictionEvent"]

    fast, fast_out = run()
    monkeypatch.setattr(
        RiverClassifier, "predict_labels_many", ProbaMixin.predict_labels_many, raising=True
    )
    monkeypatch.setattr(
        PendingBuffer, "batch", lambda self, insts: [m.x for m in insts], raising=True
    )
    monkeypatch.setattr(
        PendingBuffer,
        "record_many",
        lambda self, insts, key, ts, labels, rows=None: sum(
            self.record(m.uid, key, ts, y) for m, y in zip(insts, labels, strict=True)
        ),
        raising=True,
    )
    slow, slow_out = run()
    assert fast["overhead"]["evicted"] > 0 and fast["counters"]["feature_updates"] > 0
    assert fast["overhead"]["n_repredictions"] > 1000
    assert fast == slow
    assert fast_out == slow_out


def test_tree_rounds_over_all_leaves_rank_as_river_while_the_tree_grows() -> None:
    """Rows keep their leaves between rounds (rerouted when the tree splits), all leaves'
    naive Bayes votes come from one product, majority leaves and close votes are river's."""
    rnd = random.Random(4)
    data = []
    for _ in range(6000):
        y = rnd.choice("abcd")
        shift = "abcd".index(y)
        x = {f"f{j}": rnd.gauss(shift * ((j % 3) - 1), 1.0 + j % 2) for j in range(8)}
        x |= {f"b{j}": float(rnd.random() < 0.2 + 0.15 * (shift == j)) for j in range(4)}
        data.append((x, y))
    learner = RiverClassifier(tree.HoeffdingTreeClassifier(grace_period=20, delta=0.3))
    buf = PendingBuffer(k=1)
    for i, (x, _) in enumerate(data[:300]):
        buf.add(i, at=i, ts=float(i), x=x, labels_seen=0)
    rounds, leaves_seen, reused = 0, set(), 0
    for i, (x, y) in enumerate(data):
        if i % 25 == 24:
            pending = list(buf)
            batch = buf.batch(pending)
            want = [argmax(learner.model.predict_proba_one(m.x)) for m in pending]
            assert learner.predict_labels_many(batch) == want, i
            kept = learner._trees._round._leaves
            reused += sum(1 for m in pending if m.row in kept)
            leaves_seen.add(learner.model.n_leaves)
            rounds += 1
        learner.learn_one(x, y)
        if i % 9 == 0 and 300 + i // 9 < len(data):  # a new pending instance, an old one leaves
            j = 300 + i // 9
            buf.add(j, at=j, ts=float(j), x=data[j][0], labels_seen=0)
            buf.pop(next(iter(buf)).uid)
    assert rounds == 240
    assert max(leaves_seen) >= 6 and len(leaves_seen) >= 4  # rounds across several splits
    assert learner._trees._round._stable  # every round went through TreeRound
    assert reused > 0


def test_a_row_keeps_its_label_until_its_leaf_learns(monkeypatch) -> None:
    """Rounds after every label: a row whose leaf has not learned since its last round
    keeps its label without a new ranking; a row whose leaf learned is ranked again, and
    some of those change label in place. Every round equals river's answers."""
    from streameval.pipeline.learners.tree_round import TreeRound

    ranked = []
    answer = TreeRound._answer

    def counted(self: TreeRound, *args: Any) -> None:  # args[5]: the rows per leaf to rank
        ranked.append(sum(len(rows) for rows in args[5].values()))
        answer(self, *args)

    monkeypatch.setattr(TreeRound, "_answer", counted)
    rnd = random.Random(7)
    data = []
    for _ in range(2600):
        y = rnd.choice("abcd")
        shift = "abcd".index(y)
        data.append(({f"f{j}": rnd.gauss(shift * ((j % 3) - 1), 1.5) for j in range(6)}, y))
    learner = RiverClassifier(tree.HoeffdingTreeClassifier(grace_period=50, delta=0.3))
    for x, y in data[:2000]:
        learner.learn_one(x, y)
    assert learner.model.n_leaves >= 4
    buf = PendingBuffer(k=1)
    for i, (x, _) in enumerate(data[2000:2300]):
        buf.add(i, at=i, ts=float(i), x=x, labels_seen=0)
    pending = list(buf)
    batch = buf.batch(pending)
    before: dict[int, tuple[object, object]] = {}
    asked, changed_in_place = 0, 0
    for x, y in data[2300:]:
        labels = learner.predict_labels_many(batch)
        assert labels == [argmax(learner.model.predict_proba_one(m.x)) for m in pending]
        leaves = learner._trees._round._leaves
        for m, label in zip(pending, labels, strict=True):
            leaf = leaves[m.row][1]
            old = before.get(m.row)
            changed_in_place += old is not None and old[0] is leaf and old[1] != label
            before[m.row] = (leaf, label)
        asked += len(pending)
        learner.learn_one(x, y)
    assert sum(ranked) < asked / 2  # most rows kept their label: their leaf did not learn
    assert ranked.count(0) == 0  # each round ranked the rows of the leaf that learned
    assert changed_in_place > 0  # and learning moved some labels without a split


def test_rows_know_their_indicator_columns_and_leave_inexact_integers_to_the_dicts() -> None:
    rows = FeatureRows()
    a = rows.acquire({"u": 0.5, "b": 1.0, "c": 0})
    b = rows.acquire({"u": 1.0, "b": 0.0, "c": True})
    frame = rows.frame([a, b])
    assert frame is not None and frame.exact
    assert dict(zip(frame.index, frame.binary.tolist(), strict=True)) == {
        "u": False,
        "b": True,
        "c": True,
    }
    assert rows.frame([b]).index is frame.index  # the same layout objects until it changes
    c = rows.acquire({"u": 0.0, "b": 2.0, "c": 1})
    assert rows.frame([a, c]).binary.tolist() == [False, False, True]
    big = rows.acquire({"u": 0.0, "b": 1.0, "c": 2**53 + 1})
    assert rows.frame([big]) is None  # a float would round it: the dicts decide
    assert rows.frame([a, c]) is not None
