"""Prequential estimators: whole history, sliding window, fading factor.

Gama, Sebastiao & Rodrigues, *On evaluating stream learning algorithms*
(``prequential-error-fading-factors.txt``), sect. 3.3:

* Algorithm 1 -- whole history: ``P_e(i) = (e_i + (i-1) P_e(i-1)) / i``;
* Algorithm 2 -- sliding window of size ``w``: ``P_w(i) = S / min(w, i)``
  (:class:`~streameval.pipeline.metrics.rolling.Rolling`);
* Algorithm 3 -- fading factor ``alpha``: ``S(i) = e_i + alpha S(i-1)``,
  ``N(i) = 1 + alpha N(i-1)``, ``P_alpha(i) = S(i) / N(i)`` (eq. 1)
  (:class:`~streameval.pipeline.metrics.faded.Faded`).

:class:`Forgetting` names one of the three, so that every metric can be built
"whole", "window(w)" or "fading(alpha)" from one setting (``Forgetting.wrap``).
:class:`CumulativeMean`, :class:`WindowMean` and :class:`FadingMean` are the three
estimates of a scalar mean (the drift detectors watch them): one :class:`Mean`,
plain, rolled or faded. A fading factor of 1 is the whole-history estimate, a
window at least as long as the stream is too; both identities are tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from streameval.pipeline.metrics.base import NAN, Sums
from streameval.pipeline.metrics.faded import Faded
from streameval.pipeline.metrics.rolling import Rolling


class MeanEstimator(Protocol):
    """``update`` with one observation, ``get`` the current estimate."""

    def update(self, x: float) -> None: ...

    def get(self) -> float: ...

    @property
    def n(self) -> float: ...


class Mean(Sums):
    """The weighted mean of a stream of numbers (``update(x, w)``, ``revert``, ``get``).

    The drift detectors update a mean at every label: its one sum is kept as
    ``sums[0]`` but updated with scalar arithmetic instead of the generic list code
    (same values, a few times faster).

    >>> m = Mean()
    >>> for e in (1, 0, 0, 1):
    ...     m.update(e)
    >>> m.get(), m.n
    (0.5, 4.0)
    """

    size = 1

    def values(self, x: float) -> tuple[float]:
        return (x,)

    def update(self, x: float, w: float = 1.0) -> None:  # type: ignore[override]
        sums = self.sums
        sums[0] = sums[0] + w * x
        self.weight += w

    def revert(self, x: float, w: float = 1.0) -> None:  # type: ignore[override]
        sums = self.sums
        sums[0] = sums[0] - w * x
        self.weight -= w

    def replace(self, old: Sequence[float], new: Sequence[float]) -> None:
        sums = self.sums
        sums[0] = sums[0] + (new[0] - old[0])

    def fade(self, alpha: float) -> None:
        sums = self.sums
        sums[0] = alpha * sums[0]
        self.weight = alpha * self.weight

    def get(self) -> float:
        weight = self.weight
        return self.sums[0] / weight if weight else NAN

    @property
    def n(self) -> float:
        """Total weight: the count, ``min(w, i)`` or ``N_alpha(i)``."""
        return self.weight


class CumulativeMean(Mean):
    """Algorithm 1: the mean over the whole history.

    >>> m = CumulativeMean()
    >>> for e in (1, 0, 0, 1):
    ...     m.update(e)
    >>> m.get(), m.count
    (0.5, 4.0)
    """

    @property
    def count(self) -> float:
        return self.weight


class WindowMean(Rolling):
    """Algorithm 2: the mean of the last ``w`` observations.

    >>> m = WindowMean(2)
    >>> for e in (1, 0, 0):
    ...     m.update(e)
    >>> m.get(), m.n
    (0.0, 2.0)
    """

    def __init__(self, w: int) -> None:
        super().__init__(Mean(), w, rebuild=True)
        self.w = self.window

    @property
    def n(self) -> float:
        return self.metric.weight


class FadingMean(Faded):
    """Algorithm 3: the fading average ``S_alpha(i) / N_alpha(i)``.

    >>> m = FadingMean(0.5)
    >>> for e in (1, 0):
    ...     m.update(e)
    >>> m.get()  # (0 + 0.5*1) / (1 + 0.5*1)
    0.3333333333333333
    """

    def __init__(self, alpha: float) -> None:
        super().__init__(Mean(), alpha)

    @property
    def n(self) -> float:
        return self.metric.weight


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

    def wrap(self, metric: Any, *, rebuild: bool = False) -> Any:
        """``metric`` itself, ``Rolling(metric, window)`` or ``Faded(metric, alpha)``:
        whatever is fed goes through this (``rebuild``: see :class:`Rolling`).

        >>> from streameval.pipeline.metrics.kappa import Accuracy
        >>> Forgetting.sliding(3).wrap(Accuracy()).window
        3
        """
        if self.kind == "window":
            assert self.window is not None
            return Rolling(metric, self.window, rebuild=rebuild)
        if self.kind == "fading":
            assert self.alpha is not None
            return Faded(metric, self.alpha)
        return metric

    def make_mean(self) -> CumulativeMean | WindowMean | FadingMean:
        """A fresh scalar estimator of this kind."""
        if self.kind == "window":
            assert self.window is not None
            return WindowMean(self.window)
        if self.kind == "fading":
            assert self.alpha is not None
            return FadingMean(self.alpha)
        return CumulativeMean()
