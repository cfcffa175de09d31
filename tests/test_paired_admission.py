"""Immediate pairs evaluated in bulk by the worker's runner (``pipeline/paired.py``).

With immediate labels the runner hands runs of (features, label) pairs to the columnar
core's two-pass ``immediate`` instead of evaluating them event by event. Everything that
comes out must be what the event-by-event admission gives (``StreamRunner.pairs = False``):
outputs, rejections, counts, budgets, results -- on streams with every kind of bad input,
and when a learner fails to predict or to learn an instance in the middle of a run, with
more events taken by the guard after it.
"""

from __future__ import annotations

from typing import Any

import pytest
from streameval.pipeline.columnar import ColumnarExperiment
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.memory import BytePool
from streameval.pipeline.paired import PairedAdmission
from streameval.pipeline.runner import StreamRunner
from test_columnar_worker import fed, messy_messages


def runner_for(config: ExperimentConfig, pairs: bool, orphan_ttl: float = 5e4) -> StreamRunner:
    runner = StreamRunner(config, emit_predictions=False, orphan_ttl=orphan_ttl)
    runner.pairs = pairs
    runner.bind(BytePool(None), 150_000, 60)  # tight: some events are refused
    assert isinstance(runner.experiment, ColumnarExperiment)
    return runner


def outcome(runner: StreamRunner, messages: list[tuple[str, bytes]]) -> dict[str, Any]:
    """What ``fed`` reports, and what a failure notice reads of the experiment."""
    got = fed(runner, messages, True)
    exp = runner.experiment
    got["experiment"] = (exp.n_instances, exp.n_labelled, exp.last_ts, len(exp.buffer))
    got["pool"] = runner.pool.held if runner.pool is not None else None
    return got


