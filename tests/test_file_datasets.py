"""The user's own files, ``csv:PATH[...]`` and ``arff:PATH[...]``.

The identity test writes Electricity out as CSV (plain and gzip) and ARFF and checks that
``streameval evaluate`` gives the built-in dataset's results number for number; the
others check inference, overrides, times, ids, label times and every malformed-row error
(file and line named) on small hand-written files.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from kafka_fixtures import run_and_evaluate
from streameval.pipeline.learners import MixedNB
from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams.base import DatasetError
from streameval.pipeline.streams.datasets import load, load_real

import streameval
from streameval.cli.main import main

N = 5_000  # a prefix of Electricity: 104 days, enough for every learner to differ
COLUMNS = ["date", "day", "period", "nswprice", "nswdemand", "vicprice", "vicdemand", "transfer"]


def _electricity_rows() -> list[list[str]]:
    """The first ``N`` rows of the packaged Electricity, as text, with the class last."""
    ds = load_real("electricity", n=N)
    return [row for _, row in ds.source.records()]


def _write_csv(path: Path, rows: list[list[str]], zipped: bool) -> None:
    opener = gzip.open if zipped else open
    with opener(path, "wt", newline="") as out:  # type: ignore[operator]
        writer = csv.writer(out)
        writer.writerow(["t", *COLUMNS, "class", "labelled_at"])
        for i, row in enumerate(rows):
            writer.writerow([i * 1800, *row, i * 1800 + 86_400])


def _write_arff(path: Path, rows: list[list[str]]) -> None:
    lines = ["% Electricity, first rows", "@relation elec", "@attribute t numeric"]
    for name in COLUMNS:
        kind = "{1,2,3,4,5,6,7}" if name == "day" else "numeric"
        lines.append(f"@attribute {name} {kind}")
    lines += ["@attribute class {DOWN,UP}", "@data"]
    lines += [",".join([str(i * 1800), *row]) for i, row in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")


def _results(dataset: str, tmp_path: Path, name: str, delay: str) -> dict[str, Any]:
    out = tmp_path / f"{name}.json"
    args = ["evaluate", "--dataset", dataset, "--delay", delay, "--window", "1000"]
    args += ["--reeval-k", "10", "--bins", "8", "--json", str(out)]
    for learner in ("nochange", "majority", "nb", "ht", "ta:ht"):
        args += ["--learner", learner]
    assert main(args) == 0
    results = json.loads(out.read_text())
    for key in ("stream", "runtime", "overhead"):
        results.pop(key, None)
    for key in ("stream", "dataset"):
        results["config"].pop(key, None)
    return results


@pytest.fixture(scope="module")
def electricity_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("elec")
    rows = _electricity_rows()
    files = {"csv": root / "elec.csv", "gz": root / "elec.data", "arff": root / "elec.arff"}
    _write_csv(files["csv"], rows, zipped=False)
    _write_csv(files["gz"], rows, zipped=True)  # gzip found by its magic bytes, not its name
    _write_arff(files["arff"], rows)
    return files


def test_csv_and_arff_of_electricity_give_the_built_in_results(
    electricity_files: dict[str, Path], tmp_path: Path
) -> None:
    built_in = _results(f"electricity[n={N}]", tmp_path, "builtin", "time:86400")
    csv_options = "[time=t,nominal=day,exclude=labelled_at]"  # target: the last free column
    specs = {
        "csv": f"csv:{electricity_files['csv']}{csv_options}",
        "arff": f"arff:{electricity_files['arff']}[time=t]",
    }
    for name, spec in specs.items():
        assert _results(spec, tmp_path, name, "time:86400") == built_in, name
    gz = load(f"csv:{electricity_files['gz']}{csv_options}")
    assert list(gz.iter_instances()) == list(load(specs["csv"]).iter_instances())
    assert list(gz.iter_instances()) == list(load(f"electricity[n={N}]").iter_instances())
    # the file's own label times are its natural delay: the same one day
    natural = f"csv:{electricity_files['csv']}[time=t,nominal=day,label_time=labelled_at]"
    by_file = _results(natural, tmp_path, "natural", "natural")
    assert by_file["config"].pop("delay") == "natural"
    built_in["config"].pop("delay")
    assert by_file == built_in
    assert built_in["n_instances"] == N and len(built_in["learners"]) == 5


def test_the_python_api_takes_file_specs(electricity_files: dict[str, Path]) -> None:
    from river import tree

    spec = f"csv:{electricity_files['csv']}[time=t,nominal=day,exclude=labelled_at,n=3000]"
    a = streameval.evaluate(spec, tree.HoeffdingTreeClassifier(), delay="time:86400")
    b = streameval.evaluate(
        "electricity[n=3000]", tree.HoeffdingTreeClassifier(), delay="time:86400"
    )
    for metric in ("accuracy", "kappa", "kappa_per", "kappa_plus"):
        assert a.metric(metric) == b.metric(metric), metric
    assert 0.5 < a.metric("accuracy")["HoeffdingTreeClassifier"] < 1.0


def _csv(tmp_path: Path, text: str, name: str = "d.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_types_are_inferred_and_overridable(tmp_path: Path) -> None:
    path = _csv(tmp_path, "zip,amount,colour,label\n100,1.5,red,no\n200,,blue,yes\n300,2,,no\n")
    ds = load(f"csv:{path}")
    assert ds.features == ["zip", "amount", "colour"]
    assert ds.categorical == ["colour"]
    assert ds.classes == ["no", "yes"] and ds.positive == "yes"
    rows = [(i.x, i.y, i.ts, i.id) for i in ds.iter_instances()]
    assert rows == [
        ({"zip": 100.0, "amount": 1.5, "colour": "red"}, "no", 0.0, "0"),
        ({"zip": 200.0, "colour": "blue"}, "yes", 1.0, "1"),  # a missing value is left out
        ({"zip": 300.0, "amount": 2.0}, "no", 2.0, "2"),
    ]
    ds = load(f"csv:{path}[nominal=zip,exclude=colour,positive=no]")
    assert ds.categorical == ["zip"] and ds.features == ["zip", "amount"]
    assert next(ds.iter_instances()).x == {"zip": "100", "amount": 1.5}
    assert ds.positive == "no"


def test_nan_in_a_numeric_column_is_a_missing_value(tmp_path: Path) -> None:
    # numpy and pandas write a missing number as nan: the column stays numeric (as
    # inferred or declared) and the value is left out; next to text it is a category
    path = _csv(tmp_path, "a,b,c,y\n1.5,nan,x,p\nNaN,2,nan,q\n-nan,3,y,p\n")
    for spec in (f"csv:{path}", f"csv:{path}[numeric=a|b]"):
        ds = load(spec)
        assert ds.categorical == ["c"], spec
        assert [i.x for i in ds.iter_instances()] == [
            {"a": 1.5, "c": "x"},
            {"b": 2.0, "c": "nan"},
            {"b": 3.0, "c": "y"},
        ], spec


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffa,y\n1,p\n2,q\n".encode())
    ds = load(f"csv:{path}[target=a,task=regression]")
    assert ds.features == ["y"] and [i.y for i in ds.iter_instances()] == [1.0, 2.0]
    arff = tmp_path / "bom.arff"
    arff.write_bytes(
        "\ufeff@relation r\n@attribute a numeric\n@attribute y {p,q}\n@data\n1,p\n2,q\n".encode()
    )
    assert [(i.x, i.y) for i in load(f"arff:{arff}").iter_instances()] == [
        ({"a": 1.0}, "p"),
        ({"a": 2.0}, "q"),
    ]


@pytest.mark.parametrize("extra", [[], ["--delay", "1", "--reeval-k", "1", "--bins", "2"]])
def test_a_prefix_without_the_positive_class_is_no_error(tmp_path: Path, extra) -> None:
    # the classes are the file's, the positive class checked against them before the run;
    # the first two labels are both 'p' (the columnar and the per-event core)
    path = _csv(tmp_path, "a,y\n1,p\n2,p\n3,q\n4,q\n")
    out = tmp_path / "r.json"
    args = ["evaluate", "--dataset", f"csv:{path}", "--limit", "2", "--learner", "nb"]
    assert main([*args, "--no-progress", "--json", str(out), *extra]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["positive"] == "q" and doc["classes"] == ["p"]
    assert doc["n_labelled"] == 2
    lib = streameval.evaluate(f"csv:{path}", {"nb": MixedNB()}, limit=2)
    assert lib["classes"] == ["p"] and lib["n_labelled"] == 2
    with pytest.raises(ValueError, match="positive class 'q' is not one of the stream's"):
        streameval.evaluate([({"a": 1.0}, "p"), ({"a": 2.0}, "p")], MixedNB(), positive="q")


def test_times_ids_and_label_times(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "order,at,x,paid,known\n"
        "a7,2024-03-01T10:00:00Z,1,1,2024-03-01T12:00:00+00:00\n"
        "b2,2024-03-01T10:30:00,2,0,2024-03-02T10:30:00Z\n"
        "c9,2024-03-01T11:00:00+01:00,3,1,2024-03-01T11:00:00+01:00\n",
    )
    # 11:00+01:00 is 10:00 UTC: before the previous row, so time must be refused...
    with pytest.raises(DatasetError, match=r"d\.csv:4: column 'at'.*sort the file by time"):
        load(f"csv:{path}[time=at,id=order,target=paid]")
    path.write_text(path.read_text().replace("11:00:00+01:00", "12:00:00+01:00"))
    ds = load(f"csv:{path}[time=at,id=order,target=paid,label_time=known]")
    base = 1709287200.0  # 2024-03-01T10:00:00Z
    assert [(i.id, i.ts) for i in ds.iter_instances()] == [
        ("a7", base),
        ("b2", base + 1800),
        ("c9", base + 3600),
    ]
    assert ds.features == ["x"] and ds.classes == ["0", "1"] and ds.positive == "1"
    delay = ds.natural_delay
    assert delay is not None and str(delay) == "label_time"
    due = [delay.due(i) for i in ds.iter_instances()]  # type: ignore[union-attr]
    assert due == [base + 7200, base + 1800 + 86400, base + 3600]
    ms = _csv(tmp_path, "t,x,y\n1000,1,a\n2500,2,b\n", "ms.csv")
    assert [i.ts for i in load(f"csv:{ms}[time=t,time_unit=ms]").iter_instances()] == [1.0, 2.5]


def test_regression_and_shuffles(tmp_path: Path) -> None:
    path = _csv(tmp_path, "x,y\n" + "".join(f"{i},{i * 0.5}\n" for i in range(10)))
    ds = load(f"csv:{path}[task=regression,n=6]")
    assert ds.task == "regression" and ds.classes == [] and ds.n_instances == 6
    assert [i.y for i in ds.iter_instances()] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    shuffled = load(f"csv:{path}[task=regression,shuffle=full,shuffle_seed=3]")
    ys = [i.y for i in shuffled.iter_instances()]
    assert sorted(ys) == [i * 0.5 for i in range(10)] and ys != sorted(ys)
    again = [i.y for i in load(f"csv:{path}[task=regression,shuffle=full,seed=3]").iter_instances()]
    assert again == ys


def test_arff_declarations_sparse_rows_and_missing_values(tmp_path: Path) -> None:
    path = tmp_path / "s.arff.gz"
    text = (
        "@relation r\n@attribute a numeric\n@attribute b {x,y}\n@attribute c string\n"
        "@attribute class {no,yes}\n@data\n1,x,'hello world',no\n?,y,z,yes\n"
        "{0 2.5, 3 yes}\n"
    )
    with gzip.open(path, "wt") as out:
        out.write(text)
    ds = load(f"arff:{path}")
    assert ds.categorical == ["b", "c"] and ds.classes == ["no", "yes"]
    got = [(i.x, i.y) for i in ds.iter_instances()]
    assert got[0] == ({"a": 1.0, "b": "x", "c": "hello world"}, "no")
    assert got[1] == ({"b": "y", "c": "z"}, "yes")
    assert got[2][1] == "yes" and got[2][0]["a"] == 2.5


@pytest.mark.parametrize(
    ("text", "spec_options", "error"),
    [
        ("a,y\n1,p\n2\n", "", r"d\.csv:3: 1 fields, the header has 2"),
        ("a,y\n1,p\nx,q\n", "[numeric=a]", r"d\.csv:3: column 'a': 'x' is not a number"),
        ("a,y\n1,p\n2,\n", "", r"d\.csv:3: column 'y' \(target\) is empty"),
        ("a,y,t\n1,p,5\n2,q,4\n", "[time=t]", r"d\.csv:3: column 't'.*sort the file"),
        ("a,y,t\n1,p,5\n2,q,x\n", "[time=t]", r"d\.csv:3: column 't'.*neither a number nor"),
        ("a,y,k\n1,p,u\n2,q,u\n", "[id=k]", r"d\.csv:3: column 'k' repeats id 'u'"),
        ("a,y\n", "", r"no data rows"),
        ("a,y\n1,p\n", "[target=nope]", r"target='nope' is not a column"),
        ("a,y\n1,p\n", "[colour=red]", r"bad option 'colour=red'"),
        ("a,y\n1,p\n", "[positive=z]", r"positive='z' is not a class"),
        ("a,y\n1,p\n", "[time_unit=h]", r"time_unit must be s or ms"),
        ("a,y,l\n1,p,3\n", "[label_time=l]", r"label_time=l needs time=COL"),
        ("a,y\n1,p\n", "[target=y,exclude=y]", r"column 'y' is the target and excluded"),
        ("a,y\n1,p\n", "[target=y,target=a]", r"csv: option 'target' is given twice"),
        (
            "y,a\n" + "".join(f"p,{i}\n" for i in range(1002)),
            "",
            r"d\.csv:1002: .*'a' has "
            "more than 1000 distinct values",
        ),
    ],
)
def test_malformed_files_name_the_file_and_line(
    tmp_path: Path, text: str, spec_options: str, error: str
) -> None:
    path = _csv(tmp_path, text)
    with pytest.raises((DatasetError, SpecError), match=error):
        load(f"csv:{path}{spec_options}")


def test_malformed_arff_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.arff"
    path.write_text(
        "@relation r\n@attribute a numeric\n@attribute class {no,yes}\n@data\n1,no\n2,maybe\n"
    )
    with pytest.raises(DatasetError, match=r"bad\.arff:6"):
        load(f"arff:{path}")


def test_the_command_line_refuses_a_missing_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["evaluate", "--dataset", f"csv:{tmp_path}/none.csv", "--learner", "nb"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "none.csv not found" in err and len(err.splitlines()) == 1


@pytest.mark.kafka
@pytest.mark.slow
def test_run_through_kafka_gives_evaluate_on_a_file(kafka_settings, tmp_path: Path) -> None:
    """`run` on a CSV with its own ids, ISO times and label times (the README's orders),
    with re-evaluation: the results document of `evaluate`, through the embedded broker."""
    from streameval.pipeline.config import ExperimentConfig

    orders = Path(__file__).resolve().parents[1] / "docs" / "examples" / "orders.csv"
    spec = f"csv:{orders}[id=order_id,time=created,label_time=decided_at,exclude=order.customer]"
    config = ExperimentConfig(
        stream="orders",
        learners=["nochange", "nb", "ta:ht"],
        dataset=spec,
        delay="natural",
        reeval_k=10,
        bins=8,
        window=300,
        limit=1500,
    )
    ran, reference = run_and_evaluate(config, kafka_settings)
    assert ran == reference
    assert reference["n_instances"] == 1500 and reference["config"]["delay"] == "natural"


@pytest.mark.kafka
@pytest.mark.parametrize("reeval", [False, True])
def test_run_through_kafka_takes_a_prefix_without_the_positive_class(
    kafka_settings, tmp_path: Path, reeval: bool
) -> None:
    """The worker sees only the prefix's labels; the file's classes travel in the config,
    so it ends the stream as `evaluate` does (the columnar and the per-event core)."""
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare

    path = _csv(tmp_path, "a,y\n1,p\n2,p\n3,q\n4,q\n")
    config = ExperimentConfig(
        stream="prefix", learners=["nb"], dataset=f"csv:{path}", limit=2,
        **({"delay": "1", "reeval_k": 1, "bins": 2} if reeval else {}),
    )  # fmt: skip
    assert prepare(config)[1].classes == ["p", "q"]
    ran, reference = run_and_evaluate(config, kafka_settings)
    assert ran == reference
    assert ran["classes"] == ["p"] and ran["config"]["positive"] == "q"
