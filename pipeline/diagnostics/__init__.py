"""Diagnostics of a stream before any learner runs: how temporally dependent are its labels."""

from streameval.pipeline.diagnostics.temporal import TemporalDependence, diagnose

__all__ = ["TemporalDependence", "diagnose"]
