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

Both are :class:`~streameval.pipeline.metrics.base.Sums` of the two learners'
losses, windowed or faded like any metric (``Forgetting.wrap``). The sums of A and
B share their weight (count, ``min(w, i)`` or ``N_alpha``), so the ratio of the
means is the ratio of the sums; McNemar's counts are the means times that weight.
Positive values mean that A loses more than B.

An experiment updates every pair of learners under every estimator at each label,
so the two states write their ``update``, ``replace`` and ``fade`` out for their
few sums instead of using the generic list code of ``Sums`` (same arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from streameval.pipeline.metrics.base import NAN, Sums
from streameval.pipeline.metrics.forgetting import Forgetting


def _check_losses(loss_a: float, loss_b: float) -> None:
    if not (loss_a >= 0.0 and loss_b >= 0.0):  # also rejects nan
        raise ValueError(f"losses must be non-negative numbers, got {loss_a}, {loss_b}")


class LossRatio(Sums):
    """``log(S_A / S_B)``: sums of both losses and of their non-zero indicators.

    The indicators tell an exact 0 sum from a window sum that rounding left at
    1e-17 after all positive losses were evicted.

    >>> q = LossRatio()
    >>> for a, b in [(1.0, 0.5), (0.0, 0.5), (1.0, 0.0)]:
    ...     q.update(a, b)
    >>> round(q.get(), 6)  # log(2 / 1)
    0.693147
    """

    size = 4

    def values(self, loss_a: float, loss_b: float) -> tuple[float, float, float, float]:
        _check_losses(loss_a, loss_b)
        return (loss_a, loss_b, 1.0 if loss_a > 0.0 else 0.0, 1.0 if loss_b > 0.0 else 0.0)

    def update(self, loss_a: float, loss_b: float, w: float = 1.0) -> None:  # type: ignore[override]
        _check_losses(loss_a, loss_b)
        a, b, nz_a, nz_b = self.sums
        self.sums = [
            a + w * loss_a,
            b + w * loss_b,
            nz_a + w * (1.0 if loss_a > 0.0 else 0.0),
            nz_b + w * (1.0 if loss_b > 0.0 else 0.0),
        ]
        self.weight += w

    def replace(self, old: Sequence[float], new: Sequence[float]) -> None:
        new_a, new_b = new
        _check_losses(new_a, new_b)
        old_a, old_b = old
        a, b, nz_a, nz_b = self.sums
        self.sums = [
            a + (new_a - old_a),
            b + (new_b - old_b),
            nz_a + ((1.0 if new_a > 0.0 else 0.0) - (1.0 if old_a > 0.0 else 0.0)),
            nz_b + ((1.0 if new_b > 0.0 else 0.0) - (1.0 if old_b > 0.0 else 0.0)),
        ]

    def fade(self, alpha: float) -> None:
        a, b, nz_a, nz_b = self.sums
        self.sums = [alpha * a, alpha * b, alpha * nz_a, alpha * nz_b]
        self.weight = alpha * self.weight

    def get(self) -> float:
        if not (self.mean(2) > 0.0 and self.mean(3) > 0.0):
            return NAN
        a, b = self.mean(0), self.mean(1)
        if a <= 0.0 or b <= 0.0:  # rounding of a window sum of tiny losses
            return NAN
        return math.log(a / b)


class DisagreementCounts(Sums):
    """``n01`` (A wrong, B right) and ``n10`` (A right, B wrong); ``get``: signed McNemar.

    >>> m = DisagreementCounts()
    >>> for ea, eb in [(True, False)] * 9 + [(False, True)]:
    ...     m.update(ea, eb)
    >>> m.counts, m.get()  # (9 - 1)^2 / (9 + 1)
    ((9.0, 1.0), 6.4)
    """

    size = 2

    def values(self, error_a: bool, error_b: bool) -> tuple[float, float]:
        return (1.0 if error_a and not error_b else 0.0, 1.0 if error_b and not error_a else 0.0)

    def update(self, error_a: bool, error_b: bool, w: float = 1.0) -> None:  # type: ignore[override]
        n01, n10 = self.sums
        self.sums = [
            n01 + w * (1.0 if error_a and not error_b else 0.0),
            n10 + w * (1.0 if error_b and not error_a else 0.0),
        ]
        self.weight += w

    def replace(self, old: Sequence[bool], new: Sequence[bool]) -> None:
        (new_a, new_b), (old_a, old_b) = new, old
        n01, n10 = self.sums
        self.sums = [
            n01 + ((1.0 if new_a and not new_b else 0.0) - (1.0 if old_a and not old_b else 0.0)),
            n10 + ((1.0 if new_b and not new_a else 0.0) - (1.0 if old_b and not old_a else 0.0)),
        ]

    def fade(self, alpha: float) -> None:
        n01, n10 = self.sums
        self.sums = [alpha * n01, alpha * n10]
        self.weight = alpha * self.weight

    @property
    def counts(self) -> tuple[float, float]:
        """``(n01, n10)``: mean times the total weight."""
        n = self.weight
        if not n:
            return 0.0, 0.0
        return self.mean(0) * n, self.mean(1) * n

    def get(self) -> float:
        n01, n10 = self.counts
        if n01 + n10 <= 0.0:
            return 0.0
        diff = n01 - n10
        return math.copysign(diff * diff / (n01 + n10), diff) if diff else 0.0


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
        self.sums = LossRatio()
        self._feed = forgetting.wrap(self.sums, rebuild=True)

    def update(self, loss_a: float, loss_b: float) -> None:
        _check_losses(loss_a, loss_b)  # before a window or a fading step changes anything
        self._feed.update(loss_a, loss_b)

    def get(self) -> float:
        return self.sums.get()


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
        self.sums = DisagreementCounts()
        self._feed = forgetting.wrap(self.sums, rebuild=True)

    def update(self, error_a: bool, error_b: bool) -> None:
        self._feed.update(error_a, error_b)

    @property
    def counts(self) -> tuple[float, float]:
        """``(n01, n10)``: mean times the estimator's denominator."""
        return self.sums.counts

    def get(self) -> float:
        return self.sums.get()

    @property
    def significant(self) -> bool:
        """Whether ``|M|`` exceeds the 0.99 chi-square threshold 6.635."""
        return abs(self.get()) > self.THRESHOLD
