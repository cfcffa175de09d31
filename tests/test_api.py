"""``streameval.evaluate``: the library's entry point, on any stream and any River model.

The same rows and the same model give the command line's numbers, number for number; the
references and the kappa family follow their definitions on streams checked by hand.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from river import dummy, linear_model, naive_bayes, stats, tree
from streameval.pipeline.streams.datasets import load

import streameval

#: What depends only on the rows and the learners (not the stream's name or source).
COMPARED = (
    "n_instances",
    "n_labelled",
    "classes",
    "learners",
    "comparisons",
    "overhead",
    "counters",
    "diagnostics",
)


def cli_results(tmp_path: Path, data_dir: Path, *args: str) -> dict[str, Any]:
    """``streameval evaluate ARGS --json`` in a child process."""
    out = tmp_path / "cli.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "streameval.cli",
            "evaluate",
            *args,
            "--no-progress",
            "--data-dir",
            str(data_dir),
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.read_text())


def rows(data_dir: Path, n: int, with_ts: bool) -> list[tuple]:
    """The first ``n`` Electricity rows as a plain list, ``(x, y)`` or ``(x, y, ts)``."""
    dataset = load("electricity", data_dir=data_dir)
    return [
        (dict(i.x), i.y, i.ts) if with_ts else (dict(i.x), i.y) for i in dataset.iter_instances(n)
    ]


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in COMPARED:
        assert a.get(key) == b.get(key), key


@pytest.mark.slow
def test_a_list_of_pairs_and_a_river_tree_equal_the_command_line(
    tmp_path: Path, data_dir: Path
) -> None:
    cli = cli_results(
        tmp_path, data_dir, "--dataset", "electricity", "--limit", "3000", "--learner", "ht"
    )
    api = streameval.evaluate(
        rows(data_dir, 3000, with_ts=False),
        {"ht": tree.HoeffdingTreeClassifier()},
        positive="UP",
    )
    same(api.to_dict(), cli)
    assert api.to_dict()["config"]["learners"] == ["ht"]


def test_zero_bins_equal_the_command_line(tmp_path: Path, data_dir: Path) -> None:
    """``bins=0`` (only the first prediction's and test-then-train's bins) is taken by
    both, with the same numbers."""
    cli = cli_results(
        tmp_path, data_dir, "--dataset", "electricity", "--limit", "400", "--learner",
        "nochange", "--delay", "30", "--reeval-k", "10", "--bins", "0",
    )  # fmt: skip
    api = streameval.evaluate(
        rows(data_dir, 400, with_ts=True),
        {"nochange": dummy.NoChangeClassifier()},
        delay=30,
        reeval_k=10,
        bins=0,
        positive="UP",
    ).to_dict()
    same(api, cli)
    binned = api["learners"]["nochange"]["binned"]["accuracy"]
    assert len(binned) == 2 and binned[0] == api["learners"]["nochange"]["accuracy"]
    assert binned[1] != binned[0]  # test-then-train: the label before, not 30 before


@pytest.mark.slow
def test_delays_bins_estimators_and_drift_resets_equal_the_command_line(
    tmp_path: Path, data_dir: Path
) -> None:
    """Timed rows, a count delay, re-evaluation, window, fading, a detector that alarms and
    restarts the tree (a clone of the object against a tree rebuilt from its spec)."""
    args = [
        "--limit",
        "2500",
        "--delay",
        "48",
        "--reeval-k",
        "10",
        "--bins",
        "6",
        "--window",
        "400",
        "--fading",
        "0.99",
        "--detector",
        "ph[estimator=raw,lambda=5]",
        "--drift-reset",
        "--snapshot-every",
        "500",
    ]
    cli = cli_results(
        tmp_path,
        data_dir,
        "--dataset",
        "electricity",
        "--learner",
        "ht",
        "--learner",
        "nochange",
        *args,
    )
    api = streameval.evaluate(
        rows(data_dir, 2500, with_ts=True),
        {"ht": tree.HoeffdingTreeClassifier(), "nochange": dummy.NoChangeClassifier()},
        delay=48,
        reeval_k=10,
        bins=6,
        window=400,
        fading=0.99,
        detectors=["ph[estimator=raw,lambda=5]"],
        drift_reset=True,
        snapshot_every=500,
        positive="UP",
    ).to_dict()
    same(api, cli)
    assert api["curves"] == cli["curves"]
    assert api["learners"]["ht"]["drift_resets"] > 0  # the reset path ran


def test_rivers_no_change_is_the_reference_in_every_bin() -> None:
    """River's No-Change predicts what the No-Change reference predicts, under any delay:
    Kappa-Temporal exactly 0, whole, windowed and in every bin (eq. 13)."""
    stream = [({"x": float(i)}, "abc"[(i // 4) % 3], float(i)) for i in range(600)]
    results = streameval.evaluate(
        stream, dummy.NoChangeClassifier(), delay=25, reeval_k=5, bins=5, window=100
    )
    entry = results.learners["NoChangeClassifier"]
    assert entry["kappa_per"] == entry["window"]["kappa_per"] == 0.0
    assert set(entry["binned"]["kappa_per"]) == {0.0}
    assert entry["accuracy"] < 1.0  # the delay costs No-Change something: not a trivial 0


def test_a_callable_delay_equals_the_same_constant_count_delay() -> None:
    """Without ``ts`` the event time is the position: a constant function ``N`` delivers
    the labels in the order of the count delay ``N`` (only the event times of the last
    ``N`` labels differ, which no metric without bins reads)."""
    stream = [({"x": float(i % 5)}, "ab"[(i // 3) % 2]) for i in range(400)]
    by_count = streameval.evaluate(stream, naive_bayes.GaussianNB(), delay=7, window=50)
    by_function = streameval.evaluate(
        stream, naive_bayes.GaussianNB(), delay=lambda x, y, ts: 7, window=50
    )
    two_args = streameval.evaluate(stream, naive_bayes.GaussianNB(), delay=lambda x, y: 7)
    assert by_function["learners"] == by_count["learners"]
    assert two_args.metric("accuracy") == by_count.metric("accuracy")
    assert by_function["config"]["delay"] == "callable:<lambda>"
    never = streameval.evaluate(stream, naive_bayes.GaussianNB(), delay=lambda x, y: 10**9)
    assert never["n_labelled"] == 400  # every label still comes, after the last features
    for wait in (None, -1, "soon", float("nan")):
        with pytest.raises(ValueError, match=r"delay function gave .* instance 0 \(a number"):
            streameval.evaluate(stream, naive_bayes.GaussianNB(), delay=_constant(wait))


def _constant(value: Any) -> Any:
    return lambda x, y: value


def test_kappa_per_and_accuracy_by_hand() -> None:
    """A learner that always says 'a' on a stream of runs: every figure checked by hand."""
    ys = list("aabbbaab")
    stream = [({}, y) for y in ys]
    results = streameval.evaluate(stream, {"prior": dummy.PriorClassifier()})
    # PriorClassifier predicts nothing at first, then the most frequent class so far
    # (ties to the smallest label): -, a, a, a, b?  counts after 4 labels a2 b2 -> 'a'
    entry = results.learners["prior"]
    predictions = [None, "a", "a", "a", "a", "b", "a", "a"]
    correct = sum(p == y for p, y in zip(predictions, ys, strict=True))
    assert entry["accuracy"] == correct / len(ys)
    # No-Change: right where y_t == y_{t-1}, and not at the first label
    p_per = sum(ys[t] == ys[t - 1] for t in range(1, len(ys))) / len(ys)
    p0 = entry["accuracy"]
    assert entry["kappa_per"] == pytest.approx((p0 - p_per) / (1 - p_per), abs=1e-12)


def test_a_regressor_is_scored_as_regression() -> None:
    """River's running mean predicts the mean of the labels learned so far."""
    stream = [({}, float(y)) for y in (1, 2, 3, 4)]
    results = streameval.evaluate(stream, dummy.StatisticRegressor(stats.Mean()))
    assert results["task"] == "regression"
    # predictions 0, 1, 1.5, 2 -> absolute errors 1, 1, 1.5, 2
    assert results.learners["StatisticRegressor"]["mae"] == pytest.approx(5.5 / 4)


