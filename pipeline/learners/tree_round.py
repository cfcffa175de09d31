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
        self._center: dict[Hashable, float] = {}
        self._layout: tuple[Any, np.ndarray] | None = None  # (frame index, centre per column)
        self._blocks: dict[int, tuple[Any, Any, _Block]] = {}  # leaf -> (model, index, block)

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
        leaves = self._leaves_of(trees, model, xs, frame, key)
        if leaves is None:
            return None
        groups: dict[int, list[int]] = {}
        for i, leaf in enumerate(leaves):
            groups.setdefault(id(leaf), []).append(i)
        out: list[Hashable | None] = [None] * len(xs)
        naive: list[tuple[_Block, list[int]]] = []
        template = {c: 0.0 for c in sorted(model.classes)}
        center = self._centers(frame)
        for rows in groups.values():
            leaf = leaves[rows[0]]
            block = self._block(trees, model, leaf, frame, center)
            if block is not None:
                naive.append((block, rows))
            elif type(leaf) in _MAJORITY_KINDS and not trees._is_naive(model, leaf) and leaf.stats:
                proba = template.copy()  # river: the classes at 0, then the leaf's majority
                proba.update(normalize_values_in_dict(leaf.stats, inplace=False))
                label = _argmax(proba)
                for i in rows:
                    out[i] = label
            else:
                for i in rows:
                    out[i] = _argmax(trees.river_proba(model, xs[i]))
        if naive:
            self._rank(trees, model, xs, frame, center, naive, out)
        return out

    def _leaves_of(
        self, trees: Any, model: Any, xs: Sequence[dict[str, Any]], frame: Any, key: Any
    ) -> list[Any] | None:
        """Each row's leaf: kept for a row whose contents and the tree's shape are the
        same as when it was routed; ``None`` when rows cannot keep leaves (a branch
        other than numeric binary, or on a feature the frame lacks)."""
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
            self._stable = all(
                type(node) is NumericBinaryBranch and node.feature in frame.index
                for node in model._root.iter_branches()
            )
        if not self._stable:
            return None
        cache = self._leaves
        root = model._root
        leaves = []
        for i, (row, stamp) in enumerate(zip(key.rows.tolist(), key.stamps.tolist(), strict=True)):
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

    def _block(
        self, trees: Any, model: Any, leaf: Any, frame: Any, center: np.ndarray
    ) -> _Block | None:
        """The vote coefficients of a naive Bayes leaf whose observers are all Gaussian,
        kept until the leaf learns; ``None`` for any other leaf."""
        if not trees._is_naive(model, leaf) or not leaf.stats or sum(leaf.stats.values()) == 0:
            return None
        lm = trees._leaf_model(leaf)
        if lm is None or lm.nominal or not len(lm.gauss_features):
            return None
        kept = self._blocks.get(id(leaf))
        if (
            kept is not None
            and kept[0] is lm
            and kept[1] is frame.index
            and kept[2].weights == lm.weights
        ):
            return kept[2]
        cols = np.array([frame.index.get(f, -1) for f in lm.gauss_features], dtype=np.intp)
        block = _Block(lm, cols, center, len(frame.index))
        self._blocks[id(leaf)] = (lm, frame.index, block)
        if len(self._blocks) > 4 * len(trees._cache) + 256:
            self._blocks = {k: v for k, v in self._blocks.items() if k in trees._cache}
        return block

    def _rank(
        self,
        trees: Any,
        model: Any,
        xs: Sequence[dict[str, Any]],
        frame: Any,
        center: np.ndarray,
        naive: list[tuple[_Block, list[int]]],
        out: list[Hashable | None],
    ) -> None:
        """The naive Bayes rows: votes of their own leaf from one batched product."""
        k = max(len(block.classes) for block, _ in naive)
        width = frame.values.shape[1]
        coef = np.zeros((len(naive), 2 * width, k))
        const = np.full((len(naive), k), -np.inf)  # a class a leaf lacks never wins
        size = np.zeros((len(naive), 2 * width, k))
        size_const = np.zeros((len(naive), k))
        rows: list[int] = []
        which: list[int] = []
        for j, (block, members) in enumerate(naive):
            kj = len(block.classes)
            coef[j, :, :kj] = block.coef
            const[j, :kj] = block.const
            size[j, :, :kj] = block.size
            size_const[j, :kj] = block.size_const
            rows.extend(members)
            which.extend([j] * len(members))
        leaf = np.array(which, dtype=np.intp)
        x = frame.values[rows] - center
        terms = np.concatenate([x * x, x], axis=1)  # (n, 2F)
        votes = np.matmul(terms[:, None, :], coef[leaf])[:, 0, :] + const[leaf]
        # the error bound: every row's |terms| at most the round's largest
        biggest = np.abs(terms).max(axis=0)
        bound = np.einsum("f,jfk->jk", biggest, size) + size_const  # (leaves, k)
        n = len(rows)
        idx = np.arange(n)
        best = np.argmax(votes, axis=1)
        top = votes[idx, best]
        runner_up = votes.copy()
        runner_up[idx, best] = -np.inf
        second = np.argmax(runner_up, axis=1)
        gap = top - runner_up[idx, second]
        error = (bound[leaf, best] + bound[leaf, second]) * (1e-14 * (width + 4))
        margin = np.maximum(error, CLEAR_GAP * np.maximum(1.0, np.abs(top)))
        with np.errstate(invalid="ignore"):
            clear = np.isfinite(top) & (gap > margin)  # a one-class leaf: gap = inf
        blocks = [block for block, _ in naive]
        for i, j, b, ok in zip(rows, which, best.tolist(), clear.tolist(), strict=True):
            out[i] = blocks[j].classes[b] if ok else _argmax(trees.river_proba(model, xs[i]))


def _argmax(proba: dict[Hashable, float]) -> Hashable | None:
    from streameval.pipeline.learners.base import argmax

    return argmax(proba)
