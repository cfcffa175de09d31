"""Detectors from specs, their names, the protocol and pickling."""

from __future__ import annotations

import pickle
import random

import pytest
from streameval.pipeline.drift import (
    DETECTORS,
    FadingRatioPageHinkley,
    PageHinkley,
    PrequentialPageHinkley,
    RandomDetector,
    RiverDetector,
    WindowRatioPageHinkley,
    build_detector,
    collect_alarms,
)
from streameval.pipeline.drift.base import DriftDetector
from streameval.pipeline.metrics.forgetting import Forgetting
from streameval.pipeline.spec import SpecError

SPECS = [
    "ph",
    "ph[estimator=raw]",
    "ph[estimator=whole,delta=0.05,lambda=50]",
    "ph[estimator=window,w=500]",
    "ph[estimator=fading,alpha=0.999]",
    "ratio_fading",
    "ratio_fading[alpha1=0.999,alpha2=0.99,delta=0.2,lambda=50]",
    "ratio_window",
    "ratio_window[w1=3000,w2=500]",
    "adwin",
    "adwin[delta=0.01]",
    "ddm",
    "ddm[warm_start=50,drift_threshold=2.5]",
    "random[p=0.01]",
    "random[p=1,warmup=10]",
]


def step_errors(n: int = 4000, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [float(rng.random() < (0.1 if i < n // 2 else 0.6)) for i in range(n)]


def test_defaults() -> None:
    ph = build_detector("ph")
    assert isinstance(ph, PrequentialPageHinkley)
    assert ph.forgetting == Forgetting.fading(0.997)
    assert (ph.delta, ph.lambda_) == (0.1, 100.0)
    assert isinstance(build_detector("ph[estimator=raw]"), PageHinkley)
    window = build_detector("ph[estimator=window]")
    assert isinstance(window, PrequentialPageHinkley)
    assert window.forgetting == Forgetting.sliding(1000)
    rf = build_detector("ratio_fading")
    assert isinstance(rf, FadingRatioPageHinkley)
    assert (rf.alpha1, rf.alpha2, rf.delta, rf.lambda_) == (0.9994, 0.997, 0.1, 100.0)
    rw = build_detector("ratio_window")
    assert isinstance(rw, WindowRatioPageHinkley)
    assert (rw.w1, rw.w2) == (5000, 1000)
    assert isinstance(build_detector("adwin"), RiverDetector)
    r = build_detector("random[p=0.5]", seed=9)
    assert isinstance(r, RandomDetector) and r.warmup == 30 and r.seed == 9


def test_parameters_reach_the_detector() -> None:
    d = build_detector("ph[estimator=whole,delta=0.05,lambda=50]")
    assert isinstance(d, PrequentialPageHinkley)
    assert (d.forgetting.kind, d.delta, d.lambda_) == ("whole", 0.05, 50.0)
    d = build_detector("ratio_window[w1=3000,w2=500,lambda=20]")
    assert isinstance(d, WindowRatioPageHinkley)
    assert (d.w1, d.w2, d.lambda_) == (3000, 500, 20.0)


@pytest.mark.parametrize("spec", SPECS)
def test_protocol_and_name_round_trip(spec: str) -> None:
    d = build_detector(spec, seed=3)
    assert isinstance(d, DriftDetector)
    again = build_detector(d.name, seed=3)
    assert again.name == d.name
    errors = step_errors()
    assert collect_alarms(d, errors) == collect_alarms(again, errors)


@pytest.mark.parametrize("spec", SPECS)
def test_pickle_round_trip_mid_stream(spec: str) -> None:
    errors = step_errors()
    d = build_detector(spec, seed=1)
    collect_alarms(d, errors[:2100])
    copy = pickle.loads(pickle.dumps(d))
    assert copy.name == d.name and copy.statistic == d.statistic
    tail = collect_alarms(d, errors[2100:])
    assert collect_alarms(copy, errors[2100:]) == tail


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cusum", "allowed: ph, ratio_fading, ratio_window, adwin, ddm, random"),
        ("ph[beta=1]", "unknown parameter 'beta'"),
        ("ph[estimator=median]", "estimator must be one of"),
        ("ph[estimator=fading,w=100]", "w (window size) only goes with estimator=window"),
        ("ph[alpha=0.99,estimator=window]", "alpha (fading factor) only goes with"),
        ("ph[estimator=window,w=0]", "window size"),
        ("ph[lambda=-1]", "lambda"),
        ("ph[w=1.5,estimator=window]", "wrong type"),
        ("ratio_fading[alpha1=0.99,alpha2=0.999]", "alpha2 < alpha1"),
        ("ratio_window[w1=100,w2=1000]", "w2 < w1"),
        ("adwin[clock=3]", "unknown parameter 'clock'"),
        ("random", "p is required"),
        ("random[p=2]", "probability"),
        ("ta3:ph", "cannot parse"),
        ("ph[delta]", "not key=value"),
    ],
)
def test_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        build_detector(spec)
    assert message in str(info.value)


def test_allowed_names() -> None:
    assert DETECTORS == ("ph", "ratio_fading", "ratio_window", "adwin", "ddm", "random")
