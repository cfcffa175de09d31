"""Drift detection on a learner's loss stream, and scoring of the alarms.

* :mod:`~streameval.pipeline.drift.base` -- the :class:`DriftDetector` protocol (restart after
  an alarm);
* :mod:`~streameval.pipeline.drift.page_hinkley` -- Page-Hinkley on the losses or on a prequential
  error estimate (``prequential-error-fading-factors.txt``, sect. 5.1-5.2);
* :mod:`~streameval.pipeline.drift.ratio` -- Page-Hinkley on the ratio of a short- and a long-term
  error estimate (sect. 5.3, Algorithm 4, and its sliding-window twin);
* :mod:`~streameval.pipeline.drift.river_detectors` -- river's ADWIN and DDM;
* :mod:`~streameval.pipeline.drift.random_detector` -- random alarms, the DDM-random experiment
  (``temporal-dependence-evaluation-journal.txt``, sect. 6.9);
* :mod:`~streameval.pipeline.drift.spec` -- detectors from spec strings;
* :mod:`~streameval.pipeline.drift.evaluation` -- detection delay, misses and false alarms.
"""

from streameval.pipeline.drift.base import DriftDetector
from streameval.pipeline.drift.evaluation import DetectionReport, collect_alarms, score_detections
from streameval.pipeline.drift.page_hinkley import PageHinkley, PrequentialPageHinkley
from streameval.pipeline.drift.random_detector import RandomDetector
from streameval.pipeline.drift.ratio import FadingRatioPageHinkley, WindowRatioPageHinkley
from streameval.pipeline.drift.river_detectors import RiverDetector
from streameval.pipeline.drift.spec import DETECTORS, build_detector

__all__ = [
    "DETECTORS",
    "DetectionReport",
    "DriftDetector",
    "FadingRatioPageHinkley",
    "PageHinkley",
    "PrequentialPageHinkley",
    "RandomDetector",
    "RiverDetector",
    "WindowRatioPageHinkley",
    "build_detector",
    "collect_alarms",
    "score_detections",
]
