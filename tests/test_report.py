"""The HTML report, its plots and the metrics-over-time curves.

The results documents are made by the core on small synthetic streams, the
way ``streameval evaluate`` makes them, with the curves recorded from the
experiment's periodic snapshots (:mod:`streameval.pipeline.report.curves`).
"""

from __future__ import annotations

import argparse
import base64
import json
import pickle
import re
import struct
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.evaluate import prepare, schedule
from streameval.pipeline.events import MetricSnapshot
from streameval.pipeline.experiment import Experiment
from streameval.pipeline.report.curves import CurveRecorder, curves_from_snapshots
from streameval.pipeline.report.html import REPORT_NAME, write_report
from streameval.pipeline.report.html_tables import baseline_role, ranking

from streameval.cli.report import add_report_command

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?(e[+-]?\d+)?$")
MISSING = object()


def run(config: ExperimentConfig) -> tuple[dict[str, Any], list[MetricSnapshot]]:
    """The results document of ``config`` with its curves, and every snapshot emitted."""
    dataset, config = prepare(config)
    experiment = Experiment(config)
    snapshots: list[MetricSnapshot] = []
    recorder = CurveRecorder()
    for event in schedule(config, dataset):
        outputs = experiment.process(event)
        snapshots += [o for o in outputs if isinstance(o, MetricSnapshot)]
        recorder.extend(outputs)
    results = experiment.results()
    block = recorder.block()
    if "curves" in results:  # once the experiment records its own curves, they must agree
        assert results["curves"] == block
    results["curves"] = block
    # what the CLI writes and the report command reads back
    return json.loads(json.dumps(results)), snapshots


@pytest.fixture(scope="module")
def markov() -> tuple[dict[str, Any], list[MetricSnapshot]]:
    """Three classes with strong temporal dependence, delayed labels, re-evaluation."""
    return run(
        ExperimentConfig(
            stream="markov-test",
            learners=["nb", "nochange", "majority", "ta:nb", "majority[window=50]"],
            window=300,
            fading=0.99,
            reeval_k=5,
            bins=8,
            snapshot_every=200,
            dataset="markov[k=3,p_stay=0.85,n=1200]",
            delay="15",
        )
    )


@pytest.fixture(scope="module")
def sea() -> dict[str, Any]:
    """A binary stream with known drift points, a drift detector and AUC, no curves."""
    results, _ = run(
        ExperimentConfig(
            stream="sea-test",
            learners=["nochange", "majority", "nb"],
            detectors=["ph"],
            dataset="sea_drift[n=1200]",
            delay="0",
        )
    )
    results.pop("curves")
    return results


@pytest.fixture(scope="module")
def markov_report(tmp_path_factory: pytest.TempPathFactory, markov: tuple) -> Path:
    return write_report(markov[0], tmp_path_factory.mktemp("markov-report"))


@pytest.fixture(scope="module")
def sea_report(tmp_path_factory: pytest.TempPathFactory, sea: dict[str, Any]) -> Path:
    return write_report(sea, tmp_path_factory.mktemp("sea-report"))


