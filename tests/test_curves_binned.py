"""Binned values over time: the ``binned`` curves, the snapshots and ``report --bins-at``.

The binned values a curve holds at label ``n`` must be those of a run that ended right
after its ``n``-th label, and its last point must be the final binned table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import drive, evaluate_config, prepare, schedule
from streameval.pipeline.events import EndOfStream, InputEvent, LabelEvent, MetricSnapshot
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.report.curves import BINNED_METRICS, CurveRecorder, bins_at
from streameval.pipeline.report.table import fmt

from streameval import schemas
from streameval.cli.main import main

CONFIG = ExperimentConfig(
    "elec",
    ["nochange", "majority", "nb"],
    dataset="electricity",
    limit=2400,
    delay="48",
    reeval_k=10,
    bins=10,
    window=300,
    snapshot_every=500,
)
STOP = 1500  # a label count with a periodic snapshot


def _family(binned: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in binned.items() if k in BINNED_METRICS}


@pytest.fixture(scope="module")
def full() -> tuple[dict[str, Any], list[MetricSnapshot]]:
    snaps: list[MetricSnapshot] = []
    results = evaluate_config(
        CONFIG, on_output=lambda o: snaps.append(o) if isinstance(o, MetricSnapshot) else None
    )
    return results, snaps


def _stopped_at(n_labels: int) -> dict[str, Any]:
    """The results of the same replay cut right after its ``n_labels``-th label."""
    dataset, config = prepare(CONFIG)
    events: list[InputEvent] = []
    seen = 0
    for ev in schedule(config, dataset):
        events.append(ev)
        seen += isinstance(ev, LabelEvent)
        if seen == n_labels:
            break
    last = events[-1]
    events.append(EndOfStream(config.stream, last.ts, len(events), len(events)))
    return drive(Experiment(config), events, None, False, None)


def test_the_last_binned_curve_point_is_the_final_binned_table(full: Any) -> None:
    results, _ = full
    curves = results["curves"]["binned"]
    assert curves["n_labelled"][-1] == results["n_labelled"] == 2400
    for spec, entry in results["learners"].items():
        series = curves["learners"][spec]
        assert set(series) == {"accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus"}
        for metric, values in series.items():
            assert len(values) == len(curves["n_labelled"])
            assert values[-1] == entry["binned"][metric], (spec, metric)
    # the No-Change reference is itself: its kappa_per is 0 in every bin at every point
    assert all(v == 0.0 for point in curves["learners"]["nochange"]["kappa_per"] for v in point)


def test_a_snapshot_at_n_labels_equals_a_run_stopped_at_n(full: Any) -> None:
    results, snaps = full
    stopped = _stopped_at(STOP)
    assert stopped["n_labelled"] == STOP
    at, table = bins_at(results["curves"], STOP)
    assert at == STOP
    for spec, entry in stopped["learners"].items():
        (snap,) = [s for s in snaps if s.learner == spec and s.n_labelled == STOP]
        assert snap.binned is not None
        # whole history: the snapshot, the curve point and the stopped run agree exactly
        assert _family(snap.binned) == _family(entry["binned"]) == table[spec]
        # the window estimator's binned values ride along in the snapshot
        assert snap.binned["window"] == entry["binned"]["window"]
        assert snap.binned["n"] == [float(STOP)] * (CONFIG.bins + 2)
    # and the stopped run is not the full one: the binned values did move after STOP
    assert table["nb"]["accuracy"] != results["learners"]["nb"]["binned"]["accuracy"]


def test_snapshots_with_nested_binned_values_match_the_metrics_schema(full: Any) -> None:
    _, snaps = full
    message = json.loads(json.dumps(snaps[-1].to_dict()))
    assert set(message["binned"]["window"]) >= {"accuracy", "kappa_per"}
    assert schemas.validate("metrics", message, reference=True) is None
    old_form = {**message, "binned": _family(message["binned"])}
    assert schemas.validate("metrics", old_form, reference=True) is None
    bad = {**message, "binned": {"window": {"accuracy": ["high"]}}}
    assert schemas.validate("metrics", bad, reference=True) is not None


def test_report_bins_at_prints_the_binned_table_of_that_point(
    full: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, _ = full
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    assert main(["report", str(path), "--bins-at", "1700", "--metric", "kappa_per"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("after 1,500 labels (asked 1,700)")  # the last point at or before
    _, table = bins_at(results["curves"], 1700)
    nb = next(line for line in out.splitlines() if line.startswith("nb "))
    b = CONFIG.bins
    picks = [0, b // 2, int(0.9 * b), b + 1]
    assert nb.split()[1:5] == [fmt(table["nb"]["kappa_per"][i]).strip() for i in picks]
    with pytest.raises(ValueError, match="no binned point at or before 100 labels"):
        bins_at(results["curves"], 100)


def _snap(n: int, kind: str = "periodic") -> dict[str, Any]:
    return {
        "learner": "nb",
        "n_labelled": n,
        "ts": float(n),
        "kind": kind,
        "metrics": {"accuracy": n / 100},
        "binned": {"n": [n] * 4, "accuracy": [n / 100] * 4, "kappa": [0.0] * 4},
    }


def test_binned_curves_thin_under_their_own_budget_and_keep_the_final_point() -> None:
    # 8 values per point (2 metrics x 4 bins) + 3: at most 40 values keeps 3 points
    rec = CurveRecorder(max_points=100, max_values=1000, max_binned_values=40)
    for n in range(1, 10):
        rec.add(_snap(10 * n))
    rec.add(_snap(95, "final"))
    block = rec.block()
    assert block is not None
    assert block["n_labelled"] == [10 * n for n in range(1, 10)] + [95]  # scalars untouched
    binned = block["binned"]
    assert binned["stride"] == 4
    assert binned["n_labelled"] == [40, 80, 95]
    assert binned["learners"]["nb"]["accuracy"] == [[0.4] * 4, [0.8] * 4, [0.95] * 4]
    too_wide = CurveRecorder(max_points=100, max_values=1000, max_binned_values=21)
    too_wide.add(_snap(10))
    too_wide.add(_snap(20, "final"))
    assert "binned" not in (too_wide.block() or {})  # 2 x 11 values > 21: no binned curves
    no_bins = CurveRecorder()
    no_bins.add({**_snap(10), "binned": None})
    assert "binned" not in (no_bins.block() or {})


def test_regression_curves_carry_binned_mae_and_rmse() -> None:
    config = ExperimentConfig(
        "fr", ["mean", "linreg"], task="regression", dataset="friedman[n=600]", delay="50",
        reeval_k=10, bins=4, snapshot_every=200,
    )  # fmt: skip
    results = evaluate_config(config)
    curves = results["curves"]["binned"]
    assert curves["n_labelled"] == [200, 400, 600]
    for spec, entry in results["learners"].items():
        assert set(curves["learners"][spec]) == {"mae", "rmse"}
        for metric in ("mae", "rmse"):
            assert curves["learners"][spec][metric][-1] == entry["binned"][metric]
