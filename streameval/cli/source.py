"""The ``--source-*`` options of ``worker`` and ``submit``: the user's own topics.

A source mapping (:mod:`streameval.agents.mapping`) comes from the config file's
``[source]`` section, each key overridden by its flag (``time_format`` by
``--source-time-format``). ``worker`` then runs the repartition
(:mod:`streameval.agents.source`) beside its agent; ``submit`` without ``--dataset``
defines an experiment over the mapping's stream.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

from streameval.cli.settings import FreeSection

#: Keys of ``[source]``, each also a ``--source-KEY`` flag, with its help.
SOURCE_KEYS: dict[str, str] = {
    "features_topic": "the user's topic of feature messages (read, never written)",
    "labels_topic": "the user's topic of label messages (read, never written)",
    "stream": "the stream id: a name (default: the features topic), or a JSON pointer",
    "feature_id": "instance id in a feature message: a JSON pointer, or key (default key)",
    "label_id": "instance id in a label message: a JSON pointer, or key (default key)",
    "feature_time": "event time of a feature message: a JSON pointer, or timestamp (Kafka's; "
    "default)",
    "label_time": "event time of a label message: a JSON pointer, or timestamp (default)",
    "time_format": "time fields: ms (epoch milliseconds, default), s, or iso (ISO-8601)",
    "label": "JSON pointer of the label in a label message",
    "features": "JSON pointer of the object whose fields are the features (default: the "
    "whole message, less the id, time and stream fields)",
    "include": "keep only these features (names, nested ones joined by .)",
    "exclude": "drop these features",
}
LISTS = ("include", "exclude")
SECTION = FreeSection("the user's topics, see `streameval worker --help`", object)


def add_source_options(p: argparse.ArgumentParser) -> None:
    """The ``--source-*`` flags (each a key of ``[source]``)."""
    g = p.add_argument_group(
        "your own topics (a source mapping; the config file's [source] section, per key)"
    )
    for key, text in SOURCE_KEYS.items():
        flag = "--source-" + key.replace("_", "-")
        if key in LISTS:
            g.add_argument(flag, action="append", default=None, metavar="NAME", help=text)
        else:
            g.add_argument(flag, default=None, metavar="VALUE", help=text)


def mapping_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~streameval.agents.mapping.SourceMapping` of ``[source]`` and the flags,
    or ``None`` when neither names one."""
    from streameval.agents.mapping import SourceMapping

    values, config = getattr(args, "file_sections", {}).get("source", ({}, None))
    values = dict(values)
    for key in SOURCE_KEYS:
        flag = getattr(args, "source_" + key, None)
        if flag is not None:
            values[key] = flag
    if not values:
        return None
    try:
        return SourceMapping.from_dict(values)
    except (TypeError, ValueError) as exc:
        where = f"{config.path} [source]" if config is not None else "--source-* flags"
        raise ValueError(f"{where}: {exc}") from None


def start_source(settings: Any, mapping: Any) -> threading.Thread:
    """Run the repartition of ``mapping`` in a thread; exit the process if it fails."""
    from streameval.agents.source import SourceRepartition
    from streameval.agents.topics import TopicNames

    names = TopicNames.for_prefix(settings.topic_prefix)
    repartition = SourceRepartition(
        settings.confluent_config(), mapping, names, group_id=f"streameval-source-{names.prefix}"
    )
    stop = threading.Event()

    def loop() -> None:
        try:
            repartition.run(stop)
        except Exception as exc:  # a source that cannot go on stops the worker, loudly
            print(f"streameval worker: source stopped: {exc}; exiting", file=sys.stderr, flush=True)
            os._exit(3)

    thread = threading.Thread(target=loop, name="streameval-source", daemon=True)
    thread.start()
    stream = mapping.stream_name or f"from {mapping.stream}"
    print(
        f"streameval worker: reading {mapping.features_topic} and {mapping.labels_topic} "
        f"into {names.features} and {names.labels} (stream {stream})",
        file=sys.stderr,
        flush=True,
    )
    return thread
