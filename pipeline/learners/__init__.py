"""Stream learners behind one protocol (:mod:`streameval.pipeline.learners.base`).

* :mod:`~streameval.pipeline.learners.baselines` -- NoChange (Persistent), Majority, TargetMean;
* :mod:`~streameval.pipeline.learners.river_adapter` -- any river model as a learner
  (:func:`as_learner`);
* :mod:`~streameval.pipeline.learners.naive_bayes` -- naive Bayes for numeric and ``str`` features;
* :mod:`~streameval.pipeline.learners.temporal` -- Temporally Augmented and Temporal Correction;
* :mod:`~streameval.pipeline.learners.spec` -- ``build_learner("ta3:ht", context=...)``,
  ``learner_lags``.

Every learner is a river estimator (``clone()``, river's ``progressive_val_score``);
the temporal wrappers are bound to an experiment's stream context with
:func:`bind_context`.

>>> from river import tree
>>> from streameval.pipeline.learners import TemporallyAugmented, as_learner
>>> model = TemporallyAugmented(tree.HoeffdingTreeClassifier(), n_labels=2)
>>> as_learner(model) is model
True

The names below are imported on first use, so that importing
``streameval.pipeline.learners.base`` stays cheap (river is loaded by the
modules that need it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "StreamContext": "base",
    "argmax": "base",
    "bind_context": "base",
    "NoChange": "baselines",
    "Majority": "baselines",
    "TargetMean": "baselines",
    "MixedNB": "naive_bayes",
    "RiverClassifier": "river_adapter",
    "RiverRegressor": "river_adapter",
    "as_learner": "river_adapter",
    "with_one_hot": "river_adapter",
    "TemporallyAugmented": "temporal",
    "TemporalCorrection": "temporal",
    "build_learner": "spec",
    "learner_lags": "spec",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
