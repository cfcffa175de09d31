"""Authenticated checkpoints of stream state on a Kafka topic, and when a worker writes them.

A checkpoint is the pickle of a :class:`~streameval.pipeline.runner.StreamRunner`.
Unpickling runs code, so nothing read back from a topic is unpickled before
its HMAC-SHA256 (key from ``STREAMEVAL_CHECKPOINT_KEY``) has been verified: a
tampered or foreign checkpoint is refused with :class:`CheckpointError`.

Growth with change, not size. A stream's state can be large and mostly unchanging
(pending instances with 1 MB text features; the ingest guard's window of 100,000 labelled
ids, of which a checkpoint adds and drops a few thousand): a checkpoint that rewrote all of
it each time made the topic grow by *checkpoints x state size* (a few hundred such
instances took it to ~0.9 GB). So a checkpoint is incremental, in two ways:

* its large values: the pickle leaves out every ``str``/``bytes`` of at least
  :data:`~streameval.agents.snapshot.LARGE_BYTES` and names it by its SHA-256
  (:mod:`streameval.agents.snapshot`);
* the pickle itself: it is cut into content-defined chunks of ~8-20 KiB
  (:mod:`streameval.agents.chunking`), each named by its SHA-256, and the manifest is the
  list of those names; an unchanged stretch of the state gives the same chunks again.

A value (large value or chunk) is written once, as *value* records; later checkpoints that
still hold it only name it again. What a checkpoint writes is what changed since the
stream's previous checkpoint (the chunks it touched, the new large values) plus its
manifest (32 bytes per chunk). The HMAC is over the whole pickle, verified once the
chunks are joined, before anything is unpickled.

Why this and not only compaction: the embedded Tansu broker does not compact, and it
refuses ``DeleteRecords`` (it closes the connection), so nothing can trim its topic; on
Apache Kafka, compaction of a topic that holds whole states still rewrites them. Both
brokers get the same bounded growth; compaction, where the broker does it, then removes
what no checkpoint needs any more:

* the *manifest* (the chunk list and the pickle's HMAC, in numbered ``part``/``parts``
  of base64 data) of a stream goes under the key ``stream/<slot>/<part>``, where the
  slot alternates between 0 and 1 with each confirmed checkpoint: a checkpoint being
  written never replaces the parts of the last complete one, so compaction can never
  leave a stream without a complete checkpoint; once the new one is confirmed, the other
  slot's parts are deleted with tombstones (null values);
* a value goes under ``stream/value/<sha256>/<part>``, never replaced; once no confirmed
  checkpoint of the stream names it, its keys get tombstones.

Every record of a stream goes to the stream's partition (``murmur2(stream)``, as keyed
by the stream alone), so its values precede its manifest in the order they were written.
A reader keeps the newest complete manifest (highest ``id``) per stream and the values it
names. A value that is missing (read from a point after it) makes the topic be read again
from its beginning; still missing, the checkpoint is refused.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import secrets
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from streameval.agents.checkpoint_topic import (
    CheckpointReader,
    key_of,
    part_key,
    read_checkpoints,
    to_messages,
    value_key,
    value_messages,
)
from streameval.agents.chunking import split
from streameval.agents.snapshot import KEY_ENV, CheckpointError, sign, split_dumps, verify
from streameval.pipeline.runner import CHECKPOINT_FORMAT, StreamRunner

log = logging.getLogger(__name__)

#: Re-exported: what a checkpoint is made of (:mod:`streameval.agents.checkpoint_topic`).
__all__ = ["KEY_ENV", "CheckpointError", "CheckpointReader", "read_checkpoints", "sign"]
__all__ += ["StreamCheckpoints", "checkpoint_key", "dumps", "loads", "to_messages"]


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


def dumps(state: Any, key: bytes) -> tuple[bytes, str]:
    """Pickle ``state`` whole; return the bytes and their signature."""
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    return blob, sign(blob, key)


def loads(blob: bytes, signature: str, key: bytes) -> Any:
    """Unpickle ``blob`` only if ``signature`` is its HMAC under ``key``."""
    verify(blob, signature, key)
    return pickle.loads(blob)


@dataclass
class _Written:
    """What the checkpoints topic holds of one stream, as its writer knows it."""

    slot: int = 1  # slot of the last confirmed manifest (the next one goes to the other)
    parts: dict[int, int] = field(default_factory=lambda: {0: 0, 1: 0})  # parts per slot
    values: dict[str, int] = field(default_factory=dict)  # sha256 -> parts, on the topic
    hashes: dict[int, tuple[Any, str]] = field(default_factory=dict)  # split_dumps' cache
    pending: tuple[int, dict[str, int]] | None = None  # parts, values of the one in flight


class StreamCheckpoints:
    """A worker's checkpointing: which streams changed since the last checkpoint, when the
    next one is due, the records of each stream's checkpoint (new values, manifest), the
    tombstones of what a confirmed one made obsolete, and the restore of a stream.

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
        self.written: dict[str, _Written] = {}
        self._source: tuple[dict[str, Any], str] | None = None  # where read() read

    def read(self, consumer_config: dict[str, Any], topic: str) -> int:
        """Read the checkpoints topic; return how many streams have a checkpoint."""
        self._source = (consumer_config, topic)
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
        for stream in [s for s in {*reader.latest, *reader.values} if s in held]:
            reader.drop(stream)
        return set(reader.latest)

    def take(self, stream: str) -> StreamRunner | None:
        """``stream``'s runner from its newest checkpoint (once), else ``None``.

        Raises :class:`CheckpointError` for a checkpoint whose HMAC does not verify,
        that names values not on the topic, or that holds no stream runner.
        """
        reader = self.reader
        if reader is None or stream not in reader.latest:
            return None
        if reader.missing(stream) and self._source is not None:
            self._read_again(stream)
        asm = reader.latest[stream]
        runner = reader.load(stream, self.key)
        values = {d: v.parts for d, v in reader.values.get(stream, {}).items() if d in asm.refs}
        reader.drop(stream)
        if not isinstance(runner, StreamRunner):
            raise CheckpointError(f"checkpoint of {stream!r} does not hold a stream runner")
        written = getattr(runner, "checkpoint_format", 1)
        if written != CHECKPOINT_FORMAT:
            raise CheckpointError(
                f"checkpoint of {stream!r} has format {written}, this worker reads format "
                f"{CHECKPOINT_FORMAT} (written by another streameval version)"
            )
        self.ids[stream] = asm.id
        slot = asm.slot if asm.slot in (0, 1) else 1
        self.written[stream] = _Written(slot, {slot: asm.parts, 1 - slot: 0}, values)
        return runner

    def _read_again(self, stream: str) -> None:
        """Read the whole topic again for the values ``stream``'s newest checkpoint names
        but the reader has not (read from a point after them, or forgotten)."""
        assert self.reader is not None and self._source is not None
        log.info("checkpoint of %s names values not read: reading the topic again", stream)
        fresh, _ = read_checkpoints(*self._source)
        newest = fresh.latest.get(stream)
        if newest is not None and newest.id >= self.reader.latest[stream].id:
            self.reader.latest[stream] = newest
            self.reader.values[stream] = fresh.values.get(stream, {})

    def changed(self, stream: str, events: int = 0) -> None:
        """``stream`` changed (by ``events`` input events): it goes into the next checkpoint."""
        self.dirty.add(stream)
        self.since += events

    def due(self) -> bool:
        return self.since >= self.every

    def soon(self) -> None:
        """Make the next checkpoint due now (a stream's last output went out)."""
        self.since = max(self.since, self.every)

    def parts(self, stream: str, runner: StreamRunner) -> list[tuple[str, dict[str, Any]]]:
        """The records ``(key, message)`` of ``stream``'s next checkpoint (numbered after
        its last one): its large values and pickle chunks not on the topic yet, then its
        manifest, in the slot its last confirmed checkpoint does not occupy."""
        written = self.written.setdefault(stream, _Written())
        checkpoint_id = self.ids.get(stream, 0) + 1
        blob, signature, large = split_dumps(runner, self.key, written.hashes)
        self.ids[stream] = checkpoint_id
        order = [(hashlib.sha256(piece).hexdigest(), piece) for piece in split(blob)]
        pieces = dict(order)  # a chunk that comes twice is written once
        records: list[tuple[str, dict[str, Any]]] = []
        values: dict[str, int] = {}
        for digest, value in [*large.items(), *pieces.items()]:
            if digest in written.values:
                values[digest] = written.values[digest]
                continue
            messages = value_messages(stream, digest, value)
            records += [(key_of(m), m) for m in messages]
            values[digest] = len(messages)
        slot = 1 - written.slot
        manifest = to_messages(
            stream,
            checkpoint_id,
            b"",
            signature,
            slot=slot,
            refs=[*values],
            chunks=[d for d, _ in order],
        )
        records += [(key_of(m), m) for m in manifest]
        written.parts[slot] = max(written.parts[slot], len(manifest))  # a retry may write fewer
        written.pending = (len(manifest), values)
        return records

    def saved(self) -> list[tuple[str, str]]:
        """Every changed stream is in a confirmed checkpoint. Returns the ``(stream, key)``
        of the records those made obsolete, for tombstones: the parts of the other slot,
        parts of the same slot past the new manifest's, values no longer named."""
        obsolete: list[tuple[str, str]] = []
        for stream, written in self.written.items():
            if written.pending is None:
                continue
            (parts, values), written.pending = written.pending, None
            slot, old = 1 - written.slot, written.slot
            keys = [part_key(stream, old, i) for i in range(written.parts[old])]
            keys += [part_key(stream, slot, i) for i in range(parts, written.parts[slot])]
            for digest, n in written.values.items():
                if digest not in values:
                    keys += [value_key(stream, digest, i) for i in range(n)]
            obsolete += [(stream, key) for key in keys]
            written.slot, written.parts, written.values = slot, {slot: parts, old: 0}, values
        self.dirty.clear()
        self.since = 0
        return obsolete
