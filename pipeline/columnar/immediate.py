"""Test-then-train in two passes: the learners' calls for a block of instances first, the
evaluation of their answers after.

With immediate labels (delay 0) each instance is predicted by every learner, then
learned by every learner, before the next one arrives
(``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1 with no delay). The
evaluation around those calls -- class codes, the reference baselines, the rows of the
scoreboard, the snapshots -- reads the learners' answers and nothing else of them. When
nothing it does between two calls can read or change a learner (no wrapper reads the
released labels, no drift detector resets a learner, no output is made per event), the
calls of a whole block can be made first, in the order the per-instance loop makes them,
and the evaluation replayed on their answers after: every learner sees the same calls
with the same arguments in the same order, so the results are the same.

Why: a model's code and the evaluation's, interleaved instance by instance, slow each
other down (on Electricity, the evaluation's own ~5 us per instance becomes ~10 us next to
a naive Bayes model, and the model itself runs ~8 % slower than in River's bare loop);
each in a tight loop of its own runs at its own speed.

>>> from streameval.pipeline.columnar.callers import Caller
>>> calls = []
>>> ask = lambda x, xc, at: calls.append(("ask", at)) or {"a": x["v"], "b": 1 - x["v"]}
>>> learn = lambda x, xc, y, at: calls.append(("learn", at))
>>> c = Caller("m", None, learn, ask=ask, answer=lambda p, at: (max(p, key=p.get), 0.0))
>>> rows = [Instance(str(i), 0.0, {"v": v}, "a") for i, v in enumerate([0.9, 0.2])]
>>> asked, done, failure = ask_and_learn([c], rows, 0, None)
>>> done, failure, calls
(2, None, [('ask', 0), ('learn', 0), ('ask', 1), ('learn', 1)])
>>> [c.answer(p, 0)[0] for p in asked[0]]
['a', 'b']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.columnar.callers import Caller, Predict
from streameval.pipeline.columnar.river_loop import Answered
from streameval.pipeline.failure import LearnerFailed
from streameval.pipeline.streams.base import Instance

if TYPE_CHECKING:
    from streameval.pipeline.columnar.experiment import ColumnarExperiment
    from streameval.pipeline.events import Output

#: Instances whose learners' calls are made before their evaluation.
BLOCK = 512


def ask_and_learn(
    callers: Sequence[Caller],
    instances: Sequence[Instance],
    first_at: int,
    clean: Callable[[Any], Any] | None,
) -> tuple[list[list[Any]], int, LearnerFailed | None]:
    """The first pass: for each instance (arrival index ``first_at``, ``first_at + 1``...),
    every called learner's ``ask``, then every one's ``learn``, as the per-instance loop
    calls them. ``clean`` gives the features the learners that want them cleaned get.
    A learner with a ``block`` call is given the whole block at once: the learners share
    nothing, so each sees the calls it would see, in the same order.

    Returns each called learner's raw answers for the instances to evaluate, their
    number, and the failure that stopped the pass: the one the per-instance loop would
    meet first. The instance it names is evaluated when a learner failed to learn it
    (every learner had answered it, as the per-instance loop evaluates it), else not."""
    rows = InstanceBlock.of(instances)
    called = [c for c in callers if c.reference is None]
    each = [c for c in called if c.block is None]
    answers, failure = _one_by_one(each, rows, first_at, clean)
    asked = dict(zip(map(id, each), answers, strict=True))
    failures = [] if failure is None else [failure]
    for c in called:
        if c.block is not None:
            asked[id(c)], failed = c.block(rows, first_at, clean if c.cleaned else None)
            failures += [failed] if failed is not None else []
    if not failures:
        return [asked[id(c)] for c in called], len(rows), None
    position = {c.name: i for i, c in enumerate(called)}
    first = min(failures, key=lambda f: (f.index, f.step == "learn", position[f.name]))
    done = first.index - first_at + (first.step == "learn")  # every learner answered it
    return [asked[id(c)][:done] for c in called], done, first


def _one_by_one(
    callers: Sequence[Caller],
    rows: InstanceBlock,
    first_at: int,
    clean: Callable[[Any], Any] | None,
) -> tuple[list[list[Any]], LearnerFailed | None]:
    """:func:`ask_and_learn` of ``callers`` instance by instance: their answers, and the
    failure that stopped the loop."""
    asked: list[list[Any]] = [[] for _ in callers]
    if not callers:
        return asked, None
    pairs = [(c.ask, out.append) for c, out in zip(callers, asked, strict=True)]
    learns = [c.learn for c in callers]
    at = first_at
    try:
        for x, y in zip(rows.xs, rows.ys, strict=True):
            xc = clean(x) if clean is not None else x
            for ask, keep in pairs:
                keep(ask(x, xc, at))  # type: ignore[misc]
            for learn in learns:
                learn(x, xc, y, at)
            at += 1
    except LearnerFailed as failure:
        return asked, failure
    return asked, None


def replay_answers(
    exp: ColumnarExperiment,
    instances: Sequence[Instance],
    asked: list[list[Any]],
    out: list[Output] | None = None,
) -> None:
    """The second pass instance by instance: ``exp``'s ``features`` then ``label`` of each
    instance, every called learner's ``predict`` handing back its answers of ``asked``
    and nothing learned (the learners have learned in the first pass); their outputs go
    to ``out`` when it is given."""
    replay = Replay(exp._callers, asked)
    saved = exp._predict, exp._learners, exp._cleans
    exp._predict, exp._learners, exp._cleans = replay.predict, [], False
    try:
        exp._each(instances, out)
    finally:
        exp._predict, exp._learners, exp._cleans = saved
    replay.check_used()


class Replay:
    """The second pass's stand-ins for the learners' ``predict``: each hands back, in
    order, the answers its learner gave in the first pass."""

    def __init__(self, callers: Sequence[Caller], asked: list[list[Any]]) -> None:
        self._left: list[Iterator[Any]] = []
        answers = iter(asked)
        self.predict: list[tuple[int | None, Predict]] = []
        for c in callers:
            if c.reference is not None:
                self.predict.append((c.reference, c.predict))
                continue
            given = next(answers)
            left = iter(given)
            self._left.append(left)
            answer = _as_read if isinstance(given, Answered) else c.answer
            self.predict.append((None, _replayed(left, answer)))  # type: ignore[arg-type]

    def check_used(self) -> None:
        """Every answer was read: the second pass made the first pass's calls."""
        if any(next(left, _END) is not _END for left in self._left):
            raise RuntimeError("the evaluation read fewer answers than the learners gave")


_END = object()


def _as_read(pair: Any, at: int) -> Any:
    """The ``answer`` of an answer already read (:class:`~.river_loop.Answered`)."""
    return pair


def _replayed(left: Iterator[Any], answer: Callable[[Any, int], Any]) -> Predict:
    take = left.__next__

    def predict(x: Any, xc: Any, at: int) -> Any:
        return answer(take(), at)

    return predict
