"""The records of the checkpoints topic: their format and keys, and reading them back.

A checkpoint of a stream is a *manifest* (its pickle's HMAC and the list of the pickle's
chunks, in numbered parts of base64 data, keyed ``stream/slot/part``) and the *values* it
names (the chunks, and the large strings or bytes of the state, by SHA-256, keyed
``stream/value/sha256/part``); a manifest without ``chunked`` holds the pickle itself.
Why, and how the writer uses the keys: :mod:`streameval.agents.checkpoint`. A tombstone (a null
value) deletes a key where the broker compacts. :class:`CheckpointReader` takes the
records in topic order and keeps, per stream, the newest complete manifest (highest
``id``) and the values it names; :func:`read_checkpoints` reads a topic to its end.
"""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from streameval.agents.codec import parse
from streameval.agents.snapshot import CheckpointError, Large, joined_loads, stored
from streameval.agents.topics import messages_to_end

log = logging.getLogger(__name__)

#: Most bytes of data (before base64) in one record.
PART_BYTES = 256 * 1024


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)] or [b""]


def to_messages(
    stream: str,
    checkpoint_id: int,
    blob: bytes,
    signature: str,
    *,
    slot: int = 0,
    refs: list[str] | None = None,
    chunks: list[str] | None = None,
) -> list[dict]:
    """The manifest parts of one checkpoint, as JSON-able messages (keys: :func:`part_key`).

    ``signature`` is the pickle's HMAC. With ``chunks`` (the SHA-256 of the pickle's
    content-defined chunks, in order, each written as a value) the parts carry that list
    (32 bytes a chunk) instead of the pickle: ``blob`` is ignored. ``refs`` (in part 0)
    lists the SHA-256 of every value the checkpoint needs: what a reader keeps for it and
    fetches again if missing.
    """
    if chunks is not None:
        blob = b"".join(bytes.fromhex(d) for d in chunks)
    parts = _chunks(blob)
    messages = [
        {
            "stream": stream,
            "id": checkpoint_id,
            "slot": slot,
            "part": i,
            "parts": len(parts),
            "hmac": signature,
            "ts": time.time(),
            "data": base64.b64encode(chunk).decode("ascii"),
        }
        for i, chunk in enumerate(parts)
    ]
    messages[0]["refs"] = sorted(refs or [])
    if chunks is not None:
        for m in messages:
            m["chunked"] = True
    return messages


def value_messages(stream: str, digest: str, value: str | bytes) -> list[dict]:
    """The parts of one large value of ``stream`` (keys: :func:`value_key`)."""
    tag, data = stored(value)
    parts = _chunks(data)
    return [
        {
            "stream": stream,
            "value": digest,
            "type": tag,
            "part": i,
            "parts": len(parts),
            "ts": time.time(),
            "data": base64.b64encode(chunk).decode("ascii"),
        }
        for i, chunk in enumerate(parts)
    ]


def part_key(stream: str, slot: int, part: int) -> str:
    """The key of a manifest part: ``stream/slot/part``.

    >>> part_key("elec", 1, 0)
    'elec/1/0'
    """
    return f"{stream}/{slot}/{part}"


def value_key(stream: str, digest: str, part: int) -> str:
    """The key of a value part: ``stream/value/sha256/part``."""
    return f"{stream}/value/{digest}/{part}"


def key_of(message: dict[str, Any]) -> str:
    """The key of a checkpoint message (a manifest or a value part)."""
    if "value" in message:
        return value_key(message["stream"], message["value"], message["part"])
    return part_key(message["stream"], message.get("slot", 0), message["part"])


@dataclass
class _Assembly:
    """A manifest (or a large value) being read part by part."""

    id: int
    parts: int
    hmac: str
    chunks: dict[int, bytes] = field(default_factory=dict)
    slot: int | None = None
    refs: list[str] = field(default_factory=list)
    chunked: bool = False  # the parts hold the pickle's chunk list, not the pickle
    done_at: int = 0  # the reader's count of records when it completed

    @property
    def complete(self) -> bool:
        return len(self.chunks) == self.parts

    def data(self) -> bytes:
        return b"".join(self.chunks[i] for i in range(self.parts))

    def take(self, message: dict[str, Any], what: str) -> None:
        part, parts = int(message["part"]), int(message["parts"])
        if not 0 <= part < self.parts or parts != self.parts:
            raise ValueError(f"checkpoint {what}: part {part} of {parts} does not fit")
        self.chunks[part] = base64.b64decode(message["data"], validate=True)


@dataclass
class _Value:
    """A large value read whole: its type tag and bytes, parts, when it was completed."""

    stored: Large
    parts: int
    done_at: int


