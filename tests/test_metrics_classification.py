"""ClassificationMetrics: hand-computed values, identities, forgetting, properties."""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streameval.pipeline.metrics import ClassificationMetrics, Forgetting

# One stream of 10 labelled instances, three classes, "c" appears at t = 7.
#   t     1  2  3  4  5  6  7  8  9  10
Y = list("aaabbbccaa")
PRED = [None, *"abbbaccaa"]  # the evaluated learner (nothing to predict at t = 1)
PER = [None, *"aaabbbcca"]  # No-Change: the previous label
MAJ = [None, *"aaaaaaaaa"]  # Majority so far (ties a/b at t = 7 -> a)


def feed(m: ClassificationMetrics, *columns: Sequence[Hashable | None]) -> ClassificationMetrics:
    for row in zip(*columns, strict=True):
        m.update(*row)
    return m


def test_hand_computed_whole_history() -> None:
    s = feed(ClassificationMetrics(), Y, PRED, PER, MAJ).get()
    # correct at t = 2, 4, 5, 7, 8, 9, 10 (t1: None, t3: b vs a, t6: a vs b)
    assert s["n"] == 10
    assert s["accuracy"] == pytest.approx(0.7, abs=1e-12)
    assert s["error"] == pytest.approx(0.3, abs=1e-12)
    # P(y): a 5/10, b 3/10, c 2/10; P_h: a 4/10 (t2,6,9,10), b 3/10, c 2/10 (None not counted)
    assert s["priors"] == pytest.approx({"a": 0.5, "b": 0.3, "c": 0.2})
    # p_ran = .5*.4 + .3*.3 + .2*.2 = .33                                     (eq. 9)
    assert s["p_ran"] == pytest.approx(0.33, abs=1e-12)
    # kappa = (.7 - .33) / (1 - .33) = 37/67                                 (eq. 10)
    assert s["kappa"] == pytest.approx(37 / 67, abs=1e-12)
    # se = sqrt(.7 * .3 / (10 * .67^2))                                     (eq. 11)
    assert s["kappa_se"] == pytest.approx(math.sqrt(0.21 / (10 * 0.67**2)), abs=1e-12)
    assert s["kappa_se"] == pytest.approx(0.216289, abs=1e-6)
    # delta_0 = sqrt(.33 / (10 * .67)), z = kappa / delta_0                 (eq. 12)
    assert s["kappa_z"] == pytest.approx((37 / 67) / math.sqrt(0.33 / 6.7), abs=1e-12)
    assert s["kappa_z"] == pytest.approx(2.488326, abs=1e-6)
    # previous label equal at t = 2, 3 (a), 5, 6 (b), 8 (c), 10 (a): p_per = .6
    assert s["p_per"] == pytest.approx(0.6, abs=1e-12)
    assert s["p_per_joint"] == pytest.approx({"a": 0.3, "b": 0.2, "c": 0.1})
    # kappa_per = (.7 - .6) / .4 = .25                                      (eq. 13)
    assert s["kappa_per"] == pytest.approx(0.25, abs=1e-12)
    # kappa_plus = sqrt(37/67 * 1/4)                                         (eq. 14)
    assert s["kappa_plus"] == pytest.approx(math.sqrt(37 / 67 / 4), abs=1e-12)
    # majority "a" right at t = 2, 3, 9, 10: p_maj = .4, kappa_m = .3 / .6
    assert s["p_maj"] == pytest.approx(0.4, abs=1e-12)
    assert s["kappa_m"] == pytest.approx(0.5, abs=1e-12)
    # recall: a 3/5 (t2, 9, 10), b 2/3 (t4, 5), c 2/2; gmean = (.6 * 2/3 * 1)^(1/3)
    assert s["recall"] == pytest.approx({"a": 0.6, "b": 2 / 3, "c": 1.0})
    assert s["gmean"] == pytest.approx(0.4 ** (1 / 3), abs=1e-12)


