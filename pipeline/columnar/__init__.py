"""The columnar evaluation core: learners called per event, metrics computed in bulk.

The per-event :class:`~streameval.pipeline.experiment.Experiment` is the reference;
this package gives the same outputs and results document, number for number, for
every experiment without continuous re-evaluation under the ``papers`` protocol, at a
cost per instance close to the learners' own calls:

* :mod:`~streameval.pipeline.columnar.experiment` -- :class:`ColumnarExperiment`: the
  protocol at each event (the learners' calls, the reference baselines, drift
  detectors), scored labels kept as rows of class codes;
* :mod:`~streameval.pipeline.columnar.callers` -- how each learner is called;
  :mod:`~streameval.pipeline.columnar.river_loop` -- a River model's calls for a block
  in one loop;
* :mod:`~streameval.pipeline.columnar.immediate` and
  :mod:`~streameval.pipeline.columnar.bulk` -- test-then-train in two passes: the
  learners' calls for a block first, then the evaluation of their answers, in bulk;
  :mod:`~streameval.pipeline.columnar.block` -- the block, held as columns;
* :mod:`~streameval.pipeline.columnar.waiting` -- the instances waiting for a label;
* :mod:`~streameval.pipeline.columnar.segment` -- scored labels as arrays, and the tape
  of the most recent ones that windowed estimates read;
* :mod:`~streameval.pipeline.columnar.held` -- scored labels waiting for the scoreboard,
  handed to it many at a time;
* :mod:`~streameval.pipeline.columnar.scoreboard` -- every metric in bulk, written into
  the per-event report objects when a snapshot or the results are read:
  :mod:`~streameval.pipeline.columnar.confusion` (the kappa family under every
  estimator, with :mod:`~streameval.pipeline.columnar.weights`),
  :mod:`~streameval.pipeline.columnar.auc`, :mod:`~streameval.pipeline.columnar.pairs`,
  :mod:`~streameval.pipeline.columnar.diagnostics`;
* :mod:`~streameval.pipeline.columnar.labels` and
  :mod:`~streameval.pipeline.columnar.schedule` -- labels as codes, the baselines'
  predictions as arrays and the replay schedule from the event times alone, for
  experiments whose learners only look at the labels;
* :mod:`~streameval.pipeline.columnar.driver` -- when ``evaluate`` takes this path
  (:func:`supports`) and its loops (:func:`evaluate_columnar`).
"""

from streameval.pipeline.columnar.driver import (
    drive_columnar,
    drive_steps,
    evaluate_columnar,
    supports,
)
from streameval.pipeline.columnar.experiment import ColumnarExperiment

__all__ = [
    "ColumnarExperiment",
    "drive_columnar",
    "drive_steps",
    "evaluate_columnar",
    "supports",
]
