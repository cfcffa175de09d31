"""Prequential estimators of a mean: whole history, sliding window, fading factor.

Gama, Sebastiao & Rodrigues, *On evaluating stream learning algorithms*
(``prequential-error-fading-factors.txt``), sect. 3.3:

* Algorithm 1 -- whole history: ``P_e(i) = (e_i + (i-1) P_e(i-1)) / i``;
* Algorithm 2 -- sliding window of size ``w`` kept in a circular vector:
  ``P_w(i) = S / min(w, i)``;
* Algorithm 3 -- fading factor ``alpha``: ``S(i) = e_i + alpha S(i-1)``,
  ``N(i) = 1 + alpha N(i-1)``, ``P_alpha(i) = S(i) / N(i)`` (eq. 1).

A fading factor of 1 is the whole-history estimate, a window at least as long
as the stream is too; both identities are tested.

:class:`Forgetting` names one of the three so that every metric can be built
"whole", "window(w)" or "fading(alpha)" from one setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol


class MeanEstimator(Protocol):
    """``update`` with one observation, ``get`` the current estimate."""

    def update(self, x: float) -> None: ...

    def get(self) -> float: ...

    @property
    def n(self) -> float: ...


class CumulativeMean:
    """Algorithm 1: the mean over the whole history.

    >>> m = CumulativeMean()
    >>> for e in (1, 0, 0, 1):
    ...     m.update(e)
    >>> m.get(), m.n
    (0.5, 4)
    """

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def update(self, x: float) -> None:
        self.total += x
        self.count += 1

    def get(self) -> float:
        return self.total / self.count if self.count else float("nan")

    @property
    def n(self) -> float:
        return self.count


class WindowMean:
    """Algorithm 2: the mean of the last ``w`` observations (circular vector).

    >>> m = WindowMean(2)
    >>> for e in (1, 0, 0):
    ...     m.update(e)
    >>> m.get(), m.n
    (0.0, 2)
    """

    def __init__(self, w: int) -> None:
        if w < 1:
            raise ValueError(f"window size must be >= 1, got {w}")
        self.w = w
        self.values = [0.0] * w
        self.i = 0
        self.total = 0.0

    def update(self, x: float) -> None:
        p = self.i % self.w
        self.total += x - self.values[p]
        self.values[p] = x
        self.i += 1
        if p == self.w - 1:
            # once per turn of the circular vector: drop the rounding residue of the
            # running sum (amortised O(1)), so a window of zeros reads exactly 0
            self.total = float(sum(self.values))

    def get(self) -> float:
        n = min(self.w, self.i)
        return self.total / n if n else float("nan")

    @property
    def n(self) -> float:
        return min(self.w, self.i)


class FadingMean:
    """Algorithm 3: the fading average ``S_alpha(i) / N_alpha(i)``.

    >>> m = FadingMean(0.5)
    >>> for e in (1, 0):
    ...     m.update(e)
    >>> m.get()  # (0 + 0.5*1) / (1 + 0.5*1)
    0.3333333333333333
    """

    def __init__(self, alpha: float) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"fading factor must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self.s = 0.0
        self.weight = 0.0

    def update(self, x: float) -> None:
        self.s = x + self.alpha * self.s
        self.weight = 1.0 + self.alpha * self.weight

    def get(self) -> float:
        return self.s / self.weight if self.weight else float("nan")

    @property
    def n(self) -> float:
        return self.weight


@dataclass(frozen=True)
class Forgetting:
    """Which prequential estimator a metric uses: ``whole``, ``window`` or ``fading``.

    >>> Forgetting.parse("window:1000").label, Forgetting.parse("fading:0.999").label
    ('window(1000)', 'fading(0.999)')
    """

    kind: Literal["whole", "window", "fading"] = "whole"
    window: int | None = None
    alpha: float | None = None

    def __post_init__(self) -> None:
        if self.kind == "window" and (self.window is None or self.window < 1):
            raise ValueError("a window estimator needs a window size >= 1")
        if self.kind == "fading" and (self.alpha is None or not 0.0 < self.alpha <= 1.0):
            raise ValueError("a fading estimator needs a fading factor in (0, 1]")

    @classmethod
    def whole(cls) -> Forgetting:
        return cls("whole")

    @classmethod
    def sliding(cls, w: int) -> Forgetting:
        return cls("window", window=int(w))

    @classmethod
    def fading(cls, alpha: float) -> Forgetting:
        return cls("fading", alpha=float(alpha))

    @classmethod
    def parse(cls, text: str) -> Forgetting:
        """``whole``, ``window:W`` or ``fading:A``."""
        kind, _, arg = text.partition(":")
        if kind == "whole" and not arg:
            return cls.whole()
        if kind == "window" and arg:
            return cls.sliding(int(arg))
        if kind == "fading" and arg:
            return cls.fading(float(arg))
        raise ValueError(f"cannot parse estimator {text!r}: use whole, window:W or fading:A")

    @property
    def label(self) -> str:
        if self.kind == "window":
            return f"window({self.window})"
        if self.kind == "fading":
            return f"fading({self.alpha:g})"
        return "whole"

    def make_mean(self) -> CumulativeMean | WindowMean | FadingMean:
        """A fresh scalar estimator of this kind."""
        if self.kind == "window":
            assert self.window is not None
            return WindowMean(self.window)
        if self.kind == "fading":
            assert self.alpha is not None
            return FadingMean(self.alpha)
        return CumulativeMean()
