"""Real datasets: location, verification, parsing, event times; dataset specs."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams import checksum
from streameval.pipeline.streams.base import Dataset, DatasetError, Instance
from streameval.pipeline.streams.datasets import ENV_VAR, REAL_DATASETS, load

ELEC = REAL_DATASETS["electricity"]


# --- locating and verifying files -------------------------------------------------------


def test_no_directory_configured_reads_the_packaged_electricity(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # an empty cache
    packaged = load("electricity")
    assert "streams/data/electricity.csv.gz" in packaged.description
    shared = load("electricity", data_dir=data_dir)
    assert list(packaged.iter_instances(50)) == list(shared.iter_instances(50))
    assert packaged.n_instances == 45_312
    with pytest.raises(DatasetError) as err:  # the others are not in the package
        load("covtype")
    msg = str(err.value)
    assert str(tmp_path / "streameval" / "covtype.csv.gz") in msg and ENV_VAR in msg
    assert "per-user cache" in msg and "STREAMEVAL_DOWNLOAD=0" in msg


def test_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError) as err:
        load("covtype", data_dir=missing)
    msg = str(err.value)
    assert str(missing / "covtype.csv.gz") in msg and str(missing / "covtype.csv") in msg
    assert REAL_DATASETS["covtype"].sha256 in msg and "scikit-multiflow" in msg
    assert "files.pythonhosted.org" in msg  # the public home it would be fetched from
    assert not missing.exists()  # nothing created when nothing is fetched


def test_missing_file_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(DatasetError) as err:
        load("airlines")
    msg = str(err.value)
    assert str(tmp_path / "airlines_no_airports.csv.gz") in msg
    assert f"{ENV_VAR}=" in msg and REAL_DATASETS["airlines"].sha256 in msg


def test_hash_mismatch_never_falls_back(tmp_path: Path) -> None:
    (tmp_path / "electricity.csv.gz").write_bytes(b"not the data")
    with pytest.raises(DatasetError) as err:
        load("electricity", data_dir=tmp_path)
    msg = str(err.value)
    assert "expected " + ELEC.sha256 in msg and str(tmp_path / "electricity.csv.gz") in msg


def test_argument_overrides_env(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))  # empty: would fail
    assert load("electricity", data_dir=data_dir).n_instances == 45_312
    monkeypatch.setenv(ENV_VAR, str(data_dir))
    assert load("electricity").n_instances == 45_312


def test_checksum_cached_per_file_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    calls = []
    real = checksum.hashlib.sha256

    def counting(*args: object) -> object:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(checksum.hashlib, "sha256", counting)
    first = checksum.sha256_of(path)
    assert checksum.sha256_of(path) == first and len(calls) == 1
    path.write_bytes(b"abcd")
    os.utime(path, ns=(1, 1))
    assert checksum.sha256_of(path) != first and len(calls) == 2


# --- parsing ---------------------------------------------------------------------------


def test_electricity_rows(data_dir: Path) -> None:
    ds = load("electricity", data_dir)
    assert (ds.task, ds.classes, ds.positive) == ("classification", ["DOWN", "UP"], "UP")
    assert ds.features[:3] == ["date", "day", "period"] and ds.categorical == ["day"]
    rows = list(ds.iter_instances(limit=49))
    assert len(rows) == 49
    first = rows[0]
    assert first == Instance(
        "0",
        0.0,
        {
            "date": 0.0,
            "day": "2",
            "period": 0.0,
            "nswprice": 0.056443,
            "nswdemand": 0.439155,
            "vicprice": 0.003467,
            "vicdemand": 0.422915,
            "transfer": 0.414912,
        },
        "UP",
    )
    assert [r.ts for r in rows[:3]] == [0.0, 1800.0, 3600.0]
    assert rows[48].ts == 86_400.0 and rows[48].x["period"] == 0.0  # next day, same period


def test_covtype_rows(data_dir: Path) -> None:
    ds = load("covtype", data_dir)
    assert ds.classes == [str(c) for c in range(1, 8)] and ds.positive is None
    assert len(ds.features) == 54 and ds.categorical == [] and ds.n_instances == 581_012
    rows = list(ds.iter_instances(limit=3))
    x = rows[0].x
    assert [x["Elevation"], x["Aspect"], x["Slope"], x["Horizontal_Distance_To_Fire_Points"]] == [
        2596.0,
        51.0,
        3.0,
        6279.0,
    ]
    assert all(isinstance(v, float) for v in x.values())
    assert rows[0].y == "5" and [r.ts for r in rows] == [0.0, 1.0, 2.0]
    assert [r.id for r in rows] == ["0", "1", "2"]


def test_airlines_rows(data_dir: Path) -> None:
    ds = load("airlines", data_dir)
    assert ds.categorical == ["Airline", "DayOfWeek"] and ds.positive == "1"
    rows = list(ds.iter_instances(limit=5))
    assert rows[0].x == {
        "Airline": "CO",
        "Flight": 269.0,
        "DayOfWeek": "3",
        "Time": 15.0,
        "Length": 205.0,
    }
    assert rows[0].y == "1"
    assert [r.ts for r in rows] == [900.0, 900.0, 1200.0, 1200.0, 1800.0]  # Time * 60


def test_airlines_full_arff_form_gives_the_same_stream(data_dir: Path, tmp_path: Path) -> None:
    """The MOA form (with AirportFrom/AirportTo, numbers as ARFF writes them) is read into
    the shared form's rows: the same instances, times and natural delays."""
    from streameval.pipeline.streams.real import CsvSource

    info = REAL_DATASETS["airlines"]
    assert info.form("airlines.arff").sha256.startswith("c7683a90")
    assert info.download is not None and info.download.size == 19_168_157
    shared = load("airlines[n=400]", data_dir)
    rows = [row for _, row in shared.source.records()]
    carriers = ",".join(sorted({row[0] for row in rows}))
    lines = ["@relation airlines", f"@attribute Airline {{{carriers}}}"]
    lines += ["@attribute Flight numeric", "@attribute AirportFrom {SFO,PHX}"]
    lines += ["@attribute AirportTo {IAH,CLT}", "@attribute DayOfWeek {1,2,3,4,5,6,7}"]
    lines += ["@attribute Time numeric", "@attribute Length numeric"]
    lines += ["@attribute Delay {0,1}", "@data"]
    for airline, flight, dow, time_, length, delay in rows:  # numbers as MOA writes them
        lines.append(f"{airline},{float(flight)},SFO,CLT,{dow},{float(time_)},{length},{delay}")
    path = tmp_path / "airlines.arff"
    path.write_text("\n".join(lines) + "\n")
    full = CsvSource(info, path, limit=300)
    assert list(full.records()) == list(shared.source.records())[:300]
    mine = [full.decode(r) for _, r in full.records()]
    assert mine == [shared.source.decode(r) for _, r in shared.source.records()][:300]


