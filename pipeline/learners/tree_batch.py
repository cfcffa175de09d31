"""Batched prediction for river's Hoeffding trees.

Continuous re-evaluation asks every learner for the probabilities of many
pending instances at once. River predicts one dict at a time; for the
Hoeffding trees with naive Bayes leaves that costs one Python call per
feature and class for every instance. :class:`TreeBatch` gives the same
answers for a whole batch:

1. every instance is routed to its leaf by the tree's own branch objects
   (``next`` and, when the split feature is missing or its value has no
   branch, ``most_common_path``, as river's ``Branch.walk`` does);
2. the instances are grouped by leaf and each leaf predicts for its group
   (:mod:`~streameval.pipeline.learners.tree_leaves`):
   ``mc`` leaves give their normalised class counts (river's own
   ``normalize_values_in_dict``), naive Bayes leaves (``nb``, and ``nba`` when
   river's rule ``nb_correct_weight >= mc_correct_weight`` picks naive Bayes)
   sum, in river's order, the log-prior of each class and the log-likelihood
   of each feature from the leaf's attribute observers: the Gaussian
   ``log_pdf`` of a numeric observer (a term that is ``-inf`` or undefined is
   left out), ``log(count / total)`` of a nominal observer (a value never seen
   with the class contributes nothing, as in river);
3. the log-likelihoods are normalised with river's log-sum-exp, using
   ``math.exp``/``math.log`` element by element
   (:mod:`~streameval.pipeline.learners.logmath`).

:class:`~river.tree.HoeffdingAdaptiveTreeClassifier` is done the same way: an
instance collects the leaves of the alternate trees met on its path (twice
when ``walk`` visits a node twice, as it does after a missing feature) and
its own leaf, each leaf's answer is divided by ``sum * error * error`` and
the sum renormalised, as river's ``predict_proba_one`` does. Whatever this
module does not know exactly (another leaf or observer type, an alternate
tree that is a subtree, a leaf without statistics, a value of an unexpected
type) is predicted by the model's own ``predict_proba_one``.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from river import tree as river_tree
from river.tree.nodes.branch import DTBranch, NumericBinaryBranch
from river.tree.nodes.hatc_nodes import AdaBranchClassifier
from river.tree.nodes.htc_nodes import LeafNaiveBayes, LeafNaiveBayesAdaptive
from river.utils.norm import normalize_values_in_dict
from streameval.pipeline.learners.base import argmax, argmax_rows
from streameval.pipeline.learners.frame import LazyFrame, NumericFrame, RowKey
from streameval.pipeline.learners.logmath import argmax_log_rows, log_sum_exp_normalise, row_sums
from streameval.pipeline.learners.tree_leaves import LeafAnswers
from streameval.pipeline.learners.tree_rank import Quadratic
from streameval.pipeline.learners.tree_round import TreeRound

Proba = dict[Hashable, float]


def _river(model: Any, x: dict[str, Any]) -> Proba:
    """River's own answer for ``x``, with ``float`` probabilities."""
    return {label: float(p) for label, p in model.predict_proba_one(x).items()}


