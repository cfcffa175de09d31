"""The pipeline's topics: names, layout and explicit creation.

Every topic is ``prefix + kind`` for the kinds in :data:`TOPIC_KINDS`. All of
them are keyed by stream id and created with the *same* partition count, so
they are co-partitioned: the features and labels of one stream land on the same
partition number, and so do its predictions, metrics, drift events and
checkpoints -- a worker that owns a partition owns whole streams. (A checkpoint record's
key is the stream id and where in the checkpoint it belongs, ``stream/slot/part``; it is
produced to the stream's partition all the same: :mod:`streameval.agents.checkpoint`.)

``experiments`` and ``checkpoints`` are compacted (``cleanup.policy=compact``):
only the latest definition / state per key matters.

Topics are created explicitly (auto-created topics on Tansu get 4 partitions,
on Apache Kafka ``num.partitions``), idempotently: a topic that already exists
is fine when its partition count matches, and a :class:`TopicMismatch` when it
does not (re-partitioning would move streams between partitions mid-run).

Tansu (the embedded broker, memory storage) notes, checked against Tansu
0.6.0-510f3e2: it accepts topic configs on ``CreateTopics`` and returns them
from ``DescribeConfigs``, but does not validate values, does not compact and drops the
connection on ``DeleteRecords`` --
every record of a "compacted" topic stays readable, so readers must treat
these topics as "last value per key wins" (which is their meaning anyway).
It accepts ``replication_factor=-1`` (broker default), used here by default.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streameval.schemas import KINDS

log = logging.getLogger(__name__)
#: librdkafka's own log lines of the admin client: through logging, never raw stderr (an
#: admin client destroyed with an event nobody served prints a line about it otherwise).
rdkafka_log = logging.getLogger(__name__ + ".librdkafka")

#: Every topic kind: the kinds that have a message schema (one list for both modules).
TOPIC_KINDS: tuple[str, ...] = KINDS
#: Kinds whose topics are compacted (latest value per key).
COMPACTED: frozenset[str] = frozenset({"experiments", "checkpoints"})
#: Kinds that must share one partition count (the input join).
CO_PARTITIONED: tuple[str, ...] = ("features", "labels")
#: Kinds a worker reads: the experiment definitions and the two input topics.
INPUT_KINDS: tuple[str, ...] = ("features", "labels", "experiments")
#: Kinds whose messages are a stream's numbered outputs.
OUTPUT_KINDS: tuple[str, ...] = ("predictions", "metrics", "drift")
#: The partitioner of every producer of the pipeline: Kafka's Java default (and aiokafka's,
#: Faust's), so a stream's messages land on the same partition number of every topic,
#: whichever client wrote them.
PARTITIONER: dict[str, str] = {"partitioner": "murmur2_random"}


class TopicError(RuntimeError):
    """Topics could not be created or checked."""


class TopicMismatch(TopicError):
    """An existing topic's layout differs from what the pipeline needs."""


@dataclass(frozen=True)
class TopicNames:
    """The full topic name of every kind for one prefix.

    >>> TopicNames.for_prefix("se.").features
    'se.features'
    """

    prefix: str
    features: str
    labels: str
    predictions: str
    metrics: str
    drift: str
    deadletter: str
    experiments: str
    checkpoints: str

    @classmethod
    def for_prefix(cls, prefix: str = "streameval.") -> TopicNames:
        """Names ``prefix + kind`` for every kind."""
        return cls(prefix, *(prefix + kind for kind in TOPIC_KINDS))

    def kinds(self, kinds: Iterable[str]) -> dict[str, str]:
        """``{full topic name: kind}`` for ``kinds``.

        >>> TopicNames.for_prefix("se.").kinds(["labels"])
        {'se.labels': 'labels'}
        """
        return {getattr(self, kind): kind for kind in kinds}

    def __iter__(self) -> Iterator[str]:
        """The full names, in :data:`TOPIC_KINDS` order."""
        return iter([getattr(self, kind) for kind in TOPIC_KINDS])


def topic_config(kind: str) -> dict[str, str]:
    """Topic-level configs for ``kind`` (compaction for experiments/checkpoints)."""
    if kind in COMPACTED:
        return {"cleanup.policy": "compact"}
    return {}


