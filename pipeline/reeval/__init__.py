"""Continuous re-evaluation under delayed labels.

Grzenda, Gomes & Bifet, *Delayed labelling evaluation for data streams*
(``delayed-labelling-continuous-reevaluation.txt``):

* :mod:`~streameval.pipeline.reeval.buffer` -- the instances waiting for their labels,
  their predictions, and which are due for a re-prediction every ``K`` labels
  (sect. 4, Algorithm 1; resource indicators of sect. 6.1);
* :mod:`~streameval.pipeline.reeval.bins` -- the ``B`` bins of each waiting period and the
  averaged prediction of each bin, ``d_D`` (sect. 4.1) and ``d_A`` (sect. 7.1);
* :mod:`~streameval.pipeline.reeval.summary` -- the weighted summary ``Psi_W`` of the
  binned performance (sect. 7.3).
"""

from streameval.pipeline.reeval.bins import (
    average_per_bin,
    bin_edges,
    bin_of,
    dominant_per_bin,
    durations_per_bin,
)
from streameval.pipeline.reeval.buffer import PendingBuffer, PendingInstance
from streameval.pipeline.reeval.summary import (
    DEFAULT_RATE,
    PRESETS,
    check_weights,
    weighted_summary,
    weights_preset,
)

__all__ = [
    "DEFAULT_RATE",
    "PRESETS",
    "PendingBuffer",
    "PendingInstance",
    "average_per_bin",
    "bin_edges",
    "bin_of",
    "check_weights",
    "dominant_per_bin",
    "durations_per_bin",
    "weighted_summary",
    "weights_preset",
]