class Cells(HTMLParser):
    """Every ``<td>`` (attributes and text), the ``<img>`` sources, the rows of each table."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[dict[str, str | None], str]] = []
        self.images: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._cell: dict[str, str | None] | None = None
        self._text: list[str] = []
        self._row: list[str] | None = None
        self._table = ""
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or ""
            self.tables[self._table] = []
        elif tag == "td":
            self._cell, self._text = dict(attrs), []
        elif tag == "th":
            self._in_th, self._text = True, []
        elif tag == "tr":
            self._row = []
        elif tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text).strip()
        if tag == "td" and self._cell is not None:
            self.cells.append((self._cell, text))
            if self._row is not None:
                self._row.append(text)
            self._cell = None
        elif tag == "th" and self._in_th:
            if self._row is not None:
                self._row.append(text)
            self._in_th = False
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None or self._in_th:
            self._text.append(data)


def parse(path: Path) -> Cells:
    parser = Cells()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def at(doc: Any, path: list[Any]) -> Any:
    """The value at ``path`` in ``doc``, or :data:`MISSING` (unlike the report's ``lookup``)."""
    for key in path:
        in_dict = isinstance(doc, dict) and key in doc
        in_list = isinstance(doc, list) and isinstance(key, int) and 0 <= key < len(doc)
        if in_dict or in_list:
            doc = doc[key]
        else:
            return MISSING
    return doc


def check_cells(report: Path, results: dict[str, Any]) -> int:
    """Every number in a table cell is the JSON value its ``data-path`` names."""
    checked = 0
    for attrs, text in parse(report).cells:
        path_attr = attrs.get("data-path")
        if path_attr is None:
            assert not NUMBER.match(text), f"number {text!r} without a data-path"
            continue
        path = json.loads(path_attr)
        expected = at(results, path)
        assert expected is not MISSING, f"{path} is not in the results"
        shown = json.loads(attrs["data-value"] or "")
        assert shown == expected and type(shown) is type(expected), path
        if expected is None:
            assert text == "-", path
        elif isinstance(expected, str):
            assert text == expected, path
        elif isinstance(expected, bool):
            assert text == ("yes" if expected else "no"), path
        elif isinstance(expected, int):
            assert int(text.replace(",", "")) == expected, path
        else:
            assert abs(float(text) - expected) <= 5e-5 + 1e-12 * abs(expected), (path, text)
        checked += 1
    return checked


# -- report content ----------------------------------------------------------------------------


def test_every_table_number_equals_the_results_json(
    markov_report: Path, markov: tuple, sea_report: Path, sea: dict[str, Any]
) -> None:
    results = markov[0]
    assert check_cells(markov_report, results) > 100
    assert check_cells(sea_report, sea) > 20


def test_report_covers_every_learner_metric_and_diagnostic(
    markov_report: Path, markov: tuple
) -> None:
    results = markov[0]
    paths = {
        tuple(json.loads(a["data-path"] or ""))
        for a, _ in parse(markov_report).cells
        if "data-path" in a
    }
    for spec in results["learners"]:
        for metric in ("accuracy", "kappa", "kappa_per", "kappa_m", "kappa_plus", "gmean"):
            assert ("learners", spec, metric) in paths
        for name in ("window", "fading"):
            assert ("learners", spec, name, "kappa_per") in paths
        assert ("learners", spec, "psi_w", "accuracy") in paths
    diag = results["diagnostics"]
    for r in diag["transition"]:
        for c in diag["transition"][r]:
            assert ("diagnostics", "transition", r, c) in paths
    for label, values in diag["delta"].items():
        for i in range(len(values)):
            assert ("diagnostics", "delta", label, i) in paths
    for label in diag["priors"]:
        assert ("diagnostics", "priors", label) in paths
    for pair in results["comparisons"]:
        assert ("comparisons", pair, "q", "whole") in paths


def test_ranking_sorted_by_kappa_plus_then_accuracy_with_baselines_and_flags(
    markov_report: Path, markov: tuple
) -> None:
    results = markov[0]
    learners = results["learners"]
    order = ranking(results)
    keys = [(learners[s]["kappa_plus"], learners[s]["accuracy"]) for s in order]
    assert keys == sorted(keys, reverse=True)
    rows = parse(markov_report).tables["ranking"][1:]  # after the header row
    table = {row[1]: row for row in rows}
    assert [row[1] for row in rows] == order
    assert [row[0] for row in rows] == [str(i + 1) for i in range(len(order))]
    assert table["nochange"][2] == "No-Change"
    assert table["majority"][2] == "Majority"
    assert table["majority[window=50]"][2] == "Majority"
    assert table["nb"][2] == ""
    for spec, row in table.items():
        k_per = learners[spec]["kappa_per"]
        if spec == "nochange":
            assert "reference" in row[-1]
        elif k_per <= 0:
            assert row[-1] == "fails No-Change"
        else:
            assert row[-1] == "beats No-Change"
    assert learners["majority"]["kappa_per"] < 0  # a dependent stream: Majority must be flagged


def test_baseline_roles() -> None:
    assert baseline_role("nochange") == "No-Change"
    assert baseline_role("majority") == "Majority"
    assert baseline_role("majority[window=10]") == "Majority"
    assert baseline_role("ta:majority") is None
    assert baseline_role("ta3:ht") is None
    assert baseline_role("not a [spec") is None


def test_report_is_self_contained(markov_report: Path, sea_report: Path) -> None:
    for report in (markov_report, sea_report):
        text = report.read_text(encoding="utf-8")
        assert not re.search(r"https?://", text, re.IGNORECASE)
        assert "<link" not in text and "<script" not in text and "@import" not in text
        assert re.findall(r'src="([^"]*)"', text), "no embedded image"
        for src in re.findall(r'src="([^"]*)"', text):
            assert src.startswith("data:image/png;base64,")
        assert "url(" not in text


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert data[-8:-4] == b"IEND"
    return width, height


def test_pngs_are_valid_written_and_embedded(markov_report: Path) -> None:
    out = markov_report.parent
    files = {p.name: p.read_bytes() for p in out.glob("*.png")}
    assert set(files) == {
        "curves.png",
        "curves-window.png",
        "curves-fading.png",
        "binned.png",
        "diagnostics-priors.png",
        "diagnostics-transition.png",
        "diagnostics-delta.png",
    }
    for name, data in files.items():
        width, height = png_size(data)
        assert width > 100 and height > 100 and len(data) > 5000, name
    embedded = [base64.b64decode(src.split(",", 1)[1]) for src in parse(markov_report).images]
    assert sorted(embedded) == sorted(files.values())


def test_no_curves_says_how_to_get_them(sea_report: Path) -> None:
    text = sea_report.read_text(encoding="utf-8")
    assert "--snapshot-every N" in text
    assert "--reeval-k K --bins B" in text
    names = {p.name for p in sea_report.parent.glob("*.png")}
    assert not any(n.startswith("curves") for n in names)
    assert "binned.png" not in names
    assert {"diagnostics-priors.png", "diagnostics-transition.png"} <= names


def test_drift_and_auc_in_report(sea_report: Path, sea: dict[str, Any]) -> None:
    paths = [
        json.loads(a["data-path"] or "") for a, _ in parse(sea_report).cells if "data-path" in a
    ]
    assert ["learners", "nb", "auc"] in paths
    assert ["learners", "nb", "drift", "ph", "n_alarms"] in paths
    assert ["learners", "nb", "drift", "ph", "detection", "mean_delay"] in paths


def test_regression_results(tmp_path: Path) -> None:
    results, _ = run(
        ExperimentConfig(
            stream="friedman-test",
            learners=["mean", "linreg"],
            task="regression",
            reeval_k=5,
            bins=4,
            snapshot_every=100,
            dataset="friedman[n=300]",
            delay="10",
        )
    )
    report = write_report(results, tmp_path)
    assert check_cells(report, results) > 10
    assert ranking(results)[0] == min(
        results["learners"], key=lambda s: results["learners"][s]["mae"]
    )
    assert {"curves.png", "binned.png"} <= {p.name for p in tmp_path.glob("*.png")}


def without_plots(results: dict[str, Any]) -> dict[str, Any]:
    """A copy with nothing to plot (the command tests need no figures)."""
    out = {k: v for k, v in results.items() if k not in ("curves", "diagnostics")}
    out["learners"] = {
        s: {k: v for k, v in e.items() if k != "binned"} for s, e in out["learners"].items()
    }
    return out


def test_report_command(tmp_path: Path, sea: dict, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(without_plots(sea)))
    parser = argparse.ArgumentParser(prog="streameval")
    add_report_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", str(source), "--out", str(tmp_path / "out")])
    assert args.handler(args) == 0
    assert (tmp_path / "out" / REPORT_NAME).is_file()
    assert str(tmp_path / "out" / REPORT_NAME) in capsys.readouterr().out
    args = parser.parse_args(["report", str(source)])  # default: next to the JSON
    assert args.handler(args) == 0
    assert (tmp_path / "r-report" / REPORT_NAME).is_file()
    bad = tmp_path / "bad.json"
    bad.write_text('{"stream": "x"}')
    args = parser.parse_args(["report", str(bad)])
    with pytest.raises(ValueError, match="not a results document"):
        args.handler(args)


def test_results_message_of_the_metrics_topic_is_accepted(tmp_path: Path, sea: dict) -> None:
    message = {"stream": "s", "kind": "results", "n_labelled": 1, "results": without_plots(sea)}
    report = write_report(message, tmp_path)
    assert check_cells(report, message["results"]) > 10


# -- curves -----------------------------------------------------------------------------------


def test_curves_are_the_snapshots(markov: tuple) -> None:
    results, snapshots = markov
    curves = results["curves"]
    assert curves["n_labelled"] == [*range(200, 1201, 200)]
    assert curves["stride"] == 1
    assert set(curves["learners"]) == set(results["learners"])
    for snap in snapshots:
        i = curves["n_labelled"].index(snap.n_labelled)
        series = curves["learners"][snap.learner]
        for key, values in series.items():
            assert values[i] == snap.metrics[key]
        assert curves["pending"][i] == snap.metrics["pending"]
    assert {"accuracy", "kappa_per", "window.kappa_plus", "fading.accuracy"} <= set(
        curves["learners"]["nb"]
    )
    final = {k: v[-1] for k, v in curves["learners"]["nb"].items() if "." not in k}
    for key, value in final.items():
        assert value == results["learners"]["nb"][key]  # the last point is the end of stream


def _snap(n: int, learner: str = "a", kind: str = "periodic", acc: float = 0.5) -> dict:
    return {
        "stream": "s",
        "learner": learner,
        "n_labelled": n,
        "ts": float(n),
        "kind": kind,
        "metrics": {"accuracy": acc, "kappa_se": 0.1, "window.kappa": None, "pending": 2},
        "binned": None,
    }


def test_curve_recorder_thins_deterministically_and_keeps_the_final_point() -> None:
    rec = CurveRecorder(max_points=8)
    for n in range(1, 101):
        rec.add(_snap(n, "a"))
        rec.add(_snap(n, "b"))
    rec.add(_snap(101, "a", "final"))
    rec.add(_snap(101, "b", "final"))
    block = rec.block()
    assert block is not None
    assert block["stride"] == 16
    assert block["n_labelled"] == [16, 32, 48, 64, 80, 96, 101]
    assert block["learners"]["a"] == {
        "accuracy": [0.5] * 7,
        "window.kappa": [None] * 7,
    }
    same = CurveRecorder(max_points=8)
    same.extend([_snap(n, s) for n in range(1, 101) for s in "ab"])
    same.extend([_snap(101, s, "final") for s in "ab"])
    assert same.block() == block


def test_curve_recorder_bounds_values_skips_duplicates_and_pickles() -> None:
    rec = CurveRecorder(max_points=1000, max_values=50)
    for n in range(1, 41):
        rec.add(_snap(n))
        rec.add(_snap(n))  # redelivered message
    rec.add(_snap(3))  # late duplicate: ignored
    rec.add({"stream": "s", "kind": "results", "n_labelled": 40, "results": {}})
    block = rec.block()
    assert block is not None
    assert len(block["n_labelled"]) * (2 + 3) <= 50
    assert block["n_labelled"] == sorted(set(block["n_labelled"]))
    copy = pickle.loads(pickle.dumps(rec))
    copy.add(_snap(64))
    rec.add(_snap(64))
    assert copy.block() == rec.block()
    assert CurveRecorder().block() is None
    assert curves_from_snapshots([]) is None


def test_final_snapshot_at_a_thinned_position_is_kept() -> None:
    rec = CurveRecorder(max_points=4)
    for n in range(1, 7):
        rec.add(_snap(n))
    rec.add(_snap(7))  # skipped at stride 2
    rec.add(_snap(7, kind="final", acc=0.7))
    block = rec.block()
    assert block is not None
    assert block["n_labelled"][-1] == 7
    assert block["learners"]["a"]["accuracy"][-1] == 0.7
