"""Streams: real and synthetic datasets, shuffles, label delays and the replay schedule.

* :mod:`~pipeline.streams.base` -- :class:`Instance`, :class:`Dataset`;
* :mod:`~pipeline.streams.datasets` -- the real datasets and :func:`load`;
* :mod:`~pipeline.streams.synthetic` -- generators with known drift points;
* :mod:`~pipeline.streams.shuffle` -- the shuffles of the temporal-dependence paper;
* :mod:`~pipeline.streams.delay` -- label delay models and :func:`parse_delay`;
* :mod:`~pipeline.streams.schedule` -- :func:`replay_schedule`.
"""

from pipeline.streams.base import Dataset, DatasetError, Instance
from pipeline.streams.datasets import load
from pipeline.streams.delay import (
    DelayModel,
    EventTimeDelay,
    FeatureTimeDelay,
    InstanceDelay,
    TimeDelay,
    parse_delay,
)
from pipeline.streams.schedule import replay_schedule

__all__ = [
    "Dataset",
    "DatasetError",
    "DelayModel",
    "EventTimeDelay",
    "FeatureTimeDelay",
    "Instance",
    "InstanceDelay",
    "TimeDelay",
    "load",
    "parse_delay",
    "replay_schedule",
]
