"""streameval: honest evaluation of stream classifiers under temporal dependence and delayed labels.

>>> import streameval
>>> from river import naive_bayes
>>> stream = [({"x": (i % 3 == 0) + (i % 5) / 10}, i % 3 == 0) for i in range(300)]
>>> results = streameval.evaluate(stream, {"nb": naive_bayes.GaussianNB()}, delay=1)
>>> round(results.metric("kappa_per")["nb"], 3)  # > 0: it beats No-Change
0.98

The learners (``streameval.NoChange``, ``TemporallyAugmented``, ...) are River estimators
and the metrics (``streameval.KappaTemporal``, ``Rolling``, ``Faded``, ...) River-style
``update`` / ``get`` objects, usable on their own.

The core lives in :mod:`streameval.pipeline` (no Kafka), the Kafka layer in
:mod:`streameval.agents`, the topic schemas in :mod:`streameval.schemas` and the command
line in :mod:`streameval.cli`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

#: The public names and the modules that define them, imported on first use so that
#: ``import streameval.agents`` or the command line do not load River up front.
_EXPORTS = {
    "evaluate": "streameval.pipeline.evaluate",
    "Results": "streameval.pipeline.results",
    # learners and wrappers (River estimators)
    **dict.fromkeys(
        ["NoChange", "Majority", "TargetMean", "MixedNB", "TemporallyAugmented",
         "TemporalCorrection"],
        "streameval.pipeline.learners",
    ),
    # metrics (update / revert / get) and their window and fading estimates
    **dict.fromkeys(
        ["Accuracy", "CohenKappa", "KappaTemporal", "KappaM", "KappaPlus", "GMean", "AUC",
         "PrequentialAUC", "ConfusionMatrix", "Rolling", "Faded"],
        "streameval.pipeline.metrics",
    ),
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streameval' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