@pytest.mark.slow
def test_airlines_event_time_whole_file(data_dir: Path) -> None:
    """31 days, one per DayOfWeek change; ts never decreases (2,331 rows clamped)."""
    ds = load("airlines", data_dir)
    i_dow, i_time = ds.features.index("DayOfWeek"), ds.features.index("Time")
    last, clamped, days, dow = -1.0, 0, 0, None
    for ts, row in ds.source.records():
        assert ts >= last
        if row[i_dow] != dow:
            days, dow = days + 1, row[i_dow]
        raw = (days - 1) * 86_400 + float(row[i_time]) * 60
        clamped += ts != raw
        assert ts - raw <= 20 * 60
        last = ts
    assert days == 31 and clamped == 2_331


# --- specs -----------------------------------------------------------------------------


def test_truncation_and_spec(data_dir: Path) -> None:
    ds = load("electricity[n=100]", data_dir)
    assert ds.n_instances == 100 and ds.spec == "electricity[n=100]"
    assert sum(1 for _ in ds.iter_instances()) == 100


def test_within_class_shuffle_of_real_data(data_dir: Path) -> None:
    plain = list(load("electricity[n=3000]", data_dir).iter_instances())
    mixed = list(load("electricity[n=3000,shuffle=within-class,seed=1]", data_dir).iter_instances())
    assert [i.y for i in mixed] == [i.y for i in plain]  # label sequence unchanged
    assert [(i.id, i.ts) for i in mixed] == [(i.id, i.ts) for i in plain]  # positions kept
    assert [i.x for i in mixed] != [i.x for i in plain]
    for label in ("UP", "DOWN"):
        before = sorted(tuple(i.x.values()) for i in plain if i.y == label)
        after = sorted(tuple(i.x.values()) for i in mixed if i.y == label)
        assert before == after  # same feature vectors within each class


