"""Stream learners behind one protocol (:mod:`streameval.pipeline.learners.base`).

* :mod:`~streameval.pipeline.learners.baselines` -- NoChange (Persistent), Majority, TargetMean;
* :mod:`~streameval.pipeline.learners.river_adapter` -- any river model as a learner;
* :mod:`~streameval.pipeline.learners.naive_bayes` -- naive Bayes for numeric and ``str`` features;
* :mod:`~streameval.pipeline.learners.temporal` -- Temporally Augmented and Temporal Correction;
* :mod:`~streameval.pipeline.learners.spec` -- ``build_learner("ta3:ht", context=...)``,
  ``learner_lags``.

Nothing is imported here, so that ``streameval.pipeline.learners.base`` stays cheap to
import (river is loaded by the modules that need it).
"""
