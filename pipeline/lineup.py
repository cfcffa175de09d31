"""An experiment's line-up: its learners by name and the scorecard each one fills.

The learners come either given as objects (the library: any River classifier or
regressor, or a streameval learner) or as the specs of ``config.learners`` (the
command line and the Kafka worker), built here. Either way they are bound to the
stream's label context, so a learner that reads past labels reads them as the
protocol releases them.

>>> from streameval.pipeline.config import ExperimentConfig
>>> from streameval.pipeline.learners.base import StreamContext
>>> config = ExperimentConfig("s", ["majority"])
>>> list(build_learners(config, None, StreamContext(), allow_import=False))
['majority']
>>> scorecard_for(config).n_scored
0
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.learners import as_learner, bind_context
from streameval.pipeline.learners.base import StreamContext
from streameval.pipeline.learners.spec import build_learner
from streameval.pipeline.scorecard import Scorecard


def build_learners(
    config: ExperimentConfig,
    given: Mapping[str, Any] | None,
    context: StreamContext,
    *,
    allow_import: bool,
) -> dict[str, Any]:
    """The learners by name, bound to ``context``: ``given`` ones (named as in
    ``config.learners``) or, without them, built from ``config.learners``' specs;
    ``allow_import`` lets those specs import any class."""
    if given is None:
        return {
            spec: build_learner(
                spec,
                context=context,
                task=config.task,
                seed=config.seed,
                allow_import=allow_import,
            )
            for spec in config.learners
        }
    if list(given) != list(config.learners):
        raise ValueError(f"learner names {list(given)} differ from the config's {config.learners}")
    out = {}
    for name, model in given.items():
        learner = as_learner(model, config.task)
        if config.drift_reset and not hasattr(learner, "clone"):
            raise ValueError(
                f"learner {name!r} has no clone(): a drift reset restarts a learner as its "
                "untrained clone (a River estimator has one)"
            )
        bind_context(learner, context)
        out[name] = learner
    return out


def scorecard_for(config: ExperimentConfig) -> Scorecard:
    """A learner's empty scorecard: the config's estimators, bins, AUC and detectors."""
    with_auc = config.task == "classification" and config.positive is not None
    return Scorecard.build(
        config.task,
        config.estimators(),
        n_bins=config.bins + 2 if config.reeval else None,
        auc_window=(config.window or config.auc_window) if with_auc else None,
        detectors=config.detectors,
        seed=config.seed,
    )
