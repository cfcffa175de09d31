"""Q statistic and signed McNemar: hand-computed values for whole, window, fading."""

from __future__ import annotations

import math

import pytest
from streameval.pipeline.metrics import Forgetting, QStatistic, SignedMcNemar

LOSSES = [(1.0, 0.0), (2.0, 1.0), (0.0, 3.0), (1.0, 1.0)]


def q_after(forgetting: Forgetting, losses: list[tuple[float, float]]) -> float:
    q = QStatistic(forgetting)
    for a, b in losses:
        q.update(a, b)
    return q.get()


def test_q_whole() -> None:
    # S_A = 1 + 2 + 0 + 1 = 4, S_B = 0 + 1 + 3 + 1 = 5
    assert q_after(Forgetting.whole(), LOSSES) == pytest.approx(math.log(4 / 5), abs=1e-12)
    # after the first example S_B = 0: undefined
    assert math.isnan(q_after(Forgetting.whole(), LOSSES[:1]))
    # symmetric: Q(B, A) = -Q(A, B)
    swapped = [(b, a) for a, b in LOSSES]
    assert q_after(Forgetting.whole(), swapped) == pytest.approx(-math.log(4 / 5), abs=1e-12)


def test_q_window() -> None:
    # last two: S_A = 0 + 1 = 1, S_B = 3 + 1 = 4
    assert q_after(Forgetting.sliding(2), LOSSES) == pytest.approx(math.log(1 / 4), abs=1e-12)
    # window of 1 on the third example: S_A = 0 -> nan
    assert math.isnan(q_after(Forgetting.sliding(1), LOSSES[:3]))
    # float losses that leave the window exactly: the sum is 0, not 1e-17
    losses = [(0.1, 0.3), (0.2, 0.7), (0.0, 1.0), (0.0, 1.0)]
    assert math.isnan(q_after(Forgetting.sliding(2), losses))


def test_q_fading() -> None:
    # alpha = .5: S_A = ((1 * .5 + 2) * .5 + 0) * .5 + 1 = 1.625
    #             S_B = ((0 * .5 + 1) * .5 + 3) * .5 + 1 = 2.75
    got = q_after(Forgetting.fading(0.5), LOSSES)
    assert got == pytest.approx(math.log(1.625 / 2.75), abs=1e-12)
    # fading factor 1 is the whole history
    assert q_after(Forgetting.fading(1.0), LOSSES) == pytest.approx(math.log(4 / 5), abs=1e-12)


def test_q_rejects_negative_losses() -> None:
    with pytest.raises(ValueError):
        QStatistic().update(-1.0, 0.0)
    with pytest.raises(ValueError):
        QStatistic().update(0.0, float("nan"))


# errors (A, B) per example: n01 = A wrong & B right, n10 = B wrong & A right
ERRORS = [(True, False)] * 8 + [(True, True), (False, False), (False, True)] + [(True, False)] * 2


def mcnemar_after(forgetting: Forgetting, errors: list[tuple[bool, bool]]) -> SignedMcNemar:
    m = SignedMcNemar(forgetting)
    for a, b in errors:
        m.update(a, b)
    return m


def test_mcnemar_whole() -> None:
    m = mcnemar_after(Forgetting.whole(), ERRORS)
    # n01 = 10, n10 = 1: (10 - 1)^2 / 11 = 81 / 11 = 7.36 > 6.635
    assert m.counts == pytest.approx((10.0, 1.0))
    assert m.get() == pytest.approx(81 / 11, abs=1e-12)
    assert m.significant
    # B worse: the sign flips, still significant
    swapped = mcnemar_after(Forgetting.whole(), [(b, a) for a, b in ERRORS])
    assert swapped.get() == pytest.approx(-81 / 11, abs=1e-12)
    assert swapped.significant
    # n01 = 8, n10 = 1: 49 / 9 = 5.44 < 6.635
    assert not mcnemar_after(Forgetting.whole(), ERRORS[:9] + ERRORS[10:11]).significant
    # no disagreement: 0
    assert mcnemar_after(Forgetting.whole(), [(True, True), (False, False)]).get() == 0.0
    assert SignedMcNemar().get() == 0.0


def test_mcnemar_window() -> None:
    # last 5: (T,T) (F,F) (F,T) (T,F) (T,F): n01 = 2, n10 = 1 -> 1/3
    m = mcnemar_after(Forgetting.sliding(5), ERRORS)
    assert m.counts == pytest.approx((2.0, 1.0))
    assert m.get() == pytest.approx(1 / 3, abs=1e-12)
    assert not m.significant
    # balanced window: n01 = n10 = 1 -> 0
    assert mcnemar_after(Forgetting.sliding(4), ERRORS[:12]).get() == 0.0


def test_mcnemar_fading() -> None:
    # alpha = .5 over (T,F) (F,T) (T,F): n01 = .25 + 1 = 1.25, n10 = .5
    # M = (0.75)^2 / 1.75
    m = mcnemar_after(Forgetting.fading(0.5), [(True, False), (False, True), (True, False)])
    assert m.counts == pytest.approx((1.25, 0.5))
    assert m.get() == pytest.approx(0.75**2 / 1.75, abs=1e-12)
    # alpha = 1 equals whole
    assert mcnemar_after(Forgetting.fading(1.0), ERRORS).get() == pytest.approx(81 / 11)
