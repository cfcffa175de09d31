"""``streameval bench --only s2``: the columnar baselines' rate beside the per-event core."""

from __future__ import annotations

import json

import pytest

from streameval import bench


@pytest.mark.slow
def test_quick_speed_target_2_row(tmp_path, data_dir) -> None:
    code = bench.main(["--quick", "--only", "s2", "--out", str(tmp_path), "--data-dir",
                       str(data_dir)])  # fmt: skip
    doc = json.loads((tmp_path / "results.json").read_text())
    assert code == 0, doc["rows"]
    (row,) = doc["rows"]
    assert row["id"] == "s2" and row["result"] in ("PASS", "FAIL")
    ours, ref = row["data"]["ours"]["runs"][0], row["data"]["reference"]["runs"][0]
    assert ref["n_labelled"] == 2000
    # the two cores agree on the accuracies, whatever their speeds
    assert ours["accuracy"] == ref["accuracy"]
    assert row["ratio"] > 0
