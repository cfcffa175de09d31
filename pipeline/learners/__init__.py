"""Stream learners behind one protocol (:mod:`pipeline.learners.base`).

* :mod:`~pipeline.learners.baselines` -- NoChange (Persistent), Majority, TargetMean;
* :mod:`~pipeline.learners.river_adapter` -- any river model as a learner;
* :mod:`~pipeline.learners.naive_bayes` -- naive Bayes for numeric and ``str`` features;
* :mod:`~pipeline.learners.temporal` -- Temporally Augmented and Temporal Correction;
* :mod:`~pipeline.learners.spec` -- ``build_learner("ta3:ht", context=...)``, ``learner_lags``.

Nothing is imported here, so that ``pipeline.learners.base`` stays cheap to
import (river is loaded by the modules that need it).
"""
