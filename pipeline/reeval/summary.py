"""One number out of the binned performance: the weighted summary ``Psi_W``.

``delayed-labelling-continuous-reevaluation.txt``, sect. 7.3: with the binned
performance ``Λ(T, b)`` for ``b = 0..B+1`` and a weight vector ``w``,

    ``Psi_W(T) = sum_b Λ(T, b) w_b / sum_b w_b``.

:func:`weights_preset` builds ``w`` for ``n_bins_total = B + 2`` bins:

* ``first-time`` -- ``[1, 0, ..., 0]``: the first predictions only;
* ``test-then-train`` -- ``[0, ..., 0, 1]``: the usual test-then-train score;
* ``uniform`` -- ``[1, ..., 1]``: every bin alike;
* ``exponential`` -- ``w_b = rate ** b``, growing towards the label's arrival
  (the paper suggests growing, e.g. exponential, weights but gives no rate).
  The default ``rate = 1.05`` puts half of the total weight on the last
  ``log 2 / log 1.05 ≈ 14`` bins once ``B`` is large (``B = 50``: the last
  bin weighs ``1.05 ** 51 ≈ 12`` times the first; ``B = 20``: about 2.8
  times), a moderate emphasis for the ``B`` of 20 to 100 the paper uses
  (sect. 6.2). ``exponential[rate=1.1]`` sets another rate; a rate below 1
  favours the early bins instead.

Any other text is read as the vector itself, comma-separated:
``"1,0,0,1"``. One ``...`` may stand for as many copies of the value just
before it as needed to reach ``n_bins_total``: ``"1,0,...,0,1"`` is the
paper's average of first-time and test-then-train performance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from streameval.pipeline.spec import SpecError, parse_component, take_params

DEFAULT_RATE: float = 1.05
PRESETS: tuple[str, ...] = ("first-time", "test-then-train", "uniform", "exponential")
_ELLIPSIS = ("...", "…")


def check_weights(weights: Sequence[float], n: int | None = None) -> list[float]:
    """``weights`` as floats, checked: ``n`` of them, finite, ``>= 0``, not all zero.

    >>> check_weights([1, 0, 2])
    [1.0, 0.0, 2.0]
    """
    out = [float(w) for w in weights]
    if n is not None and len(out) != n:
        raise ValueError(f"{len(out)} weights for {n} bins")
    if not out:
        raise ValueError("no weights")
    for w in out:
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weights must be finite and >= 0, got {w}")
    if not any(out):
        raise ValueError("all weights are zero")
    return out


def weighted_summary(values: Sequence[float], weights: Sequence[float]) -> float:
    """``Psi_W``: the weighted average of per-bin values (sect. 7.3).

    Bins of weight zero are left out, so an undefined (``nan``) value there
    does not spoil the summary.

    >>> weighted_summary([0.5, 0.7, 0.9], [1, 0, 1])
    0.7
    >>> weighted_summary([0.5, float("nan"), 0.9], [1, 0, 0])
    0.5
    """
    w = check_weights(weights)
    if len(values) != len(w):
        raise ValueError(f"{len(values)} values for {len(w)} weights")
    total = 0.0
    mass = 0.0
    for value, weight in zip(values, w, strict=True):
        if weight > 0:
            total += float(value) * weight
            mass += weight
    return total / mass


def _parse_vector(text: str, n: int) -> list[float]:
    items = [item.strip() for item in text.split(",")]
    gaps = [i for i, item in enumerate(items) if item in _ELLIPSIS]
    if len(gaps) > 1:
        raise ValueError(f"at most one '...' in a weight vector: {text!r}")
    if gaps:
        i = gaps[0]
        if i == 0:
            raise ValueError(f"'...' repeats the value before it, there is none in {text!r}")
        fill = n - (len(items) - 1)
        if fill < 0:
            raise ValueError(f"{len(items) - 1} weights in {text!r} for {n} bins")
        items = items[:i] + [items[i - 1]] * fill + items[i + 1 :]
    try:
        values = [float(item) for item in items]
    except ValueError:
        raise ValueError(f"cannot read the weight vector {text!r}") from None
    return check_weights(values, n)


def weights_preset(name: str, n_bins_total: int, rate: float = DEFAULT_RATE) -> list[float]:
    """The weights of preset ``name`` (or of a written vector) for bins ``0..B+1``.

    ``n_bins_total`` is ``B + 2``. ``rate`` is the growth of ``exponential``;
    a ``rate`` parameter in the name (``exponential[rate=1.1]``) overrides it.

    >>> weights_preset("first-time", 4), weights_preset("test-then-train", 4)
    ([1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    >>> weights_preset("exponential[rate=2]", 4)
    [1.0, 2.0, 4.0, 8.0]
    >>> weights_preset("1,0,...,0,1", 5)
    [1.0, 0.0, 0.0, 0.0, 1.0]
    """
    if isinstance(n_bins_total, bool) or not isinstance(n_bins_total, int) or n_bins_total < 2:
        raise ValueError(f"n_bins_total is B + 2 (bins 0..B+1), >= 2; got {n_bins_total!r}")
    text = name.strip()
    if not text[:1].isalpha():
        return _parse_vector(text, n_bins_total)
    try:
        component = parse_component(text)
    except SpecError:
        component = None
    if component is None or component.name not in PRESETS:
        choices = ", ".join(PRESETS)
        raise ValueError(f"unknown weights {name!r}: use {choices} or a vector like 1,0,...,0,1")
    n = n_bins_total
    if component.name == "exponential":
        rate = take_params(component, {"rate": float}).get("rate", rate)
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"the exponential rate must be finite and > 0, got {rate}")
        try:
            return check_weights([rate**b for b in range(n)], n)
        except OverflowError:
            raise ValueError(f"rate {rate} ** {n - 1} overflows") from None
    take_params(component, {})
    if component.name == "first-time":
        return [1.0] + [0.0] * (n - 1)
    if component.name == "test-then-train":
        return [0.0] * (n - 1) + [1.0]
    return [1.0] * n
