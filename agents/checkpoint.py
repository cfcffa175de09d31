"""Authenticated checkpoints of stream state on a Kafka topic, and when a worker writes them.

A checkpoint is the pickle of a :class:`~streameval.pipeline.runner.StreamRunner`.
Unpickling runs code, so nothing read back from a topic is unpickled before
its HMAC-SHA256 (key from ``STREAMEVAL_CHECKPOINT_KEY``) has been verified: a
tampered or foreign checkpoint is refused with :class:`CheckpointError`.

Kafka messages are limited in size, so a checkpoint is written as numbered
parts (``part``/``parts``, base64 data) under the stream's key; the newest
complete checkpoint (highest ``id``) of a stream wins. The topic is compacted
where the broker supports it (the embedded Tansu broker keeps everything,
which only costs restore time).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import pickle
import secrets
import time
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from streameval.agents.codec import parse
from streameval.agents.topics import messages_to_end
from streameval.pipeline.runner import StreamRunner

log = logging.getLogger(__name__)

KEY_ENV = "STREAMEVAL_CHECKPOINT_KEY"
PART_BYTES = 256 * 1024


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be trusted or read."""


#: Fewest bytes of a checkpoint key (HMAC-SHA256's block is 64, its output 32).
MIN_KEY_BYTES = 32


def checkpoint_key(environ: Mapping[str, str] | None = None, *, ephemeral: bool = False) -> bytes:
    """The HMAC key: ``STREAMEVAL_CHECKPOINT_KEY``, of at least :data:`MIN_KEY_BYTES` bytes.

    Without one a worker's checkpoints could never be resumed (each process would sign
    with its own random key, and its successor would refuse them): that is refused with a
    ``ValueError`` unless ``ephemeral`` (``worker --ephemeral``) says so on purpose.

    >>> checkpoint_key({KEY_ENV: "k" * 32})[:4]
    b'kkkk'
    >>> checkpoint_key({KEY_ENV: "short"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: STREAMEVAL_CHECKPOINT_KEY is 5 bytes: use at least 32 ...
    """
    env = os.environ if environ is None else environ
    value = env.get(KEY_ENV, "").strip()
    if value:
        key = value.encode("utf-8")
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(
                f"{KEY_ENV} is {len(key)} bytes: use at least {MIN_KEY_BYTES} "
                "(e.g. `openssl rand -hex 32`)"
            )
        return key
    if not ephemeral:
        raise ValueError(
            f"{KEY_ENV} is not set: a worker without it could never resume from its "
            "checkpoints; set it (e.g. `openssl rand -hex 32`), or pass --ephemeral"
        )
    log.warning(
        "--ephemeral: checkpoints are signed with a random key of this process; a restarted "
        "worker cannot resume from them and replays its streams"
    )
    return secrets.token_bytes(MIN_KEY_BYTES)


def sign(blob: bytes, key: bytes) -> str:
    return hmac.new(key, blob, hashlib.sha256).hexdigest()


def dumps(state: Any, key: bytes) -> tuple[bytes, str]:
    """Pickle ``state``; return the bytes and their signature."""
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    return blob, sign(blob, key)


def loads(blob: bytes, signature: str, key: bytes) -> Any:
    """Unpickle ``blob`` only if ``signature`` is its HMAC under ``key``."""
    # compare bytes: compare_digest refuses str with non-ASCII characters (TypeError), and
    # a signature read from a topic may be anything
    given = signature.encode("utf-8", "replace") if isinstance(signature, str) else b""
    if not hmac.compare_digest(sign(blob, key).encode("ascii"), given):
        raise CheckpointError(
            "checkpoint refused: its HMAC does not match (tampered, or written with "
            f"another {KEY_ENV}); nothing was unpickled"
        )
    return pickle.loads(blob)


def to_messages(stream: str, checkpoint_id: int, blob: bytes, signature: str) -> list[dict]:
    """The parts of one checkpoint, as JSON-able messages."""
    parts = [blob[i : i + PART_BYTES] for i in range(0, len(blob), PART_BYTES)] or [b""]
    return [
        {
            "stream": stream,
            "id": checkpoint_id,
            "part": i,
            "parts": len(parts),
            "hmac": signature,
            "ts": time.time(),
            "data": base64.b64encode(chunk).decode("ascii"),
        }
        for i, chunk in enumerate(parts)
    ]


@dataclass
class _Assembly:
    id: int
    parts: int
    hmac: str
    chunks: dict[int, bytes] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return len(self.chunks) == self.parts