def test_hand_computed_window_evicts_oldest() -> None:
    s = feed(ClassificationMetrics(Forgetting.sliding(5)), Y, PRED, PER, MAJ).get()
    # the window holds t = 6..10:  y b c c a a, pred a c c a a, per b b c c a, maj a a a a a
    assert s["n"] == 5
    assert s["accuracy"] == pytest.approx(0.8, abs=1e-12)
    # P(y): b .2, c .4, a .4; P_h: a .6, c .4 -> p_ran = .4*.6 + .4*.4 = .4, kappa = .4/.6
    assert s["priors"] == pytest.approx({"a": 0.4, "b": 0.2, "c": 0.4})
    assert s["p_ran"] == pytest.approx(0.4, abs=1e-12)
    assert s["kappa"] == pytest.approx(2 / 3, abs=1e-12)
    # per == y at t = 6, 8, 10 -> .6, kappa_per = .2 / .4
    assert s["p_per"] == pytest.approx(0.6, abs=1e-12)
    assert s["kappa_per"] == pytest.approx(0.5, abs=1e-12)
    assert s["kappa_plus"] == pytest.approx(math.sqrt(1 / 3), abs=1e-12)
    # maj == y at t = 9, 10 -> .4, kappa_m = .4 / .6
    assert s["p_maj"] == pytest.approx(0.4, abs=1e-12)
    assert s["kappa_m"] == pytest.approx(2 / 3, abs=1e-12)
    # recall b = 0 (t6 predicted a) -> gmean 0
    assert s["recall"] == pytest.approx({"a": 1.0, "b": 0.0, "c": 1.0})
    assert s["gmean"] == 0.0


def test_window_class_leaving_the_window_has_nan_recall() -> None:
    m = feed(ClassificationMetrics(Forgetting.sliding(2)), "abb", "abb", "xab", "aaa")
    s = m.get()  # window: t = 2, 3, both "b" and correct
    assert math.isnan(s["recall"]["a"]) and s["recall"]["b"] == 1.0
    assert s["priors"] == {"a": 0.0, "b": 1.0}
    assert s["gmean"] == 1.0  # over the classes present only
    # p_ran = 1 -> kappa undefined; per "a"/"b" right at t = 3 only
    assert math.isnan(s["kappa"]) and math.isnan(s["kappa_plus"])
    assert s["p_per"] == 0.5 and s["kappa_per"] == 1.0


def test_hand_computed_fading() -> None:
    # alpha = .5, weights of t = 1, 2, 3: .25, .5, 1; N = 1.75
    m = feed(
        ClassificationMetrics(Forgetting.fading(0.5)),
        "abb",
        "aab",
        [None, "a", "b"],
        [None, "a", "a"],
    )
    s = m.get()
    assert s["n"] == pytest.approx(1.75, abs=1e-12)
    # correct at t1 (.25) and t3 (1): p = 1.25 / 1.75 = 5/7
    assert s["accuracy"] == pytest.approx(5 / 7, abs=1e-12)
    # P(y): a 1/7, b 6/7; P_h: a 3/7 (.25 + .5), b 4/7 -> p_ran = 3/49 + 24/49
    assert s["p_ran"] == pytest.approx(27 / 49, abs=1e-12)
    assert s["kappa"] == pytest.approx((5 / 7 - 27 / 49) / (22 / 49), abs=1e-12)  # = 4/11
    assert s["kappa"] == pytest.approx(4 / 11, abs=1e-12)
    se = math.sqrt((5 / 7) * (2 / 7) / (1.75 * (22 / 49) ** 2))
    assert s["kappa_se"] == pytest.approx(se, abs=1e-12)
    # per right at t3 only: 1 / 1.75 = 4/7, kappa_per = (1/7) / (3/7)
    assert s["p_per"] == pytest.approx(4 / 7, abs=1e-12)
    assert s["kappa_per"] == pytest.approx(1 / 3, abs=1e-12)
    # majority never right: p_maj = 0, kappa_m = p
    assert s["p_maj"] == 0.0
    assert s["kappa_m"] == pytest.approx(5 / 7, abs=1e-12)
    assert s["recall"] == pytest.approx({"a": 1.0, "b": 2 / 3})  # b: 1 / 1.5


def test_empty_and_degenerate_values_are_nan() -> None:
    s = ClassificationMetrics().get()
    assert s["n"] == 0
    for key in (
        "accuracy",
        "kappa",
        "kappa_se",
        "kappa_z",
        "kappa_per",
        "kappa_plus",
        "kappa_m",
        "p_ran",
        "p_per",
        "p_maj",
        "gmean",
    ):
        assert math.isnan(s[key]), key
    assert s["recall"] == {} and s["priors"] == {}
    # one class, always predicted: p_ran = 1 (0/0 kappa); p_per = 1 (0/0 kappa_per)
    s = feed(ClassificationMetrics(), "aa", "aa", "aa", "aa").get()
    assert s["accuracy"] == 1.0 and s["p_ran"] == 1.0
    assert math.isnan(s["kappa"]) and math.isnan(s["kappa_per"]) and math.isnan(s["kappa_m"])
    assert math.isnan(s["kappa_plus"]) and math.isnan(s["kappa_z"])
    # never predicted anything: p_ran = 0 -> delta_0 = 0, z undefined; kappa = p = 0
    s = feed(ClassificationMetrics(), "ab", [None, None], [None, "a"], [None, "a"]).get()
    assert s["p_ran"] == 0.0 and s["kappa"] == 0.0 and math.isnan(s["kappa_z"])
    assert s["gmean"] == 0.0


