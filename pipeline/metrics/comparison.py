"""Comparing two learners on the same stream: the Q statistic and signed McNemar.

Gama, Sebastiao & Rodrigues, *On evaluating stream learning algorithms*
(``prequential-error-fading-factors.txt``), sect. 4:

* ``Q_i(A, B) = log(S_i^A / S_i^B)`` with ``S`` the accumulated losses, and
  ``Q_i^alpha`` with the faded sums ``S_i = L_i + alpha S_{i-1}``; over a
  sliding window ``S`` is the sum of the last ``w`` losses;
* sect. 4.1, the signed McNemar statistic
  ``M = sign(n01 - n10) (n01 - n10)^2 / (n01 + n10)``, ``n01`` the examples A
  misclassifies and B does not, ``n10`` the reverse; the difference is
  significant at the 0.99 level when ``|M| > 6.635`` (chi-square, 1 d.o.f.).

Both use the estimators of Algorithms 1-3 (``forgetting.py``). Since the sums
of A and B share their denominator (count, ``min(w, i)`` or ``N_alpha``), the
ratio of the means is the ratio of the sums; McNemar's counts are the means
times that denominator. Positive values mean that A loses more than B.
"""

from __future__ import annotations

import math

from streameval.pipeline.metrics.forgetting import Forgetting


class QStatistic:
    """``log(S_A / S_B)`` of the (whole, windowed or faded) accumulated losses.

    Undefined (nan) while either sum is 0 -- before any loss, or when a
    window holds only zero losses of one learner: ``log(0)`` or ``log(x/0)``
    would be an infinite value that no plot or average can use. Losses must
    be non-negative (a nan loss raises instead of poisoning the sums).

    >>> q = QStatistic()
    >>> for a, b in [(1.0, 0.5), (0.0, 0.5), (1.0, 0.0)]:
    ...     q.update(a, b)
    >>> round(q.get(), 6)  # log(2 / 1)
    0.693147
    """

    def __init__(self, forgetting: Forgetting = Forgetting.whole()) -> None:  # noqa: B008
        self.forgetting = forgetting
        self._a = forgetting.make_mean()
        self._b = forgetting.make_mean()
        # fraction of non-zero losses: tells an exact 0 sum from a window sum
        # that rounding left at 1e-17 after all positive losses were evicted
        self._nz_a = forgetting.make_mean()
        self._nz_b = forgetting.make_mean()

    def update(self, loss_a: float, loss_b: float) -> None:
        if not (loss_a >= 0.0 and loss_b >= 0.0):  # also rejects nan
            raise ValueError(f"losses must be non-negative numbers, got {loss_a}, {loss_b}")
        self._a.update(loss_a)
        self._b.update(loss_b)
        self._nz_a.update(1.0 if loss_a > 0.0 else 0.0)
        self._nz_b.update(1.0 if loss_b > 0.0 else 0.0)

    def get(self) -> float:
        if not (self._nz_a.get() > 0.0 and self._nz_b.get() > 0.0):
            return math.nan
        a, b = self._a.get(), self._b.get()
        if a <= 0.0 or b <= 0.0:  # rounding of a window sum of tiny losses
            return math.nan
        return math.log(a / b)


class SignedMcNemar:
    """Signed McNemar statistic over whole, windowed or faded error counts.

    ``update(error_a, error_b)`` with whether each learner misclassified the
    example. ``get()`` is 0 while no example separates the learners.

    >>> m = SignedMcNemar()
    >>> for ea, eb in [(True, False)] * 9 + [(False, True)]:
    ...     m.update(ea, eb)
    >>> m.get(), m.significant  # (9 - 1)^2 / (9 + 1)
    (6.4, False)
    """

    THRESHOLD = 6.635  # chi-square with 1 degree of freedom, 0.99 quantile

    def __init__(self, forgetting: Forgetting = Forgetting.whole()) -> None:  # noqa: B008
        self.forgetting = forgetting
        self._n01 = forgetting.make_mean()  # A wrong, B right
        self._n10 = forgetting.make_mean()  # A right, B wrong

    def update(self, error_a: bool, error_b: bool) -> None:
        self._n01.update(1.0 if error_a and not error_b else 0.0)
        self._n10.update(1.0 if error_b and not error_a else 0.0)

    @property
    def counts(self) -> tuple[float, float]:
        """``(n01, n10)``: mean times the estimator's denominator."""
        n = self._n01.n
        if not n:
            return 0.0, 0.0
        return self._n01.get() * n, self._n10.get() * n

    def get(self) -> float:
        n01, n10 = self.counts
        if n01 + n10 <= 0.0:
            return 0.0
        diff = n01 - n10
        return math.copysign(diff * diff / (n01 + n10), diff) if diff else 0.0

    @property
    def significant(self) -> bool:
        """Whether ``|M|`` exceeds the 0.99 chi-square threshold 6.635."""
        return abs(self.get()) > self.THRESHOLD