class CheckpointReader:
    """Collect checkpoint records in topic order: the newest complete manifest per stream
    and the large values the manifests name."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, int], _Assembly] = {}
        self.latest: dict[str, _Assembly] = {}
        self._open_values: dict[tuple[str, str], _Assembly] = {}
        self.values: dict[str, dict[str, _Value]] = {}  # stream -> sha256 -> value
        self.count = 0  # records taken

    def add(self, message: dict[str, Any]) -> None:
        """Take one record; ``ValueError`` (or ``KeyError``, ``TypeError``) for a malformed one."""
        self.count += 1
        if "value" in message:
            return self._add_value(message)
        stream, cid = str(message["stream"]), int(message["id"])
        asm = self._open.get((stream, cid))
        if asm is None or asm.hmac != str(message["hmac"]):
            # a new checkpoint, or the same id written again after a worker died before
            # the broker had all the parts of its first writing (those parts are dropped)
            asm = _Assembly(cid, int(message["parts"]), str(message["hmac"]))
        asm.take(message, f"{stream!r}/{cid}")
        if int(message["part"]) == 0:
            asm.slot = message.get("slot")
            asm.refs = [str(r) for r in message.get("refs") or []]
            asm.chunked = bool(message.get("chunked"))
        self._open[(stream, cid)] = asm
        if asm.complete:
            del self._open[(stream, cid)]
            asm.done_at = self.count
            best = self.latest.get(stream)
            if best is None or asm.id > best.id:
                self.latest[stream] = asm
        return None

    def _add_value(self, message: dict[str, Any]) -> None:
        stream, digest = str(message["stream"]), str(message["value"])
        tag = str(message["type"])
        asm = self._open_values.get((stream, digest))
        if asm is None or asm.hmac != tag:
            asm = _Assembly(0, int(message["parts"]), tag)
        asm.take(message, f"value {digest[:12]} of {stream!r}")
        self._open_values[(stream, digest)] = asm
        if asm.complete:
            del self._open_values[(stream, digest)]
            value = _Value((tag, asm.data()), asm.parts, self.count)
            self.values.setdefault(stream, {})[digest] = value

    def deleted(self, key: str) -> None:
        """A tombstone: a value no checkpoint names any more is gone (parts: nothing to do)."""
        head, sep, _ = key.rpartition("/")
        stream, _, digest = head.rpartition("/value/")
        if sep and stream and digest:
            self.values.get(stream, {}).pop(digest, None)

    def missing(self, stream: str) -> list[str]:
        """The values ``stream``'s newest checkpoint names that were not read."""
        have = self.values.get(stream, {})
        return [d for d in self.latest[stream].refs if d not in have]

    def prune(self) -> None:
        """Forget the values that the newest checkpoint of their stream does not name,
        but those read after it (a checkpoint being written may name them)."""
        for stream, values in list(self.values.items()):
            newest = self.latest.get(stream)
            if newest is None:
                continue
            named = set(newest.refs)
            named.update(r for (s, _), a in self._open.items() if s == stream for r in a.refs)
            for digest, value in list(values.items()):
                if digest not in named and value.done_at < newest.done_at:
                    del values[digest]

    def drop(self, stream: str) -> None:
        """Forget ``stream`` (restored, or held by this worker)."""
        self.latest.pop(stream, None)
        self.values.pop(stream, None)

    def load(self, stream: str, key: bytes) -> Any:
        """``stream``'s newest checkpoint, unpickled once its HMAC verified
        (:class:`CheckpointError` if not, or if a value it needs was not read)."""
        asm = self.latest[stream]
        large = {d: v.stored for d, v in self.values.get(stream, {}).items()}
        blob = asm.data()
        if asm.chunked:  # the pickle is the join of the chunks the list names
            digests = [blob[i : i + 32].hex() for i in range(0, len(blob), 32)]
            lost = [d[:12] for d in digests if d not in large]
            if lost:
                raise CheckpointError(f"checkpoint chunks {lost[:3]}... are not on the topic")
            blob = b"".join(large[d][1] for d in digests)
        return joined_loads(blob, asm.hmac, key, large)


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
                    if msg.value() is None:  # a tombstone
                        reader.deleted((msg.key() or b"").decode("utf-8", "replace"))
                    else:
                        reader.add(parse(msg.value()))
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning(
                        "skipping a malformed checkpoint part at offset %s: %s", msg.offset(), exc
                    )
        except TimeoutError as exc:
            raise CheckpointError(str(exc)) from exc
        reader.prune()
        return reader, positions
    finally:
        consumer.close()
