"""Streams: real and synthetic datasets, shuffles, label delays and the replay schedule.

* :mod:`~streameval.pipeline.streams.base` -- :class:`Instance`, :class:`Dataset`;
* :mod:`~streameval.pipeline.streams.datasets` -- the real datasets and :func:`load`;
* :mod:`~streameval.pipeline.streams.synthetic` -- generators with known drift points;
* :mod:`~streameval.pipeline.streams.shuffle` -- the shuffles of the temporal-dependence paper;
* :mod:`~streameval.pipeline.streams.delay` -- label delay models and :func:`parse_delay`;
* :mod:`~streameval.pipeline.streams.schedule` -- :func:`replay_schedule`.
"""

from streameval.pipeline.streams.base import Dataset, DatasetError, Instance
from streameval.pipeline.streams.datasets import load
from streameval.pipeline.streams.delay import (
    DelayModel,
    EventTimeDelay,
    FeatureTimeDelay,
    InstanceDelay,
    TimeDelay,
    parse_delay,
)
from streameval.pipeline.streams.schedule import replay_schedule

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
