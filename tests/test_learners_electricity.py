"""The paper's finding on real data (sect. 6.5-6.6): on Electricity, with
immediate labels and test-then-train, the Hoeffding tree loses to the
Persistent baseline and its Temporally Augmented version beats it.

``temporal-dependence-evaluation-journal.txt`` reports this on the whole
stream. On the first 15000 instances only the second half holds with river's
defaults: the tree is then marginally *above* NoChange (0.8466 against
0.8448), so that comparison is made on the whole stream (45312 instances,
a few seconds).
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Any

import pytest
from streameval.pipeline.learners.base import StreamContext, argmax
from streameval.pipeline.learners.spec import build_learner, learner_lags

PREFIX = 15000


def read_electricity(path: Path) -> list[tuple[dict[str, Any], str]]:
    rows = []
    with gzip.open(path, "rt", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        for row in reader:
            x = {k: float(v) for k, v in zip(header[:-1], row[:-1], strict=True)}
            rows.append((x, row[-1]))
    return rows


def accuracies(spec: str, rows: list[tuple[dict[str, Any], str]]) -> tuple[float, float]:
    """Test-then-train accuracy on the first PREFIX instances and on all of them."""
    ctx = StreamContext()
    ctx.require_recent(learner_lags(spec))
    model = build_learner(spec, context=ctx)
    hits = 0
    at_prefix = 0
    for x, y in rows:
        at = ctx.arrive()
        hits += argmax(model.predict_proba_one(x, at=at)) == y
        model.learn_one(x, y, at=at)
        ctx.receive(at, y)
        if at + 1 == PREFIX:
            at_prefix = hits
    return at_prefix / PREFIX, hits / len(rows)


@pytest.mark.slow
def test_temporally_augmented_tree_beats_persistent_which_beats_tree(data_dir: Path) -> None:
    rows = read_electricity(data_dir / "electricity.csv.gz")
    assert len(rows) == 45312
    nochange = accuracies("nochange", rows)
    ht = accuracies("ht", rows)
    ta_ht = accuracies("ta:ht", rows)
    # README: P(same) = 0.8533 over the 45311 pairs; the first prediction is a miss
    assert nochange[1] == pytest.approx(0.8533 * 45311 / 45312, abs=1e-4)
    assert ta_ht[0] > nochange[0]
    assert ta_ht[1] > nochange[1] > ht[1]
