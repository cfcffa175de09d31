"""The columnar evaluation core: blocks of the schedule in, arrays out, metrics in bulk.

The per-event :class:`~streameval.pipeline.experiment.Experiment` is the reference;
this package computes the same results document from arrays, for experiments whose
learners look only at the labels (No-Change and Majority, the two baselines):

* :mod:`~streameval.pipeline.columnar.labels` -- labels as integer codes, and the
  baselines' predictions for a block as shifted label arrays and running counts;
* :mod:`~streameval.pipeline.columnar.weights` -- the whole, window and fading
  estimates of a weighted count, to the last bit of the per-event recursions;
* :mod:`~streameval.pipeline.columnar.confusion` and
  :mod:`~streameval.pipeline.columnar.auc` -- the confusion counts and the
  prequential AUC of one learner from its arrays;
* :mod:`~streameval.pipeline.columnar.diagnostics` -- the temporal-dependence
  diagnostics from the label sequence in instance order;
* :mod:`~streameval.pipeline.columnar.schedule` -- the replay schedule as arrays
  when the delay does not read the features (no event objects, no feature decoding);
* :mod:`~streameval.pipeline.columnar.experiment` -- :class:`ColumnarExperiment`,
  which takes blocks of input events and reports through the per-event reporting code,
  so that the JSON is the same for any block size;
* :mod:`~streameval.pipeline.columnar.driver` -- when the in-process driver may take
  this path (:func:`supports`) and the block loops (:func:`evaluate_columnar`).
"""

from streameval.pipeline.columnar.driver import drive_columnar, evaluate_columnar, supports
from streameval.pipeline.columnar.experiment import ColumnarExperiment

__all__ = ["ColumnarExperiment", "drive_columnar", "evaluate_columnar", "supports"]
