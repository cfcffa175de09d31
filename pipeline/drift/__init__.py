"""Drift detection on a learner's loss stream, and scoring of the alarms.

* :mod:`~pipeline.drift.base` -- the :class:`DriftDetector` protocol (restart after an alarm);
* :mod:`~pipeline.drift.page_hinkley` -- Page-Hinkley on the losses or on a prequential
  error estimate (``prequential-error-fading-factors.txt``, sect. 5.1-5.2);
* :mod:`~pipeline.drift.ratio` -- Page-Hinkley on the ratio of a short- and a long-term
  error estimate (sect. 5.3, Algorithm 4, and its sliding-window twin);
* :mod:`~pipeline.drift.river_detectors` -- river's ADWIN and DDM;
* :mod:`~pipeline.drift.random_detector` -- random alarms, the DDM-random experiment
  (``temporal-dependence-evaluation-journal.txt``, sect. 6.9);
* :mod:`~pipeline.drift.spec` -- detectors from spec strings;
* :mod:`~pipeline.drift.evaluation` -- detection delay, misses and false alarms.
"""

from pipeline.drift.base import DriftDetector
from pipeline.drift.evaluation import DetectionReport, collect_alarms, score_detections
from pipeline.drift.page_hinkley import PageHinkley, PrequentialPageHinkley
from pipeline.drift.random_detector import RandomDetector
from pipeline.drift.ratio import FadingRatioPageHinkley, WindowRatioPageHinkley
from pipeline.drift.river_detectors import RiverDetector
from pipeline.drift.spec import DETECTORS, build_detector

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