def test_full_shuffle_of_real_data(data_dir: Path) -> None:
    plain = list(load("electricity[n=2000]", data_dir).iter_instances())
    spec = "electricity[n=2000,shuffle=full,seed=4]"
    mixed = list(load(spec, data_dir).iter_instances())
    again = list(load(spec, data_dir).iter_instances())
    assert mixed == again
    assert Counter(i.y for i in mixed) == Counter(i.y for i in plain)
    assert [i.y for i in mixed] != [i.y for i in plain]
    assert sorted(tuple(i.x.values()) for i in mixed) == sorted(tuple(i.x.values()) for i in plain)


@pytest.mark.parametrize(
    "spec",
    [
        "nope",
        "electricity[window=3]",
        "electricity[shuffle=sideways]",
        "markov[shuffle=full,shuffle_seed=x]",
        "friedman[shuffle=within-class]",
        "electricity[n=-1]",
    ],
)
def test_bad_specs(spec: str, data_dir: Path) -> None:
    with pytest.raises(SpecError):
        load(spec, data_dir)


def test_shuffle_seed_rule() -> None:
    def labels(spec: str) -> list[str]:
        return [str(i.y) for i in load(spec).iter_instances()]

    base = labels("markov[n=300,seed=2]")
    by_seed = labels("markov[n=300,seed=2,shuffle=full]")
    explicit = labels("markov[n=300,seed=2,shuffle=full,shuffle_seed=2]")
    other = labels("markov[n=300,seed=2,shuffle=full,shuffle_seed=3]")
    assert by_seed == explicit != other
    assert sorted(by_seed) == sorted(base)


def test_from_instances_roundtrip() -> None:
    items = [Instance(str(i), float(i), {"a": float(i)}, "b" if i % 2 else "a") for i in range(4)]
    ds = Dataset.from_instances("toy", items)
    assert list(ds) == items and list(ds.iter_labels(limit=2)) == ["a", "b"]


def test_datasets_said_complete_hold_no_missing_value(data_dir: Path) -> None:
    # ``complete`` lets the columnar core skip looking for missing values: no cell of the
    # verified files is empty or spells a value float() reads as NaN or an infinity, and
    # the generators draw finite numbers. A user's file makes no such promise.
    import gzip
    import math

    for name, info in REAL_DATASETS.items():
        dataset = load(name, data_dir=data_dir)
        assert dataset.complete, name
        with gzip.open(data_dir / info.file, "rt") as handle:
            text = handle.read().lower()
        assert "nan" not in text and "inf" not in text, name  # float() reads no such cell
        assert ",," not in text and ",\n" not in text and "\n," not in text, name  # no empty one
    for spec in ("sea[n=3000]", "agrawal[n=3000]", "led[n=3000]", "hyperplane[n=3000]"):
        dataset = load(spec)
        assert dataset.complete, spec
        for inst in dataset.iter_instances():
            assert all(isinstance(v, str) or math.isfinite(v) for v in inst.x.values()), spec
    rows = [Instance("0", 0.0, {"a": float("nan")}, "x")]
    assert not Dataset.from_instances("mine", rows).complete
