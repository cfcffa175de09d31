"""Labels in the order they were first seen, for river models that keep them in a ``set``.

River's ``HoeffdingAdaptiveTreeClassifier`` and ``KNNClassifier`` record the
labels they have learned in a ``set`` (``self.classes``) and build every
probability dict in that set's iteration order: ``{c: 0.0 for c in
self.classes}``, then the leaf's (or the neighbours') votes, then a division
by the sum of the values, added up in that same order. A ``set`` of ``str``
iterates in an order that depends on the interpreter's string-hash seed
(``PYTHONHASHSEED``), and a floating-point sum of three or more terms depends
on its order, so the same model on the same stream gave probabilities that
differed in their last bits from one process to the next (labels predicted by
the ``argmax`` of :mod:`~streameval.pipeline.learners.base` never change, since
every probability is divided by the same total, but a score such as the
prequential AUC of one class of a multiclass stream does).

:func:`order_labels` replaces such a model's empty ``set`` by a
:class:`LabelSet`, which offers what those models use of a set (``add``,
``in``, ``len``, iteration, truth value) and iterates in first-seen order: the
probabilities then depend on the stream only. The batched tree predictions of
:mod:`~streameval.pipeline.learners.tree_batch` read ``model.classes`` in the same
order, so they still agree with ``predict_proba_one`` to the last bit.

>>> from river import tree
>>> model = order_labels(tree.HoeffdingAdaptiveTreeClassifier(seed=0))
>>> for y in ["b", "c", "a", "c"]:
...     model.learn_one({"x": 1.0}, y)
>>> model.classes
LabelSet(['b', 'c', 'a'])
>>> list(model.predict_proba_one({"x": 1.0}))
['b', 'c', 'a']
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar

from river import compose

M = TypeVar("M")


class LabelSet(dict[Hashable, None]):
    """A set of labels that iterates in insertion order (a ``dict`` with ``None`` values).

    >>> labels = LabelSet()
    >>> labels.add("UP"); labels.add("DOWN"); labels.add("UP")
    >>> list(labels), "DOWN" in labels, len(labels)
    (['UP', 'DOWN'], True, 2)
    """

    def add(self, label: Hashable) -> None:
        self[label] = None

    def __repr__(self) -> str:
        return f"LabelSet({list(self)!r})"


def order_labels(model: M) -> M:
    """``model`` (or the last step of a river pipeline) with its ``classes`` set, if it
    has one, replaced by a :class:`LabelSet` of the same labels (sorted by ``str``
    when there are any; a fresh model has none). Returns ``model``.

    >>> from river import neighbors, preprocessing
    >>> pipe = order_labels(preprocessing.StandardScaler() | neighbors.KNNClassifier())
    >>> pipe["KNNClassifier"].classes
    LabelSet([])
    """
    last: Any = list(model.steps.values())[-1] if isinstance(model, compose.Pipeline) else model
    classes = getattr(last, "classes", None)
    if type(classes) is set:
        last.classes = LabelSet.fromkeys(sorted(classes, key=str))
    return model
