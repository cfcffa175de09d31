"""Drift detectors from spec strings (the grammar of :mod:`streameval.pipeline.spec`).

Allowed detectors and their parameters (defaults in brackets):

* ``ph[delta=0.1,lambda=100,estimator=fading,alpha=0.997,w=1000]`` -- the
  Page-Hinkley test on a prequential error estimate
  (:class:`~streameval.pipeline.drift.page_hinkley.PrequentialPageHinkley`); ``estimator``
  is ``whole``, ``window`` (size ``w``) or ``fading`` (factor ``alpha``), or
  ``raw`` for the test on the losses themselves
  (:class:`~streameval.pipeline.drift.page_hinkley.PageHinkley`). ``w`` only goes with
  ``window``, ``alpha`` only with ``fading``. The default estimator and its
  parameters are the fastest settings of Table 2 of
  ``prequential-error-fading-factors.txt`` (fading factor 0.997, window 1000).
* ``ratio_fading[alpha1=0.9994,alpha2=0.997,delta=0.1,lambda=100]`` -- Algorithm 4;
* ``ratio_window[w1=5000,w2=1000,delta=0.1,lambda=100]`` -- its window twin;
* ``adwin[delta=0.002]`` -- river's ADWIN;
* ``ddm[warm_start=30,drift_threshold=3]`` -- river's DDM;
* ``random[p=...,warmup=30]`` -- alarms at random (``p`` is required).

Every detector's ``name`` is a spec that builds an equal detector.
"""

from __future__ import annotations

from collections.abc import Callable

from streameval.pipeline.drift.base import DriftDetector
from streameval.pipeline.drift.page_hinkley import PageHinkley, PrequentialPageHinkley
from streameval.pipeline.drift.random_detector import RandomDetector
from streameval.pipeline.drift.ratio import FadingRatioPageHinkley, WindowRatioPageHinkley
from streameval.pipeline.drift.river_detectors import RiverDetector
from streameval.pipeline.metrics.forgetting import Forgetting
from streameval.pipeline.spec import Component, SpecError, parse_component, take_params

#: Default estimator parameters of ``ph`` (Table 2's fastest).
PH_ALPHA = 0.997
PH_WINDOW = 1000

_ESTIMATORS = ("whole", "window", "fading", "raw")


def _ph(c: Component, seed: int) -> DriftDetector:
    p = take_params(
        c, {"delta": float, "lambda": float, "estimator": str, "w": int, "alpha": float}
    )
    test: dict[str, float] = {}
    if "delta" in p:
        test["delta"] = p["delta"]
    if "lambda" in p:
        test["lambda_"] = p["lambda"]
    estimator = p.get("estimator", "fading")
    if estimator not in _ESTIMATORS:
        raise SpecError(f"ph: estimator must be one of {', '.join(_ESTIMATORS)}, got {estimator!r}")
    if "w" in p and estimator != "window":
        raise SpecError("ph: w (window size) only goes with estimator=window")
    if "alpha" in p and estimator != "fading":
        raise SpecError("ph: alpha (fading factor) only goes with estimator=fading")
    if estimator == "raw":
        return PageHinkley(**test)
    if estimator == "window":
        forgetting = Forgetting.sliding(p.get("w", PH_WINDOW))
    elif estimator == "fading":
        forgetting = Forgetting.fading(p.get("alpha", PH_ALPHA))
    else:
        forgetting = Forgetting.whole()
    return PrequentialPageHinkley(forgetting, **test)


def _ratio_fading(c: Component, seed: int) -> DriftDetector:
    p = take_params(c, {"alpha1": float, "alpha2": float, "delta": float, "lambda": float})
    if "lambda" in p:
        p["lambda_"] = p.pop("lambda")
    return FadingRatioPageHinkley(**p)


def _ratio_window(c: Component, seed: int) -> DriftDetector:
    p = take_params(c, {"w1": int, "w2": int, "delta": float, "lambda": float})
    if "lambda" in p:
        p["lambda_"] = p.pop("lambda")
    return WindowRatioPageHinkley(**p)


def _adwin(c: Component, seed: int) -> DriftDetector:
    return RiverDetector("adwin", **take_params(c, {"delta": float}))


def _ddm(c: Component, seed: int) -> DriftDetector:
    return RiverDetector("ddm", **take_params(c, {"warm_start": int, "drift_threshold": float}))


def _random(c: Component, seed: int) -> DriftDetector:
    p = take_params(c, {"p": float, "warmup": int})
    if "p" not in p:
        raise SpecError("random: the alarm probability p is required (random[p=0.01])")
    return RandomDetector(seed=seed, **p)


_BUILDERS: dict[str, Callable[[Component, int], DriftDetector]] = {
    "ph": _ph,
    "ratio_fading": _ratio_fading,
    "ratio_window": _ratio_window,
    "adwin": _adwin,
    "ddm": _ddm,
    "random": _random,
}

#: The detector names :func:`build_detector` knows.
DETECTORS: tuple[str, ...] = tuple(_BUILDERS)


def build_detector(spec: str, seed: int = 0) -> DriftDetector:
    """A fresh detector from its spec; ``seed`` seeds the random detector.

    >>> build_detector("ratio_fading").name
    'ratio_fading[alpha1=0.9994,alpha2=0.997,delta=0.1,lambda=100]'
    >>> build_detector("ph[estimator=window,w=500]").name
    'ph[estimator=window,w=500,delta=0.1,lambda=100]'
    >>> build_detector("cusum")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streameval.pipeline.spec.SpecError: unknown drift detector 'cusum' (allowed: ph, ...)
    """
    component = parse_component(spec)
    builder = _BUILDERS.get(component.name)
    if builder is None:
        raise SpecError(
            f"unknown drift detector {component.name!r} (allowed: {', '.join(DETECTORS)})"
        )
    try:
        return builder(component, seed)
    except ValueError as exc:  # a value out of range (SpecError is a ValueError too)
        if isinstance(exc, SpecError):
            raise
        raise SpecError(f"{component.name}: {exc}") from exc
