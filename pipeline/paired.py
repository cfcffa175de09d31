"""A runner's admission of immediate pairs: an instance's features, then at once its label.

With immediate labels (delay 0) the merge releases each instance's features followed by
its label at the same event time. :class:`PairedAdmission` passes the events a
:class:`~streameval.pipeline.runner.StreamRunner` releases through its guard one by one,
as the runner does, and hands each run of such pairs to
:meth:`ColumnarExperiment.immediate
<streameval.pipeline.columnar.experiment.ColumnarExperiment.immediate>` -- the learners'
calls in a loop of their own, the evaluation in bulk -- instead of ``features`` then
``label`` event by event. Any other admitted event (a label that is not the next one, a
class not seen yet, the end of the stream, newer features of a pending instance) ends the
run: the run is evaluated, then that event by itself, so every event is evaluated in the
order the guard admitted it.

A released pair that the guard passes as it is (the common case: no orphan label, no
refused features, values in range, time not going back) is taken in one step
(:meth:`PairedAdmission._plain_pairs`, :meth:`~streameval.pipeline.ingest.IngestGuard.admits_pair`);
the others go through the guard event by event.

The outputs, rejections, counts and results are those of the events evaluated one by
one (``tests/test_paired_admission.py``). When the experiment fails, the event it failed
on is rejected (``experiment_error``), and what the guard took after that event is
counted as the one-by-one admission counts what it never took: the rejections the guard
made for the later events are withdrawn (and its counts of them, and of events it
retimed, set back), and the later events and the orphan labels they released are counted
after the failure. The guard's memory of ids and its clock are not set back: a failed
stream takes no further event.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent, Output
from streameval.pipeline.failure import LearnerFailed, describe
from streameval.pipeline.ingest import Rejection
from streameval.pipeline.merge import Queued, Source

if TYPE_CHECKING:
    from streameval.pipeline.runner import StreamRunner

#: Fewest pairs :meth:`PairedAdmission._bulk_pairs` looks at in one window.
WINDOW_MIN = 8

# an admitted event and where it came from: the event, the index of the released event
# whose admission gave it, its position in what that admission gave, its source, its bytes
Taken = tuple[Any, int, int, Source | None, int]


class PairedAdmission:
    """One admission pass of ``runner`` over ``events`` (see the module docstring).

    >>> from streameval.pipeline.config import ExperimentConfig
    >>> from streameval.pipeline.runner import StreamRunner
    >>> runner = StreamRunner(ExperimentConfig("s", ["majority"]), emit_predictions=False)
    >>> events, x = [], {"v": 1.0}
    >>> for i, y in enumerate("aaab"):
    ...     f = FeatureEvent("s", str(i), float(i), x, 2 * i)
    ...     events += [f, LabelEvent("s", f.id, f.ts, y, 2 * i + 1)]
    >>> admission = PairedAdmission(runner, [(e, None, 0) for e in events], [], [])
    >>> admission.admit_all(), admission.n_paired  # 'a' and 'b' are new by themselves
    (True, 2)
    >>> runner.experiment.results()["learners"]["majority"]["accuracy"]  # None, a, a, a
    0.5
    """

    def __init__(
        self,
        runner: StreamRunner,
        events: list[Queued],
        outputs: list[Output],
        rejections: list[Rejection],
    ) -> None:
        self.runner = runner
        self.exp: Any = runner.experiment
        self.events = events
        self.outputs = outputs
        self.rejections = rejections
        # per released event: events admitted, rejections before its admission, and the
        # guard's count of retimed events after it
        self.marks: list[tuple[int, int, int]] = []
        self.opened: Taken | None = None  # features waiting for their label
        self.run = InstanceBlock()  # the pairs to evaluate together
        # each pair's features and label; the index of the features in ``events`` for a pair
        # taken by _plain_pairs (the events as released, at the indexes i and i + 1)
        self.where: list[tuple[Taken, Taken] | int] = []
        self.n_paired = 0
        self.window = WINDOW_MIN * 8  # pairs _bulk_pairs looks at next

    def admit_all(self) -> bool:
        """Admit and evaluate every event; False when the experiment failed on one."""
        guard, buffer = self.runner.guard, self.exp.buffer

        def is_pending(uid: str) -> bool:
            opened = self.opened
            return (opened is not None and opened[0].id == uid) or uid in buffer.pending

        events, n = self.events, len(self.events)
        index = self._plain_pairs(0)
        while index < n:
            event, source, nbytes = events[index]
            before = len(self.rejections)
            admitted, rejected = guard.admit(event, is_pending, source, nbytes)
            if rejected:
                self.rejections.extend(rejected)
            self.marks.append((len(admitted), before, guard.n_retimed))
            for pos, ok in enumerate(admitted):
                taken = (ok, index, pos, source, nbytes)
                if self._pair(taken):
                    continue
                if not (self._flush(index) and (self._pair(taken) or self._one(taken, index))):
                    return False
            index = self._plain_pairs(index + 1)
        return self._flush(n - 1)

    def _plain_pairs(self, index: int) -> int:
        """Add to the run the pairs released from ``index`` on that the guard passes as
        they are (:meth:`~streameval.pipeline.ingest.IngestGuard.admits_pair`) and
        :meth:`_pair` would join: new features of an instance not pending, then at once
        its label, of a class the experiment has learned. Returns the index after them.

        What the loop of :meth:`admit_all` does with such a pair, in one step: the loop's two
        calls of the guard's ``admit`` and of :meth:`_pair` per instance cost more than the
        bulk evaluation of the two baselines (Electricity: the admission took 145 ms, the
        evaluation 45 ms of it; 110 ms with this step).
        """
        index = self._bulk_pairs(index)
        events, n = self.events, len(self.events)
        if self.opened is not None or index + 1 >= n:
            return index
        admits, known = self.runner.guard.admits_pair, self._known
        pending, evicted = self.exp.buffer.pending, self.exp.buffer.evicted
        run, where = self.run, self.where
        mark = (1, len(self.rejections), self.runner.guard.n_retimed)  # none of them changes
        while index + 1 < n:
            f_item, l_item = events[index], events[index + 1]
            features, label = f_item[0], l_item[0]
            if features.__class__ is not FeatureEvent or label.__class__ is not LabelEvent:
                break
            uid = features.id
            if uid in pending or (evicted and uid in evicted):
                break
            if not known(label.y) or not admits(features, label):
                break
            self.marks += (mark, mark)
            run.add(uid, features.ts, features.x, label.y)
            where.append(index)
            index += 2
        return index

    def _bulk_pairs(self, index: int) -> int:
        """What :meth:`_plain_pairs`' loop does with the pairs released from ``index`` on
        (features, then their label), done over windows of them at once while it would
        take every pair of a window (the guard's
        :meth:`~streameval.pipeline.ingest.IngestGuard.admits_pairs`). Returns the index
        after the windows taken.

        A window that might hold a pair the loop would stop at is left to the loop and the
        next window is half as long (at least :data:`WINDOW_MIN` pairs), a window taken
        makes the next one twice as long: a miss costs no more than the pairs it looked at,
        and a stream with bad events everywhere costs a few checks per bad event.
        Electricity's pairs through the worker: 53 ms in windows, 67 ms by the loop alone.
        """
        while True:
            m = min((len(self.events) - index) // 2, self.window)
            if m < 2 or self.opened is not None or self.runner.guard.n_orphans:
                return index
            taken = self._window(index, m)
            if not taken:
                self.window = max(WINDOW_MIN, self.window // 2)
                return index
            index += 2 * taken
            self.window *= 2

    def _window(self, index: int, m: int) -> int:
        """Take the ``m`` pairs from ``index`` on (fewer when an event of another kind
        comes before) when the loop would take them all; how many were taken (0: none)."""
        events = self.events
        fs = [item[0] for item in events[index : index + 2 * m : 2]]
        ls = [item[0] for item in events[index + 1 : index + 2 * m : 2]]
        if {f.__class__ for f in fs} != {FeatureEvent} or {e.__class__ for e in ls} != {LabelEvent}:
            m = next(
                i
                for i, (f, lab) in enumerate(zip(fs, ls, strict=True))
                if f.__class__ is not FeatureEvent or lab.__class__ is not LabelEvent
            )  # the pairs before the first event of another kind
            if m < 2:
                return 0
            del fs[m:], ls[m:]
        ids = [f.id for f in fs]
        pending, evicted = self.exp.buffer.pending, self.exp.buffer.evicted
        if not pending.keys().isdisjoint(ids) or (evicted and not evicted.keys().isdisjoint(ids)):
            return 0
        ys = [lab.y for lab in ls]
        if not all(map(self._known, set(ys))):
            return 0
        if not self.runner.guard.admits_pairs(fs, ls):
            return 0
        self.marks += [(1, len(self.rejections), self.runner.guard.n_retimed)] * (2 * m)
        run = self.run
        run.ids += ids
        run.ts += [f.ts for f in fs]
        run.xs += [f.x for f in fs]
        run.ys += ys
        self.where += range(index, index + 2 * m, 2)
        return m

    def _pair(self, taken: Taken) -> bool:
        """Open a pair with new features, or close the open one with their label."""
        ok = taken[0]
        opened = self.opened
        if opened is None:
            buffer = self.exp.buffer
            if ok.__class__ is not FeatureEvent or ok.id in buffer.pending:
                return False
            if buffer.evicted and ok.id in buffer.evicted:
                return False
            self.opened = taken
            return True
        features = opened[0]
        if ok.__class__ is not LabelEvent or ok.id != features.id or ok.ts != features.ts:
            return False
        if not self._known(ok.y):
            return False
        self.run.add(features.id, features.ts, features.x, ok.y)
        self.where.append((opened, taken))
        self.opened = None
        return True

    def _known(self, y: Hashable) -> bool:
        """Whether ``y`` is a label the experiment has learned (a new one is coded by
        itself: its code and the classes' order come from the one-by-one pass)."""
        code = self.exp.codes.index.get(y)
        return code is not None and code in self.exp._is_label

    def _flush(self, index: int) -> bool:
        """Evaluate the run of pairs, then the open features by themselves; False when the
        experiment failed. ``index``: the released event being admitted."""
        if self.run:
            first = self.exp.n_instances
            try:
                self.exp.immediate(self.run, self.outputs)
            except Exception as exc:
                self._failed(exc, self._culprit(exc, first), index)
                return False
            self.n_paired += len(self.run)
            self.run = InstanceBlock()
            self.where.clear()
        opened, self.opened = self.opened, None
        return opened is None or self._one(opened, index)

    def _culprit(self, exc: Exception, first: int) -> Taken:
        """The event of the run the experiment failed on: the features of the instance a
        learner failed to predict, the label of the one it failed to learn (another
        exception: the features of the last instance begun)."""
        j = min(max(self.exp.n_instances - first - 1, 0), len(self.where) - 1)
        features, label = self._pair_at(self.where[j])
        return label if isinstance(exc, LearnerFailed) and exc.step == "learn" else features

    def _pair_at(self, where: tuple[Taken, Taken] | int) -> tuple[Taken, Taken]:
        """The features and label of a pair of the run (see ``where``)."""
        if isinstance(where, tuple):
            return where
        (f, f_source, f_bytes), (lab, l_source, l_bytes) = self.events[where : where + 2]
        return (f, where, 0, f_source, f_bytes), (lab, where + 1, 0, l_source, l_bytes)

    def _one(self, taken: Taken, index: int) -> bool:
        """Evaluate one admitted event by itself; False when the experiment failed on it."""
        ok, _, _, _, nbytes = taken
        exp = self.exp
        try:
            if ok.__class__ is FeatureEvent:
                out = exp.features(ok.id, ok.ts, ok.x, nbytes)
            elif ok.__class__ is LabelEvent:
                out = exp.label(ok.id, ok.ts, ok.y)
            else:
                out = exp.process(ok, nbytes)
        except Exception as exc:  # isolate the stream: see the runner's docstring
            self._failed(exc, taken, index)
            return False
        if out:
            self.outputs.extend(out)
        if ok.__class__ is EndOfStream:
            self.runner.finished = True
        return True

    def _failed(self, exc: Exception, taken: Taken, index: int) -> None:
        """Reject the event the experiment failed on, count what comes after it as the
        one-by-one admission would, and stop the stream."""
        ok, at, pos, source, _ = taken
        runner, guard = self.runner, self.runner.guard
        n_admitted, _, retimed = self.marks[at]
        later = self.marks[at + 1 : index + 1]  # released events the guard took after it
        n_after = n_admitted - 1 - pos + (len(self.events) - 1 - index)
        if later:
            withdrawn = self.rejections[later[0][1] :]
            del self.rejections[later[0][1] :]
            for r in withdrawn:
                guard.counts[r.kind] -= 1
                if not guard.counts[r.kind]:
                    del guard.counts[r.kind]
            guard.n_retimed = retimed
            n_after += sum(m[0] for m in later) + len(withdrawn)
        reason = describe(exc)
        self.rejections.append(Rejection.experiment_error(ok, source, reason))
        runner.n_after_failure += n_after
        runner.fail(reason)
