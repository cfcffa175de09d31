"""A whole re-evaluation run gives, number for number, the results it gave before the
re-evaluation rounds were made faster.

``tests/data/covtype-21000-reeval-17026dc.json.gz`` is the results document of ``streameval
evaluate --dataset covtype --limit 21000 --delay 1000 --reeval-k 10 --bins 50 --learner
nochange --learner majority --learner nb --learner ht`` written by the code of commit 17026dc
(river's objects inside the naive Bayes, the tree's leaves ranked one by one). Everything but
the ``runtime`` block must be equal: every metric of every bin, the curves, the counters; the
config also names the dataset's classes now (17026dc wrote them only under the ``moa``
protocol).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import evaluate_config

FIXED = Path(__file__).parent / "data" / "covtype-21000-reeval-17026dc.json.gz"


@pytest.mark.slow
def test_covtype_21000_delay_1000_k10_b50_gives_the_results_of_17026dc(data_dir: Path) -> None:
    before = json.loads(gzip.decompress(FIXED.read_bytes()))
    config = ExperimentConfig.from_dict(before["config"])
    after = json.loads(json.dumps(evaluate_config(config, data_dir=data_dir)))
    before.pop("runtime")
    after.pop("runtime")
    assert before["config"]["classes"] is None
    assert after["config"]["classes"] == [str(c) for c in range(1, 8)]
    before["config"]["classes"] = after["config"]["classes"]
    assert after["overhead"]["n_repredictions"] > 1_000_000
    assert after == before
