"""Evaluation protocols: the details the papers leave open, decided one way or MOA's way.

Continuous re-evaluation (``delayed-labelling-continuous-reevaluation.txt``, Alg. 1)
and the Kappa family (``temporal-dependence-evaluation-journal.txt``, sect. 4) leave
some details to the implementation. An :class:`~streameval.pipeline.experiment.Experiment`
asks its protocol for each of them, so the core has no branch per protocol:

``papers`` (the default) decides them as :mod:`streameval.pipeline.experiment`
documents; ``moa`` as the authors' MOA code does:

* cold start -- papers: an untrained learner abstains (``None``: never right, in no
  column of ``P_h``); moa: it predicts class index 0;
* equal event times -- papers: features before labels (delay N: instance ``i`` is
  first predicted knowing the labels up to ``i - N - 1``); moa: labels first (up to
  ``i - N``);
* re-prediction -- papers: at the ``Km``-th label after arrival, by a model that has
  learned ``Km - 1`` of them; moa: at the ``(Km + 1)``-th, by a model that has learned
  ``Km``;
* a bin's prediction -- papers: ``d_D``, the label in force longest over the bin, ties
  to the earliest in force; moa: MOA's mapping (:mod:`.reeval.moa_bins`), ties to the
  lowest class index;
* the ``kappa_m`` reference -- papers: the Majority baseline's prediction, made before
  the label is learned; moa: the majority of the labels so far *including* the one
  scored (windowed: inside the window), ties to the lowest class index.

The learners' own ties (a Majority baseline's equal counts) still go to the smallest
label by ``str``, MOA's to the lowest class index: the same whenever the class order is
sorted, as for every built-in dataset.

"Class index" is the position in the experiment's class order (``config.classes``;
a built-in dataset gives its own). Under ``moa`` the predictions of every instance are
kept, not only the changes: MOA's bin mapping counts re-predictions, not time alone.

>>> p = protocol_of("moa", ["DOWN", "UP"])
>>> p.cold_start(None), p.cold_start("UP"), p.labels_first, p.repredict_lag
('DOWN', 'UP', True, 1)
>>> q = protocol_of("papers")
>>> q.cold_start(None) is None, q.labels_first, q.repredict_lag
(True, False, 0)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from typing import Any

from streameval.pipeline.reeval.bins import History, dominant_per_bin
from streameval.pipeline.reeval.moa_bins import moa_bins

PROTOCOLS = ("papers", "moa")


class Protocol:
    """The papers' protocol, as :mod:`streameval.pipeline.experiment` documents it."""

    name = "papers"
    labels_first = False  # at equal event time: features first
    repredict_lag = 0  # the K-schedule counts from the first label after arrival
    compact = True  # a history may keep only the changes of label

    def cold_start(self, y_pred: Any) -> Any:
        """The prediction an untrained learner's answer ``y_pred`` stands for (``None``, no
        prediction, is the only answer a protocol may replace)."""
        return y_pred

    def middle_bins(self, history: History, t_start: float, t_end: float, n_bins: int) -> list:
        """Bins ``1..n_bins`` of a classification history (``d_D``, ties to the earliest)."""
        return dominant_per_bin(history, t_start, t_end, n_bins)

    def majority_references(self, windows: dict[str, int | None]) -> dict[str, Any] | None:
        """Per estimator, what gives ``y_maj`` from the label scored; ``None``: the
        Majority baseline's prediction."""
        return None


class MoaProtocol(Protocol):
    """The protocol of the authors' MOA code: cold start at class index 0, labels first
    at equal times, re-predictions one label later, MOA's bin mapping and references."""

    name = "moa"
    labels_first = True
    repredict_lag = 1
    compact = False

    def __init__(self, classes: Sequence[str]) -> None:
        if not classes:
            raise ValueError(
                "protocol moa needs the class order (class index 0 is its first class): "
                "give classes, or use a dataset that declares them"
            )
        self.classes = [str(c) for c in classes]
        self._index = {c: i for i, c in enumerate(self.classes)}

    def index(self, label: Hashable) -> int:
        """The class index of ``label``; classes outside the order come after it."""
        key = str(label)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self._index)
        return i

    def cold_start(self, y_pred: Any) -> Any:
        return self.classes[0] if y_pred is None else y_pred

    def middle_bins(self, history: History, t_start: float, t_end: float, n_bins: int) -> list:
        return moa_bins(history, t_start, t_end, n_bins, self.index)

    def majority_references(self, windows: dict[str, int | None]) -> dict[str, Any]:
        return {name: LabelMajority(self.index, window) for name, window in windows.items()}


class LabelMajority:
    """The majority of the labels seen so far, the newest included (MOA's ``kappa_m``
    reference), over all of them or the last ``window``; ties to the lowest class index.

    >>> m = LabelMajority({"a": 0, "b": 1}.__getitem__, window=2)
    >>> [m.update(y) for y in "abba"]
    ['a', 'a', 'b', 'a']
    """

    def __init__(self, index: Any, window: int | None = None) -> None:
        self.index = index
        self.window = window
        self.counts: dict[Hashable, int] = {}
        self._recent: deque[Hashable] = deque()

    def update(self, y: Hashable) -> Hashable:
        """Count ``y``; the majority label now."""
        counts = self.counts
        counts[y] = counts.get(y, 0) + 1
        if self.window is not None:
            self._recent.append(y)
            if len(self._recent) > self.window:
                counts[self._recent.popleft()] -= 1
        return min(counts, key=lambda c: (-counts[c], self.index(c)))


def labels_first(name: str) -> bool:
    """Whether protocol ``name`` puts labels before features at equal event times."""
    return {"papers": Protocol, "moa": MoaProtocol}[name].labels_first


def protocol_of(name: str, classes: Sequence[str] | None = None) -> Protocol:
    """The protocol named ``name`` (``papers`` or ``moa``); ``moa`` needs ``classes``."""
    if name == "papers":
        return Protocol()
    if name == "moa":
        return MoaProtocol(classes or [])
    raise ValueError(f"unknown protocol {name!r}: choose one of {', '.join(PROTOCOLS)}")
