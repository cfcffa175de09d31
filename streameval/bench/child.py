"""Entry of a child process: one configuration, one repetition.

The parent (:class:`streameval.bench.harness.Bench`) starts ``python -m
streameval.bench --child`` and writes the job as JSON on its stdin; the child
runs ``CHILDREN[job["kind"]]`` and prints the result, with its own peak RSS, as
one line tagged ``CHILD_TAG`` on stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from streameval.bench.harness import CHILD_TAG
from streameval.bench.inprocess import child_evaluate
from streameval.bench.kafka_runs import child_kafka_run, child_raw
from streameval.bench.measure import self_peak_rss
from streameval.bench.speed import child_evaluate_per_event, child_river_bare
from streameval.bench.target1 import child_river
from streameval.bench.target6 import child_kafka_curve
from streameval.bench.target_moa import child_capymoa, child_river_loop
from streameval.bench.target_s3 import child_kafka_filled

CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "evaluate": child_evaluate,
    "evaluate_per_event": child_evaluate_per_event,
    "river": child_river,
    "raw": child_raw,
    "kafka_run": child_kafka_run,
    "kafka_curve": child_kafka_curve,
    "kafka_filled": child_kafka_filled,
    "capymoa": child_capymoa,
    "river_loop": child_river_loop,
    "river_bare": child_river_bare,
}


def child_main() -> int:
    """Entry of a child: the job as JSON on stdin, the result as one tagged line on stdout."""
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    job = json.loads(sys.stdin.read())
    out = CHILDREN[job["kind"]](job)
    # a split run's second process adds its own peak: the two summed, shared pages twice
    out["peak_rss_bytes"] = self_peak_rss() + out.pop("helper_peak_rss_bytes", 0)
    sys.stdout.write(CHILD_TAG + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0
