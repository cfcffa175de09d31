"""The Page-Hinkley test, on a raw signal or on a prequential error estimate.

``prequential-error-fading-factors.txt``, sect. 5.1: the test accumulates the
deviations of the signal from its mean, less an admissible change ``delta``,

    m_T = sum_{t=1..T} (x_t - mean_t - delta),    M_T = min(m_t, t = 1..T),

and signals a change when ``PH_T = m_T - M_T`` is greater than a threshold
``lambda``. It detects *increases* of the signal's mean (an error rate going up).

Reading of the formula: sect. 5.1 writes the mean as ``x̄_T`` (the mean "till
the current moment"). Taken literally, with the same ``x̄_T`` in every term,
``m_T`` would be ``-T delta`` for every signal, so the mean in term ``t`` is the
running mean of ``x_1..x_t`` -- the reading Algorithm 4 of the same paper
spells out (``m_T(i) = m_T(i-1) + R(i) - SR(i)/i - delta``). That is what
:class:`PageHinkleyStatistic` computes.

Sect. 5.1 alarms when ``PH_T`` is *greater than* ``lambda``; Algorithm 4 when it
is *greater or equal*. :class:`PageHinkley` and :class:`PrequentialPageHinkley`
follow sect. 5.1 (``>``), the ratio detectors of :mod:`streameval.pipeline.drift.ratio`
follow Algorithm 4 (``>=``).

Sect. 5.2 runs the test on the prequential error (whole history, sliding
window or fading factor; Algorithms 1-3) updated by each loss, with
``delta = 0.1`` and ``lambda = 100``: :class:`PrequentialPageHinkley`. Those are
the defaults of every Page-Hinkley detector here.
"""

from __future__ import annotations

import math

from streameval.pipeline.drift.base import RestartingDetector, check_threshold, spec_name
from streameval.pipeline.metrics.forgetting import (
    CumulativeMean,
    FadingMean,
    Forgetting,
    WindowMean,
)

#: Sect. 5.2 of ``prequential-error-fading-factors.txt``.
PAPER_DELTA = 0.1
PAPER_LAMBDA = 100.0


class PageHinkleyStatistic:
    """``m_T`` and ``M_T`` of the Page-Hinkley test; ``get`` is ``PH_T = m_T - M_T``.

    ``min_start`` is the value ``M_T`` starts from: ``inf`` for the minimum over
    ``t = 1..T`` of sect. 5.1, ``1`` in Algorithm 4. Since ``m_1 = -delta`` (the
    first value is its own mean), both give the same ``M_T`` when ``delta >= 0``.

    >>> ph = PageHinkleyStatistic(delta=0.5)
    >>> for x in (1, 1, 1, 5):
    ...     ph.update(x)
    >>> ph.m, ph.m_min, ph.get()
    (1.0, -1.5, 2.5)
    """

    def __init__(self, delta: float, min_start: float = math.inf) -> None:
        self.delta = delta
        self.min_start = min_start
        self.mean = CumulativeMean()
        self.m = 0.0
        self.m_min = min_start

    def update(self, x: float) -> None:
        self.mean.update(x)
        self.m = self.m + x - self.mean.get() - self.delta
        self.m_min = min(self.m_min, self.m)

    def get(self) -> float:
        """``PH_T = m_T - M_T`` (0 before the first value)."""
        return self.m - self.m_min if self.mean.count else 0.0


class PageHinkley(RestartingDetector):
    """Sect. 5.1: the Page-Hinkley test on the raw loss stream.

    Alarms when ``m_T - M_T > lambda_``, then restarts.

    >>> ph = PageHinkley(delta=0.5, lambda_=2.5)
    >>> [ph.update(x) for x in (1, 1, 1, 5, 5)]
    [False, False, False, False, True]
    >>> ph.statistic  # m_5 - M_5 = 2.9 - (-1.5)
    4.4
    >>> ph.name
    'ph[estimator=raw,delta=0.5,lambda=2.5]'
    """

    def __init__(self, delta: float = PAPER_DELTA, lambda_: float = PAPER_LAMBDA) -> None:
        check_threshold(delta, lambda_)
        super().__init__()
        self.delta = float(delta)
        self.lambda_ = float(lambda_)
        self.ph = PageHinkleyStatistic(self.delta)

    @property
    def name(self) -> str:
        return spec_name("ph", {"estimator": "raw", "delta": self.delta, "lambda": self.lambda_})

    @property
    def statistic(self) -> float:
        return self.ph.get()

    def _step(self, error: float) -> bool:
        self.ph.update(error)
        return self.ph.get() > self.lambda_

    def _restart(self) -> None:
        self.ph = PageHinkleyStatistic(self.delta)


class PrequentialPageHinkley(RestartingDetector):
    """Sect. 5.2: the Page-Hinkley test on a prequential error estimate.

    Each loss updates the estimate chosen by ``forgetting`` (whole history,
    sliding window or fading factor, Algorithms 1-3); the estimate feeds the
    test of sect. 5.1, which alarms when ``m_T - M_T > lambda_``. On an alarm
    the estimate restarts with the test.

    >>> d = PrequentialPageHinkley(Forgetting.fading(0.9), delta=0.0, lambda_=0.2)
    >>> [d.update(e) for e in (0, 0, 0, 1)]
    [False, False, False, True]
    >>> round(d.estimate, 4), round(d.statistic, 4)  # 1 / 3.439; 0.2908 - 0.2908 / 4
    (0.2908, 0.2181)
    >>> d.name
    'ph[estimator=fading,alpha=0.9,delta=0,lambda=0.2]'
    """

    def __init__(
        self,
        forgetting: Forgetting,
        delta: float = PAPER_DELTA,
        lambda_: float = PAPER_LAMBDA,
    ) -> None:
        check_threshold(delta, lambda_)
        super().__init__()
        self.forgetting = forgetting
        self.delta = float(delta)
        self.lambda_ = float(lambda_)
        self._restart()

    @property
    def name(self) -> str:
        f = self.forgetting
        params: dict[str, float | int | str] = {"estimator": f.kind}
        if f.kind == "window":
            assert f.window is not None
            params["w"] = f.window
        elif f.kind == "fading":
            assert f.alpha is not None
            params["alpha"] = f.alpha
        params.update(delta=self.delta, **{"lambda": self.lambda_})
        return spec_name("ph", params)

    @property
    def estimate(self) -> float:
        """The current prequential error estimate (``nan`` before the first loss)."""
        return self.mean.get()

    @property
    def statistic(self) -> float:
        return self.ph.get()

    def _step(self, error: float) -> bool:
        self.mean.update(error)
        self.ph.update(self.mean.get())
        return self.ph.get() > self.lambda_

    def _restart(self) -> None:
        self.mean: CumulativeMean | WindowMean | FadingMean = self.forgetting.make_mean()
        self.ph = PageHinkleyStatistic(self.delta)
