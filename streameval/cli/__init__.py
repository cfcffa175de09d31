"""The ``streameval`` command line: the layer on top of the core and the Kafka layer."""

from streameval.cli.main import main

__all__ = ["main"]
