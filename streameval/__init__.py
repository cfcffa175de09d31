"""streameval: honest evaluation of stream classifiers under temporal dependence and delayed labels.

The core lives in :mod:`streameval.pipeline` (no Kafka), the Kafka layer in
:mod:`streameval.agents`, the topic schemas in :mod:`streameval.schemas` and the command
line in :mod:`streameval.cli`.
"""

__version__ = "0.1.0"