def _partition_counts(partitions: int | Mapping[str, int], kinds: Iterable[str]) -> dict[str, int]:
    if isinstance(partitions, int):
        counts = {kind: partitions for kind in kinds}
    else:
        default = partitions.get("default")
        counts = {}
        for kind in kinds:
            n = partitions.get(kind, default)
            if n is None:
                raise TopicError(f"no partition count for topic kind {kind!r}")
            counts[kind] = n
    for kind, n in counts.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise TopicError(f"partition count of {kind!r} must be an integer >= 1, got {n!r}")
    co = {counts[k] for k in CO_PARTITIONED if k in counts}
    if len(co) > 1:
        raise TopicError(
            f"features and labels must be co-partitioned (same count), got "
            f"{ {k: counts[k] for k in CO_PARTITIONED} }"
        )
    return counts


def ensure_topics(
    admin_config: dict[str, Any],
    partitions: int | Mapping[str, int] = 4,
    *,
    prefix: str = "streameval.",
    kinds: Iterable[str] = TOPIC_KINDS,
    replication_factor: int = -1,
    timeout: float = 15.0,
) -> TopicNames:
    """Create the pipeline's topics if missing and check the existing ones.

    ``admin_config`` is a confluent-kafka config (at least ``bootstrap.servers``;
    :meth:`~streameval.agents.config.KafkaSettings.confluent_config` gives one).
    ``partitions`` is one count for every topic, or ``{kind: count}`` with an
    optional ``"default"``; features and labels must get the same count.
    ``replication_factor=-1`` asks for the broker's default.

    Returns the :class:`TopicNames`. Raises :class:`TopicMismatch` listing every
    existing topic whose partition count differs, :class:`TopicError` on other
    failures (including a cluster that does not answer within ``timeout``).
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    kinds = tuple(kinds)
    unknown = [k for k in kinds if k not in TOPIC_KINDS]
    if unknown:
        raise TopicError(f"unknown topic kinds {unknown}; known: {', '.join(TOPIC_KINDS)}")
    counts = _partition_counts(partitions, kinds)
    names = TopicNames.for_prefix(prefix)
    wanted = {getattr(names, kind): kind for kind in kinds}
    admin = AdminClient({"logger": rdkafka_log, **admin_config})
    existing = _partitions_of(admin, list(wanted), timeout)

    to_create = [
        NewTopic(
            name,
            num_partitions=counts[kind],
            replication_factor=replication_factor,
            config=topic_config(kind),
        )
        for name, kind in wanted.items()
        if name not in existing
    ]
    if to_create:
        futures = admin.create_topics(to_create, request_timeout=timeout, operation_timeout=timeout)
        failures = []
        for name, fut in futures.items():
            try:
                fut.result()
                log.info("created topic %s (%d partitions)", name, counts[wanted[name]])
            except KafkaException as exc:
                err = exc.args[0] if exc.args else exc
                if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue  # created concurrently: checked below
                failures.append(f"{name}: {err}")
        if failures:
            raise TopicError("cannot create topics: " + "; ".join(failures))

    # the topics found are described already: only those just created are waited for
    made = [t.topic for t in to_create]
    actual = {**existing, **(_wait_for_metadata(admin, made, timeout) if made else {})}
    mismatches = [
        f"{name} has {actual[name]} partitions, expected {counts[kind]}"
        for name, kind in wanted.items()
        if actual[name] != counts[kind]
    ]
    if mismatches:
        raise TopicMismatch(
            "existing topics do not match the pipeline's layout: "
            + "; ".join(mismatches)
            + ". Delete them (their data is lost), or use another STREAMEVAL_TOPIC_PREFIX, "
            "or set STREAMEVAL_PARTITIONS to the existing count."
        )
    _warn_uncompacted(admin, {n: k for n, k in wanted.items() if k in COMPACTED}, timeout)
    return names


def _wait_for_metadata(admin: Any, topics: list[str], timeout: float) -> dict[str, int]:
    """Partition count of each topic, waiting until all of them show up in metadata."""
    deadline = time.monotonic() + timeout
    while True:
        found = _partitions_of(admin, topics, max(0.5, deadline - time.monotonic()))
        missing = [t for t in topics if t not in found]
        if not missing:
            return found
        if time.monotonic() >= deadline:
            raise TopicError(f"topics not visible in metadata after {timeout:.0f} s: {missing}")
        time.sleep(0.1)


def _partitions_of(admin: Any, topics: list[str], timeout: float) -> dict[str, int]:
    """The partition count of each of ``topics`` that exists (with partitions).

    Asks for these topics' metadata only (``describe_topics``), not the whole cluster's:
    on the embedded broker holding 520 topics a new client's full listing took 21 ms, its
    description of three of them 7-8 ms; a cluster of thousands of topics lists them for
    longer still. A topic the description gives with an error (unknown, no
    leader yet, not authorised) is missing, as one listed with an error is; a broker that
    cannot describe topics is asked for the listing, and so is a cluster that did not
    answer (for a second more): the listing's error names what the connection met
    (refused, unknown host), the description's only that it timed out.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicCollection

    # a broker that cannot describe topics; a cluster that does not answer
    cannot = {KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION}
    silent = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
    futures = admin.describe_topics(TopicCollection(topics), request_timeout=timeout)
    found = {}
    for name, future in futures.items():
        try:
            partitions = future.result().partitions
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            code = error.code() if isinstance(error, KafkaError) else None
            if code in cannot:
                return _listed_partitions_of(admin, topics, timeout)
            if code in silent:  # the listing's error names what the connection met
                return _listed_partitions_of(admin, topics, min(timeout, 1.0))
            continue  # unknown, or not ready yet (no leader): missing, as in a listing
        if partitions:
            found[name] = len(partitions)
    return found


