"""The prequential AUC's scores of the two reference baselines, kept without calling them.

A learner that is an untrained No-Change or whole-history Majority makes the reference
baselines' predictions (:func:`~streameval.pipeline.columnar.callers.reference_of`), so the
columnar core reads them off its own running state instead of calling the learner. The
prequential AUC also needs each prediction's score of the positive class: the value
:func:`~streameval.pipeline.calls.positive_score` gives for the learner's probabilities.
:class:`ReferenceScores` keeps both scores as they stand after every label, computed as that
function computes them from the probabilities the learners would return, float for float:

* No-Change's probabilities are 1 for the last label and 0 for every other label learned,
  so its score is 1 when the last label is the positive class, else 0;
* Majority's are the frequencies ``n_c / n`` of the labels learned, in the order they were
  first learned; its score is the positive class's frequency over their sum, summed in
  that order.

The positive class is the label equal to the ``positive`` string if one was learned, else
the first learned label whose ``str`` is ``positive`` (the lookup of ``positive_score``).

>>> refs = ReferenceScores("b")
>>> labels, counts = ["a", "b"], [0, 0]
>>> for code in (0, 1, 1):
...     if counts[code] == 0:
...         refs.learned(code, labels)
...     counts[code] += 1
...     refs.update(code, counts)
>>> refs.per, refs.maj  # the last label was "b"; "b" is 2 of 3
(1.0, 0.6666666666666666)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


class ReferenceScores:
    """No-Change's (``per``) and Majority's (``maj``) positive-class scores now."""

    def __init__(self, positive: str) -> None:
        self.positive = positive
        self.order: list[int] = []  # label codes in the order first learned
        self.code: int | None = None  # the positive class's code (None: not learned)
        self.per = 0.0
        self.maj = 0.0

    def learned(self, code: int, labels: Sequence[Hashable]) -> None:
        """Label ``code`` (``labels[code]``) is learned for the first time."""
        self.order.append(code)
        first = None
        for c in self.order:
            label = labels[c]
            if label == self.positive:
                self.code = c
                return
            if first is None and str(label) == self.positive:
                first = c
        self.code = first

    def update(self, last: int, counts: Sequence[int]) -> None:
        """The scores after a label: ``last`` its code, ``counts`` every code's count."""
        pos = self.code
        self.per = 1.0 if last == pos else 0.0
        if pos is None:
            self.maj = 0.0
            return
        total = 0
        for c in self.order:
            total += counts[c]
        norm = 0
        for c in self.order:
            norm += counts[c] / total
        self.maj = counts[pos] / total / norm
