"""Synthetic generators: determinism, shapes, drift points, the Markov chain."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams.base import Instance
from streameval.pipeline.streams.synthetic import GENERATORS, make_synthetic

SMALL = {name: f"{name}[n=300,seed=3]" for name in GENERATORS}


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_shape_and_determinism(name: str) -> None:
    ds = make_synthetic(SMALL[name])
    first = list(ds.iter_instances())
    assert first == list(ds.iter_instances())  # replays identically
    assert len(first) == ds.n_instances == 300
    assert [i.id for i in first] == [str(i) for i in range(300)]
    assert [i.ts for i in first] == [float(i) for i in range(300)]
    for inst in first:
        assert list(inst.x) == ds.features
        for key, value in inst.x.items():
            assert isinstance(value, str if key in ds.categorical else float)
    if ds.task == "classification":
        assert all(isinstance(i.y, str) and i.y in ds.classes for i in first)
    else:
        assert ds.classes == [] and all(isinstance(i.y, float) for i in first)
    other = list(make_synthetic(f"{name}[n=300,seed=4]").iter_instances())
    assert [i.x for i in other] != [i.x for i in first]


def test_binary_streams_have_positive_class() -> None:
    assert make_synthetic("sea[n=1]").positive == "1"
    assert make_synthetic("led[n=1]").positive is None


def sea_label(inst: Instance, threshold: float) -> str:
    return "1" if inst.x["x0"] + inst.x["x1"] > threshold else "0"


def test_sea_drift_switches_variant_at_drift_point() -> None:
    ds = make_synthetic("sea_drift[n=2000,drift_at=1000,seed=1]")
    assert ds.drift_points == [1000]
    rows = list(ds.iter_instances())
    assert all(sea_label(i, 8) == i.y for i in rows[:1000])  # variant 0
    assert all(sea_label(i, 9) == i.y for i in rows[1000:])  # variant 1


def test_several_drift_points() -> None:
    ds = make_synthetic("sea_drift[n=3000,drift_at=1000/2000,variant=2]")
    rows = list(ds.iter_instances())
    assert ds.drift_points == [1000, 2000]
    assert all(sea_label(i, 7) == i.y for i in rows[:1000])
    assert all(sea_label(i, 9.5) == i.y for i in rows[1000:2000])
    assert all(sea_label(i, 8) == i.y for i in rows[2000:])


def test_gradual_drift_mixes_around_the_point() -> None:
    ds = make_synthetic("sea_drift[n=4000,drift_at=2000,width=1000,seed=5]")
    rows = list(ds.iter_instances())

    def share_new(part: list[Instance]) -> float:
        # instances with x0 + x1 in (8, 9] tell variant 0 (label 1) from variant 1 (label 0)
        told = [i for i in part if 8 < i.x["x0"] + i.x["x1"] <= 9]
        return sum(i.y == "0" for i in told) / len(told)

    assert share_new(rows[:1000]) < 0.05
    assert 0.3 < share_new(rows[1800:2200]) < 0.7
    assert share_new(rows[3000:]) > 0.95


def test_paper_default_drifts() -> None:
    assert make_synthetic("agrawal_drift").drift_points == [2000, 4000, 6000, 8000]
    assert make_synthetic("led_drift").drift_points == [3750, 7500, 15000]
    assert make_synthetic("friedman_drift").drift_points == [5000, 10000, 15000]
    assert make_synthetic("friedman_drift[drift_type=gra,n=900]").drift_points == [300, 600]
    assert make_synthetic("sea[n=10]").drift_points == []


def test_markov_chain_statistics() -> None:
    ds = make_synthetic("markov[k=3,p_stay=0.8,n=20000,seed=0]")
    rows = list(ds.iter_instances())
    labels = [i.y for i in rows]
    same = sum(a == b for a, b in itertools.pairwise(labels)) / (len(labels) - 1)
    assert abs(same - 0.8) < 0.015
    shares = Counter(labels)
    assert all(abs(shares[c] / len(labels) - 1 / 3) < 0.05 for c in ds.classes)
    # jumps go to the other classes uniformly
    jumps = Counter((a, b) for a, b in itertools.pairwise(labels) if a != b)
    assert abs(jumps[("0", "1")] / (jumps[("0", "1")] + jumps[("0", "2")]) - 0.5) < 0.05
    # the features tell the class: the own coordinate is larger on average
    for c in ds.classes:
        own = [i.x[f"x{c}"] for i in rows if i.y == c]
        assert abs(sum(own) / len(own) - 1.0) < 0.05


def test_markov_extremes() -> None:
    stuck = [i.y for i in make_synthetic("markov[p_stay=1.0,n=50]").iter_instances()]
    assert len(set(stuck)) == 1
    flip = [i.y for i in make_synthetic("markov[p_stay=0.0,n=50]").iter_instances()]
    assert all(a != b for a, b in itertools.pairwise(flip))


@pytest.mark.parametrize(
    "spec",
    [
        "unknown[n=3]",
        "sea[variant=4]",
        "sea[window=3]",
        "sea_drift[n=100,drift_at=100]",
        "sea_drift[n=100,drift_at=60/40]",
        "sea_drift[n=100,drift_at=a/b]",
        "markov[k=1]",
        "markov[p_stay=1.5]",
        "markov[noise=-1]",
        "agrawal[function=10]",
        "friedman_drift[drift_type=xyz]",
        "friedman_drift[drift_type=lea,drift_at=100/200]",
        "friedman_drift[drift_type=gsg,n=1000,drift_at=300/600,transition_window=500]",
        "led[n=-5]",
    ],
)
def test_bad_parameters(spec: str) -> None:
    with pytest.raises(SpecError):
        make_synthetic(spec)


@pytest.mark.parametrize(("noise", "rate"), [(0.1, 0.09), (0.3, 0.29), (0.005, 0.0)])
def test_led_noise_inverts_a_segment_with_probability_noise_minus_one_percent(
    noise: float, rate: float
) -> None:
    """River flips a segment when ``0.01 + U <= noise``: 9 % at the default 0.1, not 10 %."""
    from river.datasets.synth import LED

    digits = LED._ORIGINAL_INSTANCES  # the seven segments of each digit, river's own table
    rows = list(
        make_synthetic(f"led[irrelevant=false,noise={noise},n=20000,seed=3]").iter_instances()
    )
    flips = sum(int(row.x[f"x{s}"]) != digits[int(row.y)][s] for row in rows for s in range(7))
    assert flips / (7 * len(rows)) == pytest.approx(rate, abs=0.005)  # 140,000 segments