def test_models_are_named_and_checked() -> None:
    stream = [({"x": 1.0}, "a"), ({"x": 2.0}, "b")] * 5
    results = streameval.evaluate(
        stream, [naive_bayes.GaussianNB(), tree.HoeffdingTreeClassifier()]
    )
    assert list(results.learners) == ["GaussianNB", "HoeffdingTreeClassifier"]
    with pytest.raises(ValueError, match="two models named 'GaussianNB'"):
        streameval.evaluate(stream, [naive_bayes.GaussianNB(), naive_bayes.GaussianNB()])
    with pytest.raises(TypeError, match="spec strings are for the command line"):
        streameval.evaluate(stream, {"nb": "nb"})
    with pytest.raises(ValueError, match="mixed classifiers and regressors"):
        streameval.evaluate(stream, [naive_bayes.GaussianNB(), linear_model.LinearRegression()])
    with pytest.raises(TypeError, match="stream item 0"):
        streameval.evaluate([{"x": 1}], naive_bayes.GaussianNB())
    with pytest.raises(TypeError, match="is a path: name the file with its format"):
        streameval.evaluate(Path("data.csv"), naive_bayes.GaussianNB())
    with pytest.raises(TypeError, match=r"'GaussianNB' is the class GaussianNB: .* GaussianNB\(\)"):
        streameval.evaluate(stream, naive_bayes.GaussianNB)
    for bad in ({"limit": -1}, {"limit": 2.5}, {"snapshot_every": -1}, {"seed": "x"}):
        with pytest.raises(ValueError, match=f"^{next(iter(bad))} must be an integer"):
            streameval.evaluate(stream, naive_bayes.GaussianNB(), **bad)
    with pytest.raises(TypeError, match=r"^model 'x' is None, not a model: a model has learn_one"):
        streameval.evaluate(stream, {"x": None})
    with pytest.raises(ValueError, match=r"item 0: y 'a' is not a number, and the task is regr"):
        streameval.evaluate(stream, linear_model.LinearRegression())
    # one detector named by a string, not the string's letters
    one = streameval.evaluate(stream, naive_bayes.GaussianNB(), detectors="adwin")
    assert one["config"]["detectors"] == ["adwin"]


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (({"x": 1.0}, None), ValueError, "stream item 3: y is None"),
        (({"x": 1.0}, "a", float("nan")), ValueError, "stream item 3: ts must be a finite"),
        (({"x": 1.0}, "a", float("inf")), ValueError, "stream item 3: ts must be a finite"),
        (({"x": 1.0}, "a", None), TypeError, r"stream item 3: ts .* got None \(or give"),
        (({"x": 1.0}, 1, 3.0), ValueError, r"stream item 3: label 1 \(int\) reads as the earlier"),
    ],
)
def test_an_item_with_no_label_or_no_place_in_time_is_named(bad, error, message) -> None:
    # a None label would become a class 'None'; a NaN time passes every order check
    stream = [({"x": float(i)}, "a1"[i % 2], float(i)) for i in range(3)] + [bad]
    with pytest.raises(error, match=message):
        streameval.evaluate(stream, naive_bayes.GaussianNB(), delay="time:2")


