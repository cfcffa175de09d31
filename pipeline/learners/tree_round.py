"""A re-evaluation round of a Hoeffding tree: all the pending rows at once.

A round asks a river ``HoeffdingTreeClassifier`` for the classes of ~``delay / K``
pending rows, which sit in many leaves once the tree has grown (Covertype: 15-20 leaves
per round of 100 rows after 100,000 instances). Handling the leaves one by one costs a
few dozen numpy calls each; :class:`TreeRound` keeps the cost of a round nearly flat in
the number of leaves:

* **each row's leaf is kept** (by the row of the pending buffer's feature matrix and its
  content stamp): a row's leaf changes only when the tree changes shape, which the
  numbers of active and inactive leaves tell (a split, a new branch of a multiway node,
  a deactivation all change one of them), as long as every branch is a numeric binary
  branch on a feature every row has (no missing value sends a row down the most
  common path, which moves with the leaves' weights). Only new rows are routed, by
  river's own branches;
* **each row's label is kept until its leaf learns**: a leaf's answer depends on its own
  statistics (and the tree's classes) only, and between two rounds of a row only the
  leaves that the labels in between reached have learned, so a row whose leaf shows the
  same class weights as at its last round keeps its label (Covertype, delay 1000, K=10:
  22 % of the rows over the first 21,000 instances, 55 % over the first 80,000);
* **the naive Bayes votes of all rows come from one batched matrix product**: a
  leaf's votes are a quadratic form of the features
  (:mod:`~streameval.pipeline.learners.tree_rank`), written here on features centred
  on one point per feature for the whole tree, so that each leaf's coefficients
  ``[a; b]`` (``(2 F, K)``) and constant can be kept until the leaf learns, and a
  row's votes are ``[x'^2, x'] @ [a; b] + const`` of its own leaf;
* a leaf that predicts its majority class gives one label for all its rows; any other
  leaf (nominal observers, an observer river has that this package does not know) is
  left to river row by row, as are the rows whose two best votes are closer than the
  error of the product (bounded from the largest ``|x'|`` of the round and the
  coefficients' magnitudes, as in :class:`~streameval.pipeline.learners.tree_rank.Quadratic`).

Everything here is a cache: pickling drops it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from river.tree.nodes.branch import DTBranch, NumericBinaryBranch
from river.tree.nodes.htc_nodes import LeafMajorityClass, LeafNaiveBayes, LeafNaiveBayesAdaptive
from river.utils.norm import normalize_values_in_dict
from streameval.pipeline.learners.tree_rank import CLEAR_GAP, HALF_LOG_TAU

#: Leaves that predict their normalised class weights when they do not use naive Bayes.
_MAJORITY_KINDS = (LeafMajorityClass, LeafNaiveBayes, LeafNaiveBayesAdaptive)


class _Block:
    """A naive Bayes leaf's votes in a frame's column space, at given class weights."""

    def __init__(self, lm: Any, cols: np.ndarray, center: np.ndarray, width: int) -> None:
        self.weights = lm.weights
        self.classes: list[Hashable] = lm.classes
        k = len(lm.classes)
        known = cols >= 0
        at = cols[known]
        keep = lm.keep[known, :, 0]
        a = keep / lm.minus_two_var[known, :, 0]
        shifted = (lm.mu[known, :, 0] - center[at][:, None]) * keep
        const = keep * (-HALF_LOG_TAU - lm.half_log_var[known, :, 0])
        d = a * shifted * shifted + const
        self.coef = np.zeros((2 * width, k))  # [a; b] over the frame's columns
        self.coef[at] = a
        self.coef[width + at] = -2.0 * a * shifted
        self.const = lm.prior + d.sum(axis=0)
        self.size = np.zeros((2 * width, k))  # the magnitudes of the terms' factors
        self.size[at] = np.abs(a)
        self.size[width + at] = np.abs(self.coef[width + at])
        self.size_const = np.abs(lm.prior) + (np.abs(a) * shifted * shifted + np.abs(const)).sum(
            axis=0
        )


class TreeRound:
    """The rows' leaves and the leaves' vote coefficients of one tree, between rounds."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._version: tuple[Any, ...] | None = None
        self._stable = False
        self._leaves: dict[int, tuple[int, Any]] = {}
        # row -> (stamp, leaf, the leaf's state, label): a row's label until its leaf learns
        self._said: dict[int, tuple[int, Any, tuple[Any, ...], Hashable | None]] = {}
        self._center: dict[Hashable, float] = {}
        self._layout: tuple[Any, np.ndarray] | None = None  # (frame index, centre per column)
        self._reset_blocks()

    def _reset_blocks(self) -> None:
        """Forget the leaves' coefficients (the tree changed shape, or the frame's columns)."""
        self._blocks: dict[
            int, tuple[Any, Any, _Block, int]
        ] = {}  # leaf -> (lm, index, block, slot)
        self._majority: dict[int, tuple[Any, tuple[float, ...], int, Hashable]] = {}
        self._n_slots = 0
        # every leaf's coefficients in one array, one slot per leaf, the tree's classes as
        # columns (a class a leaf lacks: constant -inf), so a round gathers them by slot
        self._columns: dict[Hashable, int] = {}
        self._labels: list[Hashable] = []
        self._coef = np.zeros((0, 0, 0))
        self._size = np.zeros((0, 0, 0))
        self._const = np.zeros((0, 0))
        self._size_const = np.zeros((0, 0))

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._clear()

    def labels(
        self, trees: Any, model: Any, xs: Sequence[dict[str, Any]], frame: Any, key: Any
    ) -> list[Hashable | None] | None:
        """``argmax(model.predict_proba_one(x))`` of every row, or ``None`` when the round
        is not one this class handles (the caller then does it leaf by leaf)."""
        root = model._root
        if (
            key is None
            or frame is None
            or frame.odd
            or frame.text
            or not frame.exact
            or not isinstance(root, DTBranch)
            or not frame.present.all()
        ):
            return None
        rows, stamps = key.rows.tolist(), key.stamps.tolist()  # the buffer rows, their stamps
        leaves = self._leaves_of(trees, model, xs, frame, key, rows, stamps)
        if leaves is None:
            return None
        out: list[Hashable | None] = [None] * len(xs)
        todo, states = self._recall(model, leaves, rows, stamps, out)
        if todo:
            self._answer(trees, model, xs, frame, leaves, todo, out)
            self._remember(rows, stamps, leaves, todo, states, out)
        return out

    def _recall(
        self,
        model: Any,
        leaves: list[Any],
        rows: list[int],
        stamps: list[int],
        out: list[Hashable | None],
    ) -> tuple[dict[int, list[int]], dict[int, tuple[Any, ...]]]:
        """Fill ``out`` for the rows whose leaf has not learned since their last label (a
        leaf's answer depends on its own statistics only, and the tree's classes); the
        other rows per leaf, and the state of each leaf."""
        said = self._said
        todo: dict[int, list[int]] = {}
        states: dict[int, tuple[Any, ...]] = {}
        n_classes = len(model.classes)
        for i, leaf in enumerate(leaves):
            state = states.get(id(leaf))
            if state is None:
                state = states[id(leaf)] = (n_classes, *leaf.stats.values())
            kept = said.get(rows[i])
            if kept is not None and kept[0] == stamps[i] and kept[1] is leaf and kept[2] == state:
                out[i] = kept[3]
            else:
                todo.setdefault(id(leaf), []).append(i)
        return todo, states

    def _remember(
        self,
        rows: list[int],
        stamps: list[int],
        leaves: list[Any],
        todo: dict[int, list[int]],
        states: dict[int, tuple[Any, ...]],
        out: list[Hashable | None],
    ) -> None:
        """Keep the labels just computed, with their leaf's state (from :meth:`_recall`)."""
        said = self._said
        for group in todo.values():
            leaf = leaves[group[0]]
            state = states[id(leaf)]
            for i in group:
                said[rows[i]] = (stamps[i], leaf, state, out[i])

    def _answer(
        self,
        trees: Any,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: Any,
        leaves: list[Any],
        groups: dict[int, list[int]],
        out: list[Hashable | None],
    ) -> None:
        """The labels of ``groups`` (the rows of each leaf) into ``out``."""
        naive_rows: list[int] = []
        naive_slots: list[int] = []
        center = self._centers(frame)
        for rows in groups.values():
            leaf = leaves[rows[0]]
            slot = self._slot(trees, model, leaf, frame, center)
            if slot is not None:
                naive_rows.extend(rows)
                naive_slots.extend([slot] * len(rows))
            elif type(leaf) in _MAJORITY_KINDS and not trees._is_naive(model, leaf) and leaf.stats:
                label = self._majority_label(model, leaf)
                for i in rows:
                    out[i] = label
            else:
                for i in rows:
                    out[i] = _argmax(trees.river_proba(model, xs[i]))
        if naive_rows:
            self._rank(trees, model, xs, frame, center, naive_rows, naive_slots, out)

    def _majority_label(self, model: Any, leaf: Any) -> Hashable | None:
        """River's answer of a leaf predicting its class weights: the classes at 0, then
        the leaf's normalised weights (kept until the leaf or the tree's classes change)."""
        weights = tuple(leaf.stats.values())
        kept = self._majority.get(id(leaf))
        if (
            kept is not None
            and kept[0] is leaf
            and kept[1] == weights
            and kept[2] == len(model.classes)
        ):
            return kept[3]
        proba = {c: 0.0 for c in sorted(model.classes)}
        proba.update(normalize_values_in_dict(leaf.stats, inplace=False))
        label = _argmax(proba)
        self._majority[id(leaf)] = (leaf, weights, len(model.classes), label)
        return label

    def _leaves_of(
        self,
        trees: Any,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: Any,
        key: Any,
        rows: list[int],
        stamps: list[int],
    ) -> list[Any] | None:
        """Each row's leaf (``rows`` and ``stamps``: ``key``'s, as lists): kept for a row
        whose contents and the tree's shape are the same as when it was routed; ``None``
        when rows cannot keep leaves (a branch other than numeric binary, or on a feature
        the frame lacks)."""
        version = (
            id(model._root),
            model._n_active_leaves,
            model._n_inactive_leaves,
            key.source,
            id(frame.index),
        )
        if version != self._version:
            self._version = version
            self._leaves = {}
            self._said = {}
            self._reset_blocks()
            live = {id(leaf) for leaf in model._root.iter_leaves()}
            trees._cache = {k: m for k, m in trees._cache.items() if k in live}
            self._stable = all(
                type(node) is NumericBinaryBranch and node.feature in frame.index
                for node in model._root.iter_branches()
            )
        if not self._stable:
            return None
        cache = self._leaves
        root = model._root
        leaves = []
        for i, (row, stamp) in enumerate(zip(rows, stamps, strict=True)):
            hit = cache.get(row)
            if hit is None or hit[0] != stamp:
                hit = cache[row] = (stamp, trees._route(root, xs[i], {}))
            leaves.append(hit[1])
        return leaves

    def _centers(self, frame: Any) -> np.ndarray:
        """One point per frame column, fixed for the tree once a column is first seen (the
        mean of that round's rows): the centre of every leaf's coefficients."""
        layout = self._layout
        if layout is not None and layout[0] is frame.index:
            return layout[1]
        center = self._center
        new = [f for f in frame.index if f not in center]
        if new:
            means = frame.values.mean(axis=0)
            for f in new:
                center[f] = float(means[frame.index[f]])
        values = np.array([center[f] for f in frame.index])
        self._layout = (frame.index, values)
        return values

    def _slot(
        self, trees: Any, model: Any, leaf: Any, frame: Any, center: np.ndarray
    ) -> int | None:
        """The slot of a naive Bayes leaf whose observers are all Gaussian, its
        coefficients current (rewritten when the leaf learned); ``None`` for any other leaf."""
        if not trees._is_naive(model, leaf) or not leaf.stats or sum(leaf.stats.values()) == 0:
            return None
        lm = trees._leaf_model(leaf)
        if lm is None or lm.nominal or not len(lm.gauss_features):
            return None
        kept = self._blocks.get(id(leaf))
        if kept is not None and kept[0] is lm and kept[1] is frame.index:
            if kept[2].weights == lm.weights:
                return kept[3]
            slot = kept[3]
        else:
            slot = self._n_slots
            self._n_slots += 1
        cols = np.array([frame.index.get(f, -1) for f in lm.gauss_features], dtype=np.intp)
        block = _Block(lm, cols, center, len(frame.index))
        self._blocks[id(leaf)] = (lm, frame.index, block, slot)
        self._store(slot, block, 2 * len(frame.index))
        return slot

    def _store(self, slot: int, block: _Block, width: int) -> None:
        """Write a leaf's coefficients into its slot (growing the arrays as needed)."""
        for c in block.classes:
            if c not in self._columns:
                self._columns[c] = len(self._labels)
                self._labels.append(c)
        n_slots, n_classes = self._coef.shape[0], len(self._labels)
        if slot >= n_slots or n_classes > self._coef.shape[2] or self._coef.shape[1] != width:
            slots = max(slot + 1, 2 * n_slots, 16)
            grown = [np.zeros((slots, width, n_classes)) for _ in range(2)]
            consts = [np.full((slots, n_classes), -np.inf), np.zeros((slots, n_classes))]
            if self._coef.shape[1] == width:
                old_s, old_c = self._coef.shape[0], self._coef.shape[2]
                grown[0][:old_s, :, :old_c] = self._coef
                grown[1][:old_s, :, :old_c] = self._size
                consts[0][:old_s, :old_c] = self._const
                consts[1][:old_s, :old_c] = self._size_const
            self._coef, self._size = grown
            self._const, self._size_const = consts
        at = [self._columns[c] for c in block.classes]
        self._coef[slot] = 0.0
        self._size[slot] = 0.0
        self._const[slot] = -np.inf  # a class this leaf lacks never wins
        self._size_const[slot] = 0.0
        self._coef[slot][:, at] = block.coef
        self._size[slot][:, at] = block.size
        self._const[slot, at] = block.const
        self._size_const[slot, at] = block.size_const

    def _rank(
        self,
        trees: Any,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: Any,
        center: np.ndarray,
        rows: list[int],
        slots_of_rows: list[int],
        out: list[Hashable | None],
    ) -> None:
        """The naive Bayes rows: votes of their own leaf from one batched product."""
        slots = np.array(slots_of_rows, dtype=np.intp)
        width = frame.values.shape[1]
        x = frame.values[rows] - center
        terms = np.concatenate([x * x, x], axis=1)  # (n, 2F)
        votes = np.matmul(terms[:, None, :], self._coef[slots])[:, 0, :]
        votes += self._const[slots]
        # the error bound: every row's |terms| at most the round's largest
        used, which = np.unique(slots, return_inverse=True)
        biggest = np.abs(terms).max(axis=0)
        bound = (np.einsum("f,sfk->sk", biggest, self._size[used]) + self._size_const[used])[which]
        idx = np.arange(len(rows))
        best = np.argmax(votes, axis=1)
        top = votes[idx, best]
        runner_up = votes.copy()
        runner_up[idx, best] = -np.inf
        second = np.argmax(runner_up, axis=1)
        gap = top - runner_up[idx, second]
        error = (bound[idx, best] + bound[idx, second]) * (1e-14 * (width + 4))
        margin = np.maximum(error, CLEAR_GAP * np.maximum(1.0, np.abs(top)))
        with np.errstate(invalid="ignore"):
            clear = np.isfinite(top) & (gap > margin)  # a one-class leaf: gap = inf
        labels = self._labels
        for i, b, ok in zip(rows, best.tolist(), clear.tolist(), strict=True):
            out[i] = labels[b] if ok else _argmax(trees.river_proba(model, xs[i]))


def _argmax(proba: dict[Hashable, float]) -> Hashable | None:
    from streameval.pipeline.learners.base import argmax

    return argmax(proba)