class Paired:
    """Counts what the runs of pairs evaluated in bulk, and the failures inside them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n_paired = 0
        self.n_plain = 0  # pairs taken in one step (PairedAdmission._plain_pairs)
        self.n_bulk = 0  # of those, pairs taken a window at a time (_bulk_pairs)
        # (step, whether in a run of pairs, rejections withdrawn)
        self.failures: list[tuple[str, bool, int]] = []
        flush, failed = PairedAdmission._flush, PairedAdmission._failed
        plain_pairs, bulk_pairs = PairedAdmission._plain_pairs, PairedAdmission._bulk_pairs
        spy = self

        def counted_bulk_pairs(self: PairedAdmission, index: int) -> int:
            after = bulk_pairs(self, index)
            spy.n_bulk += (after - index) // 2
            return after

        def counted_plain_pairs(self: PairedAdmission, index: int) -> int:
            after = plain_pairs(self, index)
            spy.n_plain += (after - index) // 2
            return after

        def counted_flush(self: PairedAdmission, index: int) -> bool:
            n = len(self.run)
            ok = flush(self, index)
            spy.n_paired += n if ok else 0
            return ok

        def counted_failed(self: PairedAdmission, exc: Exception, taken: Any, index: int) -> None:
            n_rejections = len(self.rejections)
            later = self.marks[taken[1] + 1 : index + 1]
            withdrawn = n_rejections - later[0][1] if later else 0
            spy.failures.append((getattr(exc, "step", "?"), bool(self.run), withdrawn))
            failed(self, exc, taken, index)

        monkeypatch.setattr(PairedAdmission, "_flush", counted_flush)
        monkeypatch.setattr(PairedAdmission, "_failed", counted_failed)
        monkeypatch.setattr(PairedAdmission, "_plain_pairs", counted_plain_pairs)
        monkeypatch.setattr(PairedAdmission, "_bulk_pairs", counted_bulk_pairs)


def test_pairs_in_bulk_give_what_events_one_by_one_give(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds: set[str] = set()
    for seed, orphans in ((1, True), (2, True), (3, True), (4, False), (5, False)):
        config, messages = messy_messages(seed, delay="0", pack=50, orphans=orphans)
        ttl = 5e4 if orphans else 3600.0  # the labels of rejected features wait 2 instances
        spy = Paired(monkeypatch)
        in_bulk = outcome(runner_for(config, True, ttl), messages)
        assert spy.n_paired > 100  # a good part of the 400 instances went in bulk
        assert spy.n_plain > 50, spy.n_plain  # and many of them in the guard's one step
        assert orphans or spy.n_bulk > 10, spy.n_bulk  # and some a window at a time
        one_by_one = outcome(runner_for(config, False, ttl), messages)
        assert one_by_one["finished"] and one_by_one["results"]["n_labelled"] > 200
        assert sum(o["kind"] == "periodic" for o in one_by_one["outputs"]) >= 3 * 3
        assert in_bulk == one_by_one, seed
        kinds |= {r[0] for r in one_by_one["rejections"]}
    # every rule of the guard and the budget had something to do
    assert {"wrong_width", "out_of_range", "too_long", "duplicate_label"} <= kinds, kinds
    assert {"orphan_label", "over_budget"} <= kinds, kinds


class Tripwire:
    """A learner that raises on its ``n``-th call of ``step`` (``predict`` or ``learn``):
    both admissions make the same calls in the same order, so it fails on the same one."""

    def __init__(self, inner: Any, step: str, n: int) -> None:
        self.inner, self.step, self.left = inner, step, n

    def _count(self, step: str) -> None:
        if step == self.step:
            self.left -= 1
            if self.left == 0:
                raise ValueError(f"tripped on {step}")

    def learn_one(self, x: Any, y: Any, *, at: Any = None) -> None:
        self._count("learn")
        self.inner.learn_one(x, y, at=at)

    def predict_proba_one(self, x: Any, *, at: Any = None) -> Any:
        self._count("predict")
        return self.inner.predict_proba_one(x, at=at)


def tripped(config: ExperimentConfig, pairs: bool, step: str, n: int) -> StreamRunner:
    runner = runner_for(config, pairs)
    exp = runner.experiment
    exp.slots[2].learner = Tripwire(exp.slots[2].learner, step, n)  # type: ignore[union-attr]
    exp._plan()  # type: ignore[union-attr]  # it binds its learners' methods once
    return runner


def test_a_learner_failing_in_a_run_of_pairs_stops_the_stream_as_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = Paired(monkeypatch)
    for seed in (1, 2):
        config, messages = messy_messages(seed, delay="0", pack=50)
        for step in ("predict", "learn"):
            for n in (40, 97, 151, 222, 305):
                got = [
                    outcome(tripped(config, pairs, step, n), messages) for pairs in (True, False)
                ]
                assert got[0]["failed"] is not None and f"tripped on {step}" in got[0]["failed"]
                assert got[0]["counts"]["after_failure"] > 0
                assert got[0] == got[1], (seed, step, n)
    in_runs = [f for f in spy.failures if f[1]]
    assert {step for step, _, _ in in_runs} == {"predict", "learn"}, spy.failures
    # and some where the guard had already rejected events after the failing one
    assert any(withdrawn > 0 for _, _, withdrawn in in_runs), spy.failures


def test_the_guard_takes_pairs_at_once_exactly_when_it_would_take_each_in_turn() -> None:
    """``IngestGuard.admits_pairs`` against ``admits_pair`` pair after pair, from guards and
    pairs of every kind: True exactly when every call would be (always, when no orphan
    label waits and the guard remembers more ids than the pairs hold), and then the guard
    as those calls leave it; False and the guard untouched otherwise."""
    import copy
    import random

    from streameval.pipeline.events import FeatureEvent, LabelEvent
    from streameval.pipeline.ingest import IngestGuard

    def state(g: IngestGuard) -> tuple[Any, ...]:
        return g.clock, list(g._labelled), list(g._refused), list(g._orphans), g.counts

    rng = random.Random(7)
    outcomes = {True: 0, False: 0}
    for case in range(3000):
        guard = IngestGuard(feature_names=["a", "b"], remember=rng.choice([4, 10_000]))
        guard.clock = rng.choice([float("-inf"), 3.0])
        for uid in rng.sample(range(40), 3):
            guard._labelled[str(uid)] = None
        if rng.random() < 0.2:
            guard._refused[str(rng.randrange(40))] = "too_long"
        if rng.random() < 0.1:
            guard.admit(LabelEvent("s", "orphan", 2.0, "a", 0), lambda uid: False)
        fs, ls = [], []
        ts = rng.choice([0.0, 3.0, 5.0])
        for i in range(rng.randrange(1, 6)):
            ts += rng.choice([0.0, 1.0, 1.0, 1.0, -2.0 if rng.random() < 0.1 else 1.0])
            uid = str(rng.randrange(40) if rng.random() < 0.1 else 100 + 10 * case + i)
            x: dict[str, Any] = {"a": 1.0, "b": "u"}
            bad = rng.random()
            if bad < 0.04:
                x = {"a": 1.0, "c": 2.0}
            elif bad < 0.08:
                x = {"a": rng.choice([1e60, -1e51, 10**60])}
            elif bad < 0.1:
                x = {}
            fs.append(FeatureEvent("s", uid, ts, x, 2 * i))
            y: Any = rng.choice(["a", "b", "b", 3]) if rng.random() < 0.1 else "a"
            lid = uid if rng.random() > 0.03 else uid + "!"
            lts = ts if rng.random() > 0.03 else ts + 1.0
            ls.append(LabelEvent("s", lid, lts, y, 2 * i + 1))
        one_by_one, at_once = copy.deepcopy(guard), copy.deepcopy(guard)
        each = all(one_by_one.admits_pair(f, lab) for f, lab in zip(fs, ls, strict=True))
        took = at_once.admits_pairs(fs, ls)
        exact = not guard.n_orphans and guard.remember > len(guard._labelled) + len(fs)
        assert took <= each and (took == each or not exact), case
        assert state(at_once) == (state(one_by_one) if took else state(guard)), case
        outcomes[took] += 1
    assert min(outcomes.values()) > 500, outcomes  # both answers, often
