"""Delay specs and the natural delay of each dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.datasets import load
from streameval.pipeline.streams.delay import (
    FeatureTimeDelay,
    InstanceDelay,
    TimeDelay,
    parse_delay,
)


@pytest.mark.parametrize(
    ("spec", "model"),
    [
        ("0", InstanceDelay(0)),
        (0, InstanceDelay(0)),
        ("1000", InstanceDelay(1000)),
        (" 48 ", InstanceDelay(48)),
        ("time:86400", TimeDelay(86400.0)),
        ("time:0.5", TimeDelay(0.5)),
    ],
)
def test_parse_forms(spec: str | int, model: object) -> None:
    assert parse_delay(spec) == model


@pytest.mark.parametrize("spec", ["-1", "1.5", "time:", "time:-3", "time:inf", "later", "", "N"])
def test_bad_specs_list_allowed_forms(spec: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_delay(spec)
    msg = str(err.value)
    assert "time:S" in msg or "seconds" in msg


def test_round_trip_strings() -> None:
    for spec in ("0", "48", "time:86400", "time:0.5"):
        assert str(parse_delay(spec)) == spec


def test_natural_needs_a_dataset_with_one() -> None:
    with pytest.raises(ValueError, match="needs a dataset"):
        parse_delay("natural")
    with pytest.raises(ValueError, match="no natural delay"):
        parse_delay("natural", load("markov[n=10]"))


def test_natural_synthetic_settings() -> None:
    assert parse_delay("natural", load("hyperplane[n=10]")) == InstanceDelay(100)
    assert parse_delay("natural", load("led[n=10]")) == InstanceDelay(1000)
    assert parse_delay("natural", load("agrawal_drift")) == InstanceDelay(1000)


def test_natural_real_settings(data_dir: Path) -> None:
    assert parse_delay("natural", load("electricity", data_dir)) == TimeDelay(86_400.0)
    assert parse_delay("natural", load("covtype", data_dir)) == InstanceDelay(1000)
    assert parse_delay("natural", load("airlines", data_dir)) == FeatureTimeDelay("Length", 60.0)


def test_feature_time_delay() -> None:
    landing = FeatureTimeDelay("Length", 60.0)
    flight = Instance("0", 900.0, {"Length": 205.0}, "1")
    assert landing.due(flight) == 900.0 + 205 * 60
    assert landing.due(Instance("1", 900.0, {"Length": 0.0}, "0")) == 900.0
    assert landing.due(Instance("2", 900.0, {"Length": -5.0}, "0")) == 900.0


def test_time_delay_due() -> None:
    assert TimeDelay(10.0).due(Instance("0", 5.0, {}, "a")) == 15.0
