"""The reference baselines, No-Change and Majority, run beside a stream's learners.

They see the stream under exactly the protocol the learners see: a first
prediction when the features arrive, one per re-evaluation round, and the label
once it is scored. No-Change's prediction is ``y_per`` and Majority's ``y_maj``
of the kappa family (``temporal-dependence-evaluation-journal.txt`` eq. 13,
sect. 4.6), so ``kappa_per`` of a No-Change learner and ``kappa_m`` of a
Majority learner are exactly 0 under any label delay and in every bin. The keys
:data:`PER` and :data:`MAJ` name their predictions in the pending buffer.

>>> from streameval.pipeline.protocol import protocol_of
>>> refs = References(protocol_of("papers", None), {"prequential": None})
>>> refs.predict({})  # no label yet: the protocol's cold start
{'__per__': None, '__maj__': None}
>>> for y in "aab":
...     refs.learn({}, y)
>>> refs.predict({})
{'__per__': 'b', '__maj__': 'a'}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streameval.pipeline.learners.baselines import Majority, NoChange
from streameval.pipeline.reeval.rounds import Rounds, label_of

PER = "__per__"
MAJ = "__maj__"


@dataclass
class LabelReferences:
    """What No-Change and Majority predicted for the instance being labelled."""

    per_first: Any = None
    maj_first: Any = None
    per_bins: list[Any] = field(default_factory=list)
    maj_bins: list[Any] = field(default_factory=list)
    maj_by: dict[str, Any] | None = None  # per estimator, when the protocol says so


class References:
    """No-Change and Majority for one classification stream.

    ``windows`` maps each estimator to its window (``None``: the whole stream); the
    protocol decides whether Majority's reference is kept per estimator
    (:meth:`~streameval.pipeline.protocol.Protocol.majority_references`).
    """

    def __init__(self, protocol: Any, windows: Mapping[str, int | None]) -> None:
        self.protocol = protocol
        self.per = NoChange()
        self.maj = Majority()
        self.maj_by = protocol.majority_references(windows)

    def predict(self, x: Any) -> dict[str, Any]:
        """Each reference's prediction for ``x``, cold start as the protocol says."""
        cold_start = self.protocol.cold_start
        return {PER: cold_start(label_of(self.per, x)), MAJ: cold_start(label_of(self.maj, x))}

    def at_label(
        self, inst: Any, y: Any, ts: float, rounds: Rounds | None, unchanged: bool
    ) -> LabelReferences:
        """Their first predictions of ``inst`` and, with ``rounds`` (re-evaluation),
        their B + 2 bins; ``unchanged`` says their final prediction is their first."""
        refs = LabelReferences()
        if self.maj_by is not None:  # the label's majority (including it), per estimator
            refs.maj_by = {name: m.update(y) for name, m in self.maj_by.items()}
        refs.per_first = inst.history[PER][0][1]
        refs.maj_first = inst.history[MAJ][0][1]
        if rounds is None:
            return refs
        if unchanged:
            per_final, maj_final = refs.per_first, refs.maj_first
        else:
            final = self.predict(inst.x)
            per_final, maj_final = final[PER], final[MAJ]
        refs.per_bins = rounds.reference_bins(inst, PER, ts, per_final)
        refs.maj_bins = rounds.reference_bins(inst, MAJ, ts, maj_final)
        return refs

    def learn(self, x: Any, y: Any) -> None:
        """Both references learn the label."""
        self.per.learn_one(x, y)
        self.maj.learn_one(x, y)
