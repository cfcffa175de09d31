"""Wait for one stream's results on the metrics topic; write its results JSON and HTML report.

The Kafka worker publishes the results document of a finished stream on the
``metrics`` topic as ``{"stream", "kind": "results", "n_labelled", "ts",
"results"}``. This job reads that topic from the beginning with a plain
confluent-kafka consumer (fresh group, no offsets committed) until that
message for ``--stream`` arrives, then writes ``OUT/STREAM.json`` (the same
document ``streameval evaluate --json`` writes) and the report
``OUT/STREAM-report/report.html``.

Connection settings come from the ``KAFKA_*`` environment variables
(:class:`streameval.agents.config.KafkaSettings`), as for every streameval command.
Exit status: 0 with the files written, 1 when ``--timeout`` passes first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def wait_for_results(stream: str, timeout: float) -> dict[str, Any] | None:
    """The results document of ``stream`` from the metrics topic, or ``None`` at the timeout;
    raises :class:`~streameval.agents.codec.StreamFailed` when the worker says it failed."""
    from confluent_kafka import Consumer
    from streameval.agents.codec import parse, stream_outcome
    from streameval.agents.config import KafkaSettings
    from streameval.agents.topics import TopicNames

    settings = KafkaSettings.from_env()
    topic = TopicNames.for_prefix(settings.topic_prefix).metrics
    consumer = Consumer(
        {
            **settings.confluent_config(),
            "group.id": f"streameval-collect-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            try:
                results = stream_outcome(parse(msg.value()), stream)
            except ValueError:  # not JSON (StreamFailed is no ValueError: it goes up)
                continue
            if results is not None:
                return results
        return None
    finally:
        consumer.close()


def safe_name(stream: str) -> str:
    """A file name for a stream id (``sea[n=100]`` -> ``sea_n_100_``).

    >>> safe_name("electricity"), safe_name("sea[n=100]")
    ('electricity', 'sea_n_100_')
    """
    return re.sub(r"[^A-Za-z0-9._-]", "_", stream)


def main(argv: Sequence[str] | None = None) -> int:
    """``collect_results.py --stream ID [--out DIR] [--timeout S]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stream", required=True, help="stream id of the experiment")
    parser.add_argument("--out", default="/results", help="output directory (default /results)")
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds to wait (default 3600)"
    )
    args = parser.parse_args(argv)
    from streameval.agents.codec import StreamFailed

    try:
        results = wait_for_results(args.stream, args.timeout)
    except StreamFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    if results is None:
        print(f"no results for stream {args.stream!r} within {args.timeout:.0f} s", file=sys.stderr)
        return 1
    from streameval.pipeline.report.html import write_report

    from streameval.cli.experiment import print_results

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = safe_name(args.stream)
    path = out / f"{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    report = write_report(results, out / f"{name}-report")
    print_results(results)
    print(f"results written to {path}\nreport written to {report}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