def test_new_classes_mid_stream_and_predicted_only_classes() -> None:
    m = ClassificationMetrics(Forgetting.sliding(3))
    m.update("a", "a", None, None)
    assert set(m.get()["recall"]) == {"a"}
    m.update("b", "z", "a", "a")  # "z" predicted, never a true label
    m.update("c", "c", "b", "a")
    s = m.get()
    assert set(s["recall"]) == {"a", "b", "c"} and "z" not in s["priors"]
    # P(y) 1/3 each; P_h: a, z, c 1/3 each -> p_ran = 2/9
    assert s["p_ran"] == pytest.approx(2 / 9, abs=1e-12)
    assert s["accuracy"] == pytest.approx(2 / 3, abs=1e-12)


def test_none_prediction_is_wrong_and_outside_the_marginal() -> None:
    with_none = feed(ClassificationMetrics(), "ab", [None, "b"], [None, "a"], [None, "a"]).get()
    # p = 1/2; P_h(b) = 1/2, P_h(a) = 0: p_ran = P(b) P_h(b) = 1/4
    assert with_none["accuracy"] == 0.5
    assert with_none["p_ran"] == 0.25
    with pytest.raises(ValueError):
        ClassificationMetrics().update(None, "a", "a", "a")


# --- reference implementation straight from the definitions ---------------------------


def div(a: float, b: float) -> float:
    return a / b if b != 0 else math.nan


def reference(rows: list[tuple], forgetting: Forgetting) -> dict[str, float]:
    """Weights per observation (Algorithms 1-3), then eq. 9-14 by brute force."""
    i = len(rows)
    if forgetting.kind == "window":
        weights = [1.0 if k >= i - forgetting.window else 0.0 for k in range(i)]
    elif forgetting.kind == "fading":
        weights = [forgetting.alpha ** (i - 1 - k) for k in range(i)]
    else:
        weights = [1.0] * i
    n = sum(weights)
    classes = {r[0] for r, w in zip(rows, weights, strict=True) if w > 0}

    def est(pred) -> float:
        return sum(w for r, w in zip(rows, weights, strict=True) if pred(r)) / n

    p = est(lambda r: r[1] == r[0])
    p_per = est(lambda r: r[2] == r[0])
    p_maj = est(lambda r: r[3] == r[0])
    p_ran = sum(est(lambda r, c=c: r[0] == c) * est(lambda r, c=c: r[1] == c) for c in classes)
    kappa = div(p - p_ran, 1 - p_ran)
    kappa_per = div(p - p_per, 1 - p_per)
    recalls = [
        est(lambda r, c=c: r[0] == r[1] == c) / est(lambda r, c=c: r[0] == c) for c in classes
    ]
    plus = (
        math.nan if math.isnan(kappa * kappa_per) else math.sqrt(max(0, kappa) * max(0, kappa_per))
    )
    return {
        "n": n,
        "accuracy": p,
        "p_ran": p_ran,
        "p_per": p_per,
        "p_maj": p_maj,
        "kappa": kappa,
        "kappa_se": math.sqrt(div(p * (1 - p), n * (1 - p_ran) ** 2)),
        "kappa_z": div(kappa, math.sqrt(div(p_ran, n * (1 - p_ran)))),
        "kappa_per": kappa_per,
        "kappa_m": div(p - p_maj, 1 - p_maj),
        "kappa_plus": plus,
        "gmean": math.prod(recalls) ** (1 / len(recalls)),
    }


def random_rows(rng: random.Random, length: int, k: int, delay: int = 0) -> list[tuple]:
    """A sticky Markov label stream with a learner, No-Change and Majority under a delay."""
    labels = [f"c{j}" for j in range(k)]
    y: list[str] = []
    for _ in range(length):
        y.append(y[-1] if y and rng.random() < 0.7 else rng.choice(labels))
    rows = []
    counts: dict[str, int] = {}
    for t, label in enumerate(y):
        known = t - 1 - delay  # last label released when predicting t
        per = y[known] if known >= 0 else None
        if known >= 0:
            counts[y[known]] = counts.get(y[known], 0) + 1
        maj = max(sorted(counts), key=counts.__getitem__) if counts else None
        pred = rng.choice([*labels, None]) if rng.random() < 0.5 else label
        rows.append((label, pred, per, maj))
    return rows