def test_an_endless_generator_with_a_limit() -> None:
    endless = (({"x": float(i % 2)}, i % 2) for i in itertools.count())
    results = streameval.evaluate(endless, naive_bayes.GaussianNB(), limit=300, delay=3)
    assert results["n_instances"] == results["n_labelled"] == 300
    assert results["classes"] == ["0", "1"]


def test_results_views(tmp_path: Path) -> None:
    stream = [({"x": float(i % 2)}, "ab"[i % 2]) for i in range(200)]
    results = streameval.evaluate(
        stream, {"nb": naive_bayes.GaussianNB()}, delay=5, reeval_k=5, bins=4
    )
    text = results.table()
    assert text.startswith("stream: 200 instances, 200 labelled, delay 5")
    assert ("nb" in text and "b = 0" in text.replace("b=0", "b = 0")) or "bin" in text
    assert json.loads(results.to_json(tmp_path / "r.json")) == results.to_dict()
    assert results.plot(tmp_path / "b.png").stat().st_size > 0
    report = results.report(tmp_path / "report")
    assert report.name == "report.html" and "nb" in report.read_text()


class _Protocol:
    """A learner of streameval's protocol that is no River estimator (no clone())."""

    def learn_one(self, x: dict, y: Any, *, at: int | None = None) -> None:
        self.last = y

    def predict_proba_one(self, x: dict, *, at: int | None = None) -> dict:
        return {getattr(self, "last", "a"): 1.0}

    def predict_proba_many(self, xs: list, *, at: list[int] | None = None) -> list[dict]:
        return [self.predict_proba_one(x) for x in xs]


def test_a_protocol_learner_runs_and_a_reset_without_clone_is_refused() -> None:
    stream = [({}, "ab"[(i // 2) % 2]) for i in range(40)]
    results = streameval.evaluate(stream, {"mine": _Protocol()})
    # runs of two: No-Change is right at every second label (20/40; nothing to repeat at the
    # first); "mine" predicts the last label too, and "a" at the first: one more right
    entry = results.learners["mine"]
    assert entry["accuracy"] == 21 / 40
    assert entry["kappa_per"] == pytest.approx((21 / 40 - 20 / 40) / (1 - 20 / 40))
    with pytest.raises(ValueError, match="'mine' has no clone"):
        streameval.evaluate(stream, {"mine": _Protocol()}, detectors=["ph"], drift_reset=True)


def test_the_public_names_resolve_and_compose() -> None:
    """Every name of ``streameval.__all__`` imports; a metric composes with its window and
    fading estimate from the top-level names (figures by hand)."""
    for name in streameval.__all__:
        assert getattr(streameval, name) is not None, name
    y = ["a", "a", "b", "b", "a"]
    pred = ["a", "b", "b", "a", "a"]
    per = [None, "a", "a", "b", "b"]  # No-Change: the previous label
    window = streameval.Rolling(streameval.KappaTemporal(), window=3)
    faded = streameval.Faded(streameval.Accuracy(), alpha=0.5)
    for t in range(5):
        window.update(y[t], pred[t], per[t])
        faded.update(y[t], pred[t])
    # the last three: right b/b, wrong b/a, right a/a (2/3); No-Change right once (b/b): 1/3
    assert window.get() == pytest.approx((2 / 3 - 1 / 3) / (1 - 1 / 3))
    # weights 1/16, 1/8, 1/4, 1/2, 1 on right, wrong, right, wrong, right
    assert faded.get() == pytest.approx((1 / 16 + 1 / 4 + 1) / (1 / 16 + 1 / 8 + 1 / 4 + 1 / 2 + 1))