class TreeBatch(LeafAnswers):
    """Batched ``predict_proba_one`` for one river Hoeffding tree classifier.

    Use :meth:`supports` to know whether a model can be handed to it. The
    object keeps a cache of leaf parameters; pickling drops it.

    >>> from river import tree
    >>> model = tree.HoeffdingTreeClassifier()
    >>> batch = TreeBatch()
    >>> batch.predict(model, [{"a": 1.0}])
    [{}]
    >>> model.learn_one({"a": 1.0}, "x"); model.learn_one({"a": 2.0}, "y")
    >>> batch.predict(model, [{"a": 1.0}]) == [model.predict_proba_one({"a": 1.0})]
    True
    """

    #: At most this many instances are put into one array at a time.
    chunk = 4096

    def __init__(self) -> None:
        self._cache = {}
        self._round = TreeRound()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cache = {}
        self._round = TreeRound()

    river_proba = staticmethod(_river)

    @staticmethod
    def supports(model: Any) -> bool:
        """Exactly river's Hoeffding tree or Hoeffding adaptive tree classifier."""
        return type(model) in (
            river_tree.HoeffdingTreeClassifier,
            river_tree.HoeffdingAdaptiveTreeClassifier,
        )

    def predict(
        self,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: NumericFrame | None = None,
    ) -> list[Proba]:
        """``[model.predict_proba_one(x) for x in xs]`` (with ``float``
        probabilities), in one pass per leaf; ``frame``, if given, must be
        ``NumericFrame(xs)`` (else it is made when a naive Bayes leaf needs it)."""
        if not xs:
            return []
        if len(xs) > self.chunk:
            out: list[Proba] = []
            for start in range(0, len(xs), self.chunk):
                out.extend(self.predict(model, xs[start : start + self.chunk]))
            return out
        if model._root is None:
            return [_river(model, x) for x in xs]
        frames = LazyFrame(xs, frame)
        if type(model) is river_tree.HoeffdingAdaptiveTreeClassifier:
            return self._predict_adaptive(model, xs, frames)
        return self._predict_plain(model, xs, frames)

    # ------------------------------------------------------------------ routing

    @staticmethod
    def _route(root: Any, x: dict[str, Any], common: dict[int, Any]) -> Any:
        """The leaf of ``x`` (``Branch.traverse(x, until_leaf=True)``)."""
        node = root
        while isinstance(node, DTBranch):
            try:
                node = node.next(x)
            except KeyError:
                key = id(node)
                child = common.get(key)
                if child is None:
                    child = common[key] = node.most_common_path()[1]
                node = child
        return node

    @staticmethod
    def _route_adaptive(root: Any, x: dict[str, Any], common: dict[int, Any]) -> list[Any] | None:
        """The leaves whose answers HAT adds up for ``x``; ``None`` when an
        alternate tree is a subtree (left to river)."""
        found: list[Any] = []
        node = root
        while isinstance(node, DTBranch):
            alternate = node._alternate_tree if isinstance(node, AdaBranchClassifier) else None
            if alternate:
                if isinstance(alternate, DTBranch):
                    return None
                found.append(alternate)
            try:
                node = node.next(x)
            except KeyError:
                key = id(node)
                child = common.get(key)
                if child is None:
                    child = common[key] = node.most_common_path()[1]
                # ``walk`` yields the most common child, then walks it (yielding it again).
                if isinstance(child, AdaBranchClassifier) and child._alternate_tree:
                    if isinstance(child._alternate_tree, DTBranch):
                        return None
                    found.append(child._alternate_tree)
                node = child
        found.append(node)
        return found

    # ------------------------------------------------------------------ plain trees

    def predict_labels(
        self,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: NumericFrame | None = None,
        key: RowKey | None = None,
    ) -> list[Hashable | None]:
        """``[argmax(p) for p in self.predict(model, xs, frame)]`` for a plain
        Hoeffding tree, ranking each leaf's probability matrix at once
        (:func:`~streameval.pipeline.learners.base.argmax_rows`) instead of making a dict
        per instance. With ``key`` (the rows of a pending buffer's matrix), a round of
        numeric rows is done by :class:`~streameval.pipeline.learners.tree_round.TreeRound`."""
        if not xs:
            return []
        if (
            type(model) is not river_tree.HoeffdingTreeClassifier
            or model._root is None
            or len(xs) > self.chunk
        ):
            return [argmax(p) for p in self.predict(model, xs, frame)]
        if key is not None:
            ranked = self._round.labels(self, model, xs, frame, key)
            if ranked is not None:
                return ranked
        frames = LazyFrame(xs, frame)
        groups = self._groups(model, xs) if frame is None else self._groups_frame(model, xs, frame)
        template = {c: 0.0 for c in sorted(model.classes)}
        out: list[Hashable | None] = [None] * len(xs)
        for leaf, rows in groups.values():
            ranked = self._rank_naive_bayes(model, leaf, rows, frames)
            if ranked is not None:
                for i, label in zip(rows, ranked, strict=True):
                    out[i] = label if label is not None else argmax(_river(model, xs[i]))
                continue
            answer = self._plain_leaf(model, leaf, rows, xs, frames, log=True)
            if answer is None:
                for i in rows:
                    out[i] = argmax(_river(model, xs[i]))
                continue
            if answer.log:
                # the leaf's classes have positive probabilities: the template's zeros never win
                assert answer.values is not None
                ranked = argmax_log_rows(answer.keys, answer.values, log_sum_exp_normalise)
                for i, label in zip(rows, ranked, strict=True):
                    out[i] = label
                continue
            keys = answer.keys
            if answer.row is not None:
                proba = template.copy()
                proba.update(zip(keys, answer.row, strict=True))
                label = argmax(proba)
                for i in rows:
                    out[i] = label
                continue
            assert answer.values is not None
            # the dicts predict() makes: the template's classes (0.0), then the leaf's answer
            columns = list(template)
            position = {c: j for j, c in enumerate(columns)}
            for c in keys:
                if c not in position:
                    position[c] = len(columns)
                    columns.append(c)
            matrix = np.zeros((len(rows), len(columns)))
            matrix[:, [position[c] for c in keys]] = answer.values
            for i, label in zip(rows, argmax_rows(columns, matrix), strict=True):
                out[i] = label
        self._trim(groups)
        return out

    def _rank_naive_bayes(
        self, model: Any, leaf: Any, rows: list[int], frames: LazyFrame
    ) -> list[Hashable | None] | None:
        """The most probable class of ``rows`` at a naive Bayes leaf whose observers are all
        Gaussian, from the votes as a quadratic form (:class:`Quadratic`); ``None`` for a
        row left to river (two classes too close), or for all of them (``None``) when the
        leaf is not such a leaf."""
        if not self._is_naive(model, leaf) or not leaf.stats or sum(leaf.stats.values()) == 0:
            return None
        lm = self._leaf_model(leaf)
        if lm is None or lm.nominal or not len(lm.gauss_features):
            return None
        frame = frames.frame
        if frame.odd or any(f in frame.text for f in lm.gauss_features):
            return None
        cols = np.array([frame.index.get(f, -1) for f in lm.gauss_features], dtype=np.intp)
        known = cols >= 0
        index = np.array(rows, dtype=np.intp)[:, None]
        safe = np.where(known, cols, 0)[None, :]
        present = frame.present[index, safe] & known[None, :]
        values = frame.values[index, safe]
        if not frame.exact and (np.abs(values[present]) >= 2.0**53).any():
            return None  # a big int: river computes with it exactly, a float may not
        if lm.quad is None or lm.quad.weights != lm.weights:
            lm.quad = Quadratic.of(lm.mu, lm.minus_two_var, lm.half_log_var, lm.keep, lm.weights)
        best, clear = lm.quad.rank(lm.prior, values, present)
        classes = lm.classes
        return [
            classes[b] if c else None for b, c in zip(best.tolist(), clear.tolist(), strict=True)
        ]

    @staticmethod
    def _is_naive(model: Any, leaf: Any) -> bool:
        """Whether ``leaf`` predicts with naive Bayes (river's rule for its leaf type)."""
        kind = type(leaf)
        if kind is LeafNaiveBayes:
            return bool(leaf.is_active() and leaf.total_weight >= model.nb_threshold)
        if kind is LeafNaiveBayesAdaptive:
            return bool(leaf.is_active() and leaf._nb_correct_weight >= leaf._mc_correct_weight)
        return False

    def _groups(self, model: Any, xs: Sequence[dict[str, Any]]) -> dict[int, tuple[Any, list[int]]]:
        """The rows of ``xs`` per leaf of a plain tree (leaves in order of first use)."""
        root = model._root
        common: dict[int, Any] = {}
        groups: dict[int, tuple[Any, list[int]]] = {}
        if isinstance(root, DTBranch):
            route = self._route
            for i, x in enumerate(xs):
                leaf = route(root, x, common)
                entry = groups.get(id(leaf))
                if entry is None:
                    groups[id(leaf)] = (leaf, [i])
                else:
                    entry[1].append(i)
        else:
            groups[id(root)] = (root, list(range(len(xs))))
        return groups

    def _groups_frame(
        self, model: Any, xs: Sequence[dict[str, Any]], frame: NumericFrame
    ) -> dict[int, tuple[Any, list[int]]]:
        """:meth:`_groups`, routing the rows through numeric binary branches
        with one comparison per branch for all its rows (``frame`` must be
        ``NumericFrame(xs)``).

        A row goes left when ``x[feature] <= threshold``, to the most common
        path when the feature is missing, as river's ``Branch.traverse``; any
        other branch type, a feature that holds a ``str`` in some row, and an
        integer too large for a float to compare exactly send the rows at that
        branch through :meth:`_route` one by one.
        """
        root = model._root
        if not isinstance(root, DTBranch):
            return {id(root): (root, list(range(len(xs))))}
        common: dict[int, Any] = {}
        leaves: list[tuple[int, Any, np.ndarray]] = []
        stack: list[tuple[Any, np.ndarray]] = [(root, np.arange(len(xs)))]
        while stack:
            node, rows = stack.pop()
            if not isinstance(node, DTBranch):
                leaves.append((int(rows[0]), node, rows))
                continue
            col = frame.index.get(node.feature, -1)
            if type(node) is not NumericBinaryBranch or (node.feature in frame.text):
                for i in rows.tolist():
                    leaf = self._route(node, xs[i], common)
                    leaves.append((i, leaf, np.array([i])))
                continue
            if col < 0:
                present = np.zeros(len(rows), dtype=bool)
                values = np.zeros(len(rows))
            else:
                present = frame.present[rows, col]
                values = frame.values[rows, col]
                if not frame.exact and (np.abs(values[present]) >= 2.0**53).any():
                    # a big int: river compares it exactly, a float may not
                    for i in rows.tolist():
                        leaf = self._route(node, xs[i], common)
                        leaves.append((i, leaf, np.array([i])))
                    continue
            left = present & (values <= node.threshold)
            right = present & ~left
            missing = ~present
            parts = [rows[left], rows[right]]
            if missing.any():
                key = id(node)
                child = common.get(key)
                if child is None:
                    child = common[key] = node.most_common_path()[1]
                side = 0 if child is node.children[0] else 1
                parts[side] = np.sort(np.concatenate([parts[side], rows[missing]]))
            for child, part in zip(node.children, parts, strict=True):
                if len(part):
                    stack.append((child, part))
        leaves.sort(key=operator.itemgetter(0))
        groups: dict[int, tuple[Any, list[int]]] = {}
        for _, leaf, rows in leaves:
            entry = groups.get(id(leaf))
            if entry is None:
                groups[id(leaf)] = (leaf, rows.tolist())
            else:
                entry[1].extend(rows.tolist())
        for _, rows_list in groups.values():
            rows_list.sort()
        return groups

    def _predict_plain(
        self, model: Any, xs: Sequence[dict[str, Any]], frames: LazyFrame
    ) -> list[Proba]:
        groups = self._groups(model, xs)
        template = {c: 0.0 for c in sorted(model.classes)}
        out: list[Proba | None] = [None] * len(xs)
        for leaf, rows in groups.values():
            answer = self._plain_leaf(model, leaf, rows, xs, frames)
            if answer is None:
                for i in rows:
                    out[i] = _river(model, xs[i])
                continue
            keys = answer.keys
            if answer.row is not None:
                proba = template.copy()
                proba.update(zip(keys, answer.row, strict=True))
                for i in rows:
                    out[i] = proba.copy()
                continue
            assert answer.values is not None
            for i, values in zip(rows, answer.values.tolist(), strict=True):
                proba = template.copy()
                proba.update(zip(keys, values, strict=True))
                out[i] = proba
        self._trim(groups)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ adaptive trees

    def _predict_adaptive(
        self, model: Any, xs: Sequence[dict[str, Any]], frames: LazyFrame
    ) -> list[Proba]:
        root = model._root
        common: dict[int, Any] = {}
        paths: list[list[Any] | None] = []
        groups: dict[int, tuple[Any, list[int]]] = {}
        for i, x in enumerate(xs):
            found = self._route_adaptive(root, x, common) if isinstance(root, DTBranch) else [root]
            paths.append(found)
            if found is None:
                continue
            for leaf in found:
                entry = groups.get(id(leaf))
                if entry is None:
                    groups[id(leaf)] = (leaf, [i])
                elif entry[1][-1] != i:
                    entry[1].append(i)
        template = {c: 0.0 for c in model.classes}
        labels = list(template)
        column = {c: j for j, c in enumerate(labels)}
        out: list[Proba | None] = [None] * len(xs)
        # Rows that meet several leaves (alternate trees): (keys, values) of each leaf.
        parts: dict[int, dict[int, tuple[list[Hashable], list[float]]]] = {}
        for key, (leaf, rows) in groups.items():
            answer = self._adaptive_leaf(model, leaf, rows, xs, frames)
            if answer is None:
                continue
            keys, row, values = answer.keys, answer.row, answer.values
            single = [r for r, i in enumerate(rows) if len(paths[i]) == 1]  # type: ignore[arg-type]
            if len(single) < len(rows):
                listed = values.tolist() if values is not None else None
                for r, i in enumerate(rows):
                    if len(paths[i]) > 1:  # type: ignore[arg-type]
                        parts.setdefault(i, {})[key] = (keys, row if listed is None else listed[r])
            if not single or any(c not in column for c in keys):
                continue
            if row is not None:
                proba = template.copy()
                proba.update((c, 0.0 + v) for c, v in zip(keys, row, strict=True))
                proba = normalize_values_in_dict(proba)
                for r in single:
                    out[rows[r]] = proba.copy()
                continue
            assert values is not None
            # proba = {c: 0.0 for c in classes}, plus the leaf's answer, normalised.
            matrix = np.zeros((len(single), len(labels)))
            matrix[:, [column[c] for c in keys]] = 0.0 + values[single]
            total = row_sums(matrix)
            ok = (total != 0) & ~np.isnan(total)
            scale = np.ones_like(total)
            scale[ok] = 1 / total[ok]
            np.multiply(matrix, scale[:, None], out=matrix, where=ok[:, None])
            for r, probas in zip(single, matrix.tolist(), strict=True):
                out[rows[r]] = dict(zip(labels, probas, strict=True))
        for i, found in enumerate(paths):
            if out[i] is not None:
                continue
            got = parts.get(i, {})
            if found is None or any(id(leaf) not in got for leaf in found):
                out[i] = _river(model, xs[i])
                continue
            proba = template.copy()
            for leaf in found:
                keys, values = got[id(leaf)]
                for label, value in zip(keys, values, strict=True):
                    try:
                        proba[label] += value
                    except KeyError:
                        proba[label] = value
            out[i] = normalize_values_in_dict(proba)
        self._trim(groups)
        return out  # type: ignore[return-value]