def _listed_partitions_of(admin: Any, topics: list[str], timeout: float) -> dict[str, int]:
    """:func:`_partitions_of` from the listing of the cluster's every topic."""
    from confluent_kafka import KafkaException

    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise TopicError(f"cannot list topics: {exc.args[0] if exc.args else exc}") from exc
    return {
        name: len(md.topics[name].partitions)
        for name in topics
        if name in md.topics and md.topics[name].error is None and md.topics[name].partitions
    }


def _warn_uncompacted(admin: Any, compacted: dict[str, str], timeout: float) -> None:
    """Log a warning for a compacted-kind topic whose ``cleanup.policy`` lacks compaction."""
    if not compacted:
        return
    from confluent_kafka.admin import ConfigResource

    try:
        futures = admin.describe_configs(
            [ConfigResource("topic", name) for name in compacted], request_timeout=timeout
        )
        for resource, fut in futures.items():
            entries = fut.result()
            policy = entries.get("cleanup.policy")
            value = policy.value if policy is not None else None
            if value is not None and "compact" not in value:
                log.warning(
                    "topic %s has cleanup.policy=%s; the pipeline expects compact",
                    resource.name,
                    value,
                )
    except Exception as exc:  # describe_configs is best effort (ACLs, old brokers)
        log.debug("cannot check cleanup.policy: %s", exc)


def messages_to_end(
    consumer: Any, ends: dict[tuple[str, int], int], *, timeout: float, idle: float, what: str
) -> Iterator[Any]:
    """Yield the messages of ``consumer``'s assigned partitions until all are read.

    ``ends`` maps each assigned ``(topic, partition)`` to its high watermark; a partition
    is done once a message at or past ``end - 1`` was read. Tansu's watermarks count
    record batches, not records (see the module docstring), so reaching them is not
    enough: reading stops when every partition is done *and* no message came for
    ``idle`` seconds. Raises :class:`TimeoutError` naming ``what`` after ``timeout``
    seconds in all. Error messages from the consumer are skipped.
    """
    begin = last = time.monotonic()
    while True:
        now = time.monotonic()
        if now - begin > timeout:
            raise TimeoutError(f"{what} not read to the end in {timeout} s")
        if not ends and now - last > idle:
            return
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        last = time.monotonic()
        where = (msg.topic(), msg.partition())
        if msg.offset() + 1 >= ends.get(where, 0):
            ends.pop(where, None)
        yield msg