class CheckpointReader:
    """Collect checkpoint parts in topic order; keep the newest complete one per stream."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, int], _Assembly] = {}
        self.latest: dict[str, _Assembly] = {}

    def add(self, message: dict[str, Any]) -> None:
        """Take one part; ``ValueError`` (or ``KeyError``, ``TypeError``) for a malformed one."""
        stream, cid = str(message["stream"]), int(message["id"])
        part, parts = int(message["part"]), int(message["parts"])
        asm = self._open.get((stream, cid))
        if asm is None or asm.hmac != str(message["hmac"]):
            # a new checkpoint, or the same id written again after a worker died before
            # the broker had all the parts of its first writing (those parts are dropped)
            asm = _Assembly(cid, parts, str(message["hmac"]))
        if not 0 <= part < asm.parts or parts != asm.parts:
            raise ValueError(f"checkpoint {stream!r}/{cid}: part {part} of {parts} does not fit")
        self._open[(stream, cid)] = asm
        asm.chunks[part] = base64.b64decode(message["data"], validate=True)
        if asm.complete:
            del self._open[(stream, cid)]
            best = self.latest.get(stream)
            if best is None or asm.id > best.id:
                self.latest[stream] = asm

    def load(self, stream: str, key: bytes) -> Any:
        asm = self.latest[stream]
        blob = b"".join(asm.chunks[i] for i in range(asm.parts))
        return loads(blob, asm.hmac, key)


def read_checkpoints(
    consumer_config: dict[str, Any],
    topic: str,
    timeout: float = 60.0,
    idle: float = 1.5,
    *,
    reader: CheckpointReader | None = None,
    start: dict[int, int] | None = None,
) -> tuple[CheckpointReader, dict[int, int]]:
    """Read a checkpoints topic to its end (no consumer group): from its beginning, or
    from the offsets ``start`` (partition -> next offset) into ``reader``.

    Returns the reader and the next offset of every partition read, for the next call.
    The end is where the broker's high watermark says *and* no message came for
    ``idle`` seconds: the embedded Tansu broker reports watermarks that count
    record batches, not records, so the watermark alone stops too early.
    """
    from confluent_kafka import Consumer, TopicPartition

    reader = CheckpointReader() if reader is None else reader
    positions = dict(start or {})
    conf = {
        **consumer_config,
        "group.id": "streameval-checkpoint-reader",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(conf)
    try:
        meta = consumer.list_topics(topic, timeout=10)
        partitions = meta.topics[topic].partitions if topic in meta.topics else {}
        ends: dict[tuple[str, int], int] = {}
        assignment = []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            first = max(low, positions.get(p, low))
            if high > first:
                ends[(topic, p)] = high
                assignment.append(TopicPartition(topic, p, first))
        if not assignment:
            return reader, positions
        consumer.assign(assignment)
        try:
            for msg in messages_to_end(
                consumer, ends, timeout=timeout, idle=idle, what=f"checkpoint topic {topic}"
            ):
                positions[msg.partition()] = msg.offset() + 1
                try:
                    reader.add(parse(msg.value()))
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning(
                        "skipping a malformed checkpoint part at offset %s: %s", msg.offset(), exc
                    )
        except TimeoutError as exc:
            raise CheckpointError(str(exc)) from exc
        return reader, positions
    finally:
        consumer.close()


class StreamCheckpoints:
    """A worker's checkpointing: which streams changed since the last checkpoint, when the
    next one is due, the parts of each stream's checkpoint, and the restore of a stream.

    Parameters
    ----------
    key
        The HMAC key checkpoints are signed and verified with.
    every
        A checkpoint is due after this many input events.
    enabled
        False for a worker that is never restarted (:mod:`streameval.agents.inline`): it
        writes no checkpoint.
    """

    def __init__(self, key: bytes, every: int = 20_000, *, enabled: bool = True) -> None:
        self.key = key
        self.every = every
        self.enabled = enabled
        self.dirty: set[str] = set()  # streams changed since the last checkpoint
        self.ids: dict[str, int] = {}  # id of each stream's last checkpoint
        self.since = 0  # input events since the last checkpoint
        self.reader: CheckpointReader | None = None
        self.positions: dict[int, int] = {}  # next offset of each checkpoints partition

    def read(self, consumer_config: dict[str, Any], topic: str) -> int:
        """Read the checkpoints topic; return how many streams have a checkpoint."""
        self.reader, self.positions = read_checkpoints(consumer_config, topic)
        return len(self.reader.latest)

    def refresh(
        self, consumer_config: dict[str, Any], topic: str, held: Container[str], idle: float = 0.5
    ) -> set[str]:
        """Read what was written to the checkpoints topic since the last read: the
        checkpoints of streams another worker owned until it left (a rebalance gave their
        partitions to this one). Checkpoints of the streams ``held`` in memory here are
        dropped (they are this worker's own). Returns the streams with one to restore."""
        reader, self.positions = read_checkpoints(
            consumer_config, topic, idle=idle, reader=self.reader, start=self.positions
        )
        self.reader = reader
        for stream in [s for s in reader.latest if s in held]:
            del reader.latest[stream]
        return set(reader.latest)

    def take(self, stream: str) -> StreamRunner | None:
        """``stream``'s runner from its newest checkpoint (once), else ``None``.

        Raises :class:`CheckpointError` for a checkpoint whose HMAC does not verify
        or that holds no stream runner.
        """
        reader = self.reader
        if reader is None or stream not in reader.latest:
            return None
        checkpoint_id = reader.latest[stream].id
        runner = reader.load(stream, self.key)
        del reader.latest[stream]
        if not isinstance(runner, StreamRunner):
            raise CheckpointError(f"checkpoint of {stream!r} does not hold a stream runner")
        self.ids[stream] = checkpoint_id
        return runner

    def changed(self, stream: str, events: int = 0) -> None:
        """``stream`` changed (by ``events`` input events): it goes into the next checkpoint."""
        self.dirty.add(stream)
        self.since += events

    def due(self) -> bool:
        return self.since >= self.every

    def soon(self) -> None:
        """Make the next checkpoint due now (a stream's last output went out)."""
        self.since = max(self.since, self.every)

    def parts(self, stream: str, runner: StreamRunner) -> list[dict[str, Any]]:
        """The messages of ``stream``'s next checkpoint (numbered after its last one)."""
        checkpoint_id = self.ids.get(stream, 0) + 1
        blob, signature = dumps(runner, self.key)
        self.ids[stream] = checkpoint_id
        return to_messages(stream, checkpoint_id, blob, signature)

    def saved(self) -> None:
        """Every changed stream is in a delivered checkpoint."""
        self.dirty.clear()
        self.since = 0
