"""The second pass of test-then-train in bulk: a block's evaluation as array operations.

:meth:`~streameval.pipeline.columnar.experiment.ColumnarExperiment.immediate` calls the
learners for a block of instances first
(:func:`~streameval.pipeline.columnar.immediate.ask_and_learn`) and evaluates their
answers after. Once the learners have answered, what is left of each
instance is arithmetic on labels
(``delayed-labelling-continuous-reevaluation.txt``, Algorithm 1 with no delay):

* each learner's first prediction is the most probable label of its answer, and its
  score the positive class's probability: one call of the caller's ``answer`` per
  instance and learner, the only per-instance Python left;
* No-Change predicts the label before (the label column shifted by one), Majority the
  most frequent label so far, ties to the smallest ``str`` (the argmax of the running
  class counts, a cumulative sum: :func:`~streameval.pipeline.columnar.labels.majority`,
  ``temporal-dependence-evaluation-journal.txt`` eq. 6 and 7);
* their positive-class scores are those of
  :class:`~streameval.pipeline.columnar.references.ReferenceScores`: 1 when the label
  before is the positive class, and the positive class's share of the counts, summed in
  the order the classes were first learned, float for float;
* the rows go on the scoreboard as one :class:`~streameval.pipeline.columnar.segment.Segment`
  per snapshot interval, and the experiment's counts and baselines are left as the
  instance-by-instance pass would leave them.

:func:`score_in_bulk` does this when the block allows it -- nothing pending or evicted
before it, every label of the block already learned (so the positive class and the
order of the classes cannot change inside it), no two labels with the same ``str`` --
and otherwise does nothing and says so: the instance-by-instance pass then runs, as it
does when a learner's answer cannot be read.

>>> _intervals(n_labelled=95, n=12, every=100)  # a snapshot after the 100th label
[(0, 5), (5, 12)]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import numpy as np
from streameval.pipeline.columnar.block import InstanceBlock
from streameval.pipeline.columnar.labels import majority, running_counts, share
from streameval.pipeline.columnar.river_loop import Answered
from streameval.pipeline.columnar.segment import NONE, Segment
from streameval.pipeline.streams.base import Instance

if TYPE_CHECKING:
    from streameval.pipeline.columnar.experiment import ColumnarExperiment
    from streameval.pipeline.events import Output

_UNKNOWN = -2  # a label never coded: the block is not scored in bulk


def score_in_bulk(
    exp: ColumnarExperiment,
    instances: Sequence[Instance],
    asked: list[list[Any]],
    out: list[Output] | None = None,
) -> bool:
    """Evaluate ``instances`` (each one's features, then its label) from the answers the
    called learners gave for them, ``asked`` (one list per called learner, in learner
    order); the periodic snapshots it makes go to ``out`` too, when given. ``False``, with
    nothing changed, when the block is not one for the bulk pass (see the module
    docstring)."""
    rows = InstanceBlock.of(instances)
    n = len(rows)
    y = _label_codes(exp, rows.ys)
    if y is None or not n:
        return False
    first = exp.n_instances
    answered = _answers(exp, asked, first)
    if answered is None:
        return False
    pred, score = _learner_columns(exp, answered, n)
    counts = running_counts(exp._counts, y, len(exp.codes))
    labels = exp.codes.labels
    per = np.concatenate(([exp._per], y)).astype(np.int32)
    maj = majority(counts, labels)
    per_score = maj_score = None
    refs = exp._refs
    if refs is not None:
        pos = refs.code
        per_score = (per == pos).astype(float) if pos is not None else np.zeros(n + 1)
        maj_score = share(counts, refs.order, pos)
    _fill_references(exp, pred, score, per, maj, per_score, maj_score, n)
    ts = list(accumulate(rows.ts, _later, initial=exp.last_ts))
    seg = Segment(y, np.arange(first, first + n, dtype=np.int64), per[:n], maj[:n], pred, score)
    for a, b in _intervals(exp.n_labelled, n, exp._every):
        exp.hold(seg.cut(a, b))  # after the labels the one-by-one pass holds
        exp.n_instances, exp.n_labelled = first + b, exp.n_labelled + (b - a)
        exp.last_ts = ts[b]
        exp.max_pending = max(exp.max_pending, 1)
        exp._per, exp._maj, exp._counts = int(per[b]), int(maj[b]), counts[b].tolist()
        if refs is not None:
            refs.per, refs.maj = float(per_score[b]), float(maj_score[b])  # type: ignore[index]
        if exp._every and exp.n_labelled % exp._every == 0:
            snapshots = exp.snapshots("periodic")
            exp.curves.extend(snapshots)
            if out is not None:
                out.extend(snapshots)
    return True


def _later(last: float, ts: float) -> float:
    """The event time after ``ts`` arrives: the experiment keeps the latest one."""
    return ts if ts > last else last


def _label_codes(exp: ColumnarExperiment, ys: Sequence[Hashable]) -> np.ndarray | None:
    """The codes of the block's labels, or ``None`` when one is not yet a learned label,
    nothing pending or evicted can be taken for granted, or two labels share a ``str``."""
    buffer = exp.buffer
    if buffer.pending or buffer.evicted:
        return None
    index, learned = exp.codes.index, exp._is_label
    try:
        codes = [index.get(y, _UNKNOWN) for y in ys]
    except TypeError:  # a label that is not hashable: the one-by-one pass says where
        return None
    if not learned.issuperset(codes):
        return None
    labels = exp.codes.labels
    if len({str(labels[c]) for c in learned}) != len(learned):
        return None
    return np.asarray(codes, dtype=np.int32)


def _answers(
    exp: ColumnarExperiment, asked: list[list[Any]], first: int
) -> list[tuple[list[Hashable | None], list[float]]] | None:
    """Each called learner's predicted labels and positive-class scores, or ``None`` when
    an answer cannot be read (the instance-by-instance pass then reports it)."""
    out = []
    called = [c for c in exp._callers if c.reference is None]
    for caller, answers in zip(called, asked, strict=True):
        if isinstance(answers, Answered):  # read as they were made
            out.append((answers.labels, answers.scores))
            continue
        answer = caller.answer
        try:
            pairs = [answer(p, at) for at, p in enumerate(answers, first)]  # type: ignore[misc]
        except Exception:
            return None
        out.append(([p[0] for p in pairs], [p[1] for p in pairs]))
    return out


def _learner_columns(
    exp: ColumnarExperiment, answered: list[tuple[list[Any], list[float]]], n: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """The called learners' columns of predicted codes and scores; a label never coded
    before gets its code in the order the instance-by-instance pass gives it (instance by
    instance, learner by learner)."""
    codes = exp.codes
    width = len(exp._callers)
    pred = np.empty((n, width), dtype=np.int32)
    score = np.zeros((n, width)) if exp._auc else None
    index = codes.index
    called = [j for j, c in enumerate(exp._callers) if c.reference is None]
    if any(y is not None and y not in index for ys, _ in answered for y in ys):
        for i in range(n):
            for ys, _ in answered:
                if ys[i] is not None:
                    codes.code(ys[i])
    for j, (ys, scores) in zip(called, answered, strict=True):
        pred[:, j] = [NONE if v is None else index[v] for v in ys]
        if score is not None:
            score[:, j] = scores
    return pred, score


def _fill_references(
    exp: ColumnarExperiment,
    pred: np.ndarray,
    score: np.ndarray | None,
    per: np.ndarray,
    maj: np.ndarray,
    per_score: np.ndarray | None,
    maj_score: np.ndarray | None,
    n: int,
) -> None:
    """The columns of the learners the reference baselines answer for (never called)."""
    for j, caller in enumerate(exp._callers):
        if caller.reference is None:
            continue
        pred[:, j] = (maj if caller.reference else per)[:n]
        if score is not None:
            ref_score = maj_score if caller.reference else per_score
            score[:, j] = ref_score[:n]  # type: ignore[index]


def _intervals(n_labelled: int, n: int, every: int | None) -> list[tuple[int, int]]:
    """The block's labels ``[a, b)`` cut after each snapshot (every ``every`` labels)."""
    if not every:
        return [(0, n)]
    cuts, a = [], 0
    while a < n:
        b = min(n, a + every - (n_labelled + a) % every)
        cuts.append((a, b))
        a = b
    return cuts