FORGETTINGS = [
    Forgetting.whole(),
    Forgetting.sliding(1),
    Forgetting.sliding(7),
    Forgetting.fading(0.9),
    Forgetting.fading(0.5),
]


@pytest.mark.parametrize("forgetting", FORGETTINGS, ids=lambda f: f.label)
def test_matches_reference_at_every_step(forgetting: Forgetting) -> None:
    rng = random.Random(1)
    rows = random_rows(rng, 120, k=3, delay=2)
    m = ClassificationMetrics(forgetting)
    for t in range(len(rows)):
        m.update(*rows[t])
        got, want = m.get(), reference(rows[: t + 1], forgetting)
        for key, value in want.items():
            if math.isnan(value):
                assert math.isnan(got[key]), (t, key)
            else:
                assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (t, key)


def test_fading_rescale_keeps_values() -> None:
    # alpha = .5 crosses the lazy-scale threshold (2^333 > 1e100) several times
    rows = random_rows(random.Random(2), 1200, k=4)
    m = ClassificationMetrics(Forgetting.fading(0.5))
    for row in rows:
        m.update(*row)
    got, want = m.get(), reference(rows, Forgetting.fading(0.5))
    for key in ("n", "accuracy", "p_ran", "p_per", "p_maj", "kappa", "kappa_per"):
        assert got[key] == pytest.approx(want[key], rel=1e-9), key


# --- identities --------------------------------------------------------------------------


@pytest.mark.parametrize("forgetting", FORGETTINGS, ids=lambda f: f.label)
@pytest.mark.parametrize("delay", [0, 3])
def test_baselines_score_exactly_zero(forgetting: Forgetting, delay: int) -> None:
    rows = random_rows(random.Random(delay), 300, k=3, delay=delay)
    per = ClassificationMetrics(forgetting)
    maj = ClassificationMetrics(forgetting)
    defined = 0
    for y, _, y_per, y_maj in rows:
        per.update(y, y_per, y_per, y_maj)  # the No-Change learner itself
        maj.update(y, y_maj, y_per, y_maj)  # the Majority learner itself
        k_per, k_m = per.get()["kappa_per"], maj.get()["kappa_m"]
        assert k_per == 0.0 or math.isnan(k_per)  # nan when p_per == 1
        assert k_m == 0.0 or math.isnan(k_m)
        defined += k_per == 0.0 and k_m == 0.0
    assert defined > 20


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            assert_same(a[key], b[key])
        elif math.isnan(a[key]):
            assert math.isnan(b[key]), key
        else:
            assert a[key] == b[key], key


def test_fading_one_and_long_window_equal_whole() -> None:
    rows = random_rows(random.Random(3), 200, k=4, delay=1)
    whole = ClassificationMetrics()
    fading = ClassificationMetrics(Forgetting.fading(1.0))
    window = ClassificationMetrics(Forgetting.sliding(len(rows)))
    for row in rows:
        for m in (whole, fading, window):
            m.update(*row)
        assert_same(whole.get(), fading.get())
        assert_same(whole.get(), window.get())


def test_window_equals_batch_of_its_last_rows() -> None:
    rows = random_rows(random.Random(4), 150, k=3, delay=1)
    window = feed(ClassificationMetrics(Forgetting.sliding(40)), *zip(*rows, strict=True))
    batch = feed(ClassificationMetrics(), *zip(*rows[-40:], strict=True))
    got, want = window.get(), batch.get()
    assert got["recall"].keys() >= want["recall"].keys()
    got["recall"] = {c: got["recall"][c] for c in want["recall"]}
    got["priors"] = {c: got["priors"][c] for c in want["priors"]}
    got["p_per_joint"] = {c: got["p_per_joint"][c] for c in want["p_per_joint"]}
    assert_same(got, want)


labels = st.sampled_from(["a", "b", "c", None])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), labels, labels, labels), min_size=1, max_size=40),
    st.sampled_from(FORGETTINGS),
)
def test_kappa_bounds(rows: list[tuple], forgetting: Forgetting) -> None:
    m = ClassificationMetrics(forgetting)
    for row in rows:
        m.update(*row)
        s = m.get()
        for key in ("kappa", "kappa_per", "kappa_m"):
            assert math.isnan(s[key]) or s[key] <= 1.0 + 1e-12, key
        kp = s["kappa_plus"]
        assert math.isnan(kp) or 0.0 <= kp <= 1.0 + 1e-12
        assert 0.0 <= s["accuracy"] <= 1.0
        assert 0.0 <= s["p_ran"] <= 1.0 + 1e-12
        assert math.isnan(s["gmean"]) or 0.0 <= s["gmean"] <= 1.0 + 1e-12
