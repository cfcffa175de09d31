"""A pickle whose large strings and bytes are kept apart, named by their SHA-256.

A stream's state is mostly small and changing (learners, metrics, the pending buffer's
ids and times) beside, now and then, large values that never change once read: the
features of pending instances (a 1 MB text feature, a blob of bytes), the categories a
learner keeps. Rewriting those with every checkpoint makes the checkpoints topic grow
with *number of checkpoints x state size*. :func:`split_dumps` pickles a state with every
``str``/``bytes`` of at least :data:`LARGE_BYTES` replaced by a reference to its content
(``sha256`` of its bytes): the pickle proper holds the small part, and the large values
are written once, as separate records, and named again by the later checkpoints that
still hold them (:mod:`streameval.agents.checkpoint`).

Trust: the pickle is HMAC-signed as before, and it carries the SHA-256 of every large
value it references; a large value is raw data (UTF-8 text or bytes), never unpickled,
and it is taken only when its SHA-256 is the one the signed pickle names
(:func:`joined_loads`). So nothing is unpickled before the HMAC verified, and a forged
value can only be refused, never substituted.

>>> key = b"k" * 32
>>> state = {"x": "a" * 100_000, "y": ["a" * 100_000, 3]}
>>> blob, sig, large = split_dumps(state, key)
>>> len(blob) < 300, len(large)
(True, 1)
>>> joined_loads(blob, sig, key, {h: stored(v) for h, v in large.items()}) == state
True
"""

from __future__ import annotations

import hashlib
import hmac
import io
import pickle
from collections.abc import Mapping
from typing import Any

KEY_ENV = "STREAMEVAL_CHECKPOINT_KEY"

#: Fewest bytes (characters, for a ``str``) of a value kept apart from the pickle.
LARGE_BYTES = 32 * 1024
#: A large value as stored: its type tag (``"s"`` text as UTF-8, ``"b"`` bytes) and data.
Large = tuple[str, bytes]


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be trusted or read."""


def sign(blob: bytes, key: bytes) -> str:
    """The HMAC-SHA256 of ``blob`` under ``key``, in hex."""
    return hmac.new(key, blob, hashlib.sha256).hexdigest()


def verify(blob: bytes, signature: Any, key: bytes) -> None:
    """:class:`CheckpointError` unless ``signature`` is ``blob``'s HMAC under ``key``."""
    # compare bytes: compare_digest refuses str with non-ASCII characters (TypeError), and
    # a signature read from a topic may be anything
    given = signature.encode("utf-8", "replace") if isinstance(signature, str) else b""
    if not hmac.compare_digest(sign(blob, key).encode("ascii"), given):
        raise CheckpointError(
            "checkpoint refused: its HMAC does not match (tampered, or written with "
            f"another {KEY_ENV}); nothing was unpickled"
        )


def stored(obj: str | bytes) -> Large:
    """A large value as it is written: its type tag and its bytes."""
    if isinstance(obj, str):
        return "s", obj.encode("utf-8", "surrogatepass")
    return "b", bytes(obj)


class _SplitPickler(pickle.Pickler):
    """Pickles large ``str``/``bytes`` as persistent ids ``(tag, sha256)``."""

    def __init__(self, file: io.BytesIO, known: dict[int, tuple[Any, str]]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.known = known  # id -> (object, sha256) of an earlier call
        self.seen: dict[int, tuple[Any, str]] = {}  # the large values met in this one

    def persistent_id(self, obj: Any) -> tuple[str, str] | None:
        kind = type(obj)
        if (kind is not str and kind is not bytes) or len(obj) < LARGE_BYTES:
            return None
        hit = self.seen.get(id(obj)) or self.known.get(id(obj))
        if hit is None or hit[0] is not obj:
            hit = (obj, hashlib.sha256(stored(obj)[1]).hexdigest())
        self.seen[id(obj)] = hit
        return ("s" if kind is str else "b"), hit[1]


_PROTO, _FRAME = 0x80, 0x95


def unframed(blob: bytes) -> bytes:
    """``blob`` without its ``FRAME`` opcodes, or unchanged if it cannot tell them apart.

    Protocol 4+ pickles are cut into frames of ~64 KiB, each led by a 9-byte header
    (opcode and length) at a fixed *offset*: a change early in the state moves every
    header after it against the content, so no chunk of the rest would come out the same
    (:mod:`streameval.agents.chunking`). Frames are optional to the unpickler. A payload
    the pickler wrote outside any frame (a large buffer) ends the walk: the pickle is then
    kept as it is.

    >>> state = [str(i) for i in range(100_000)]
    >>> blob = pickle.dumps(state, protocol=5)
    >>> bare = unframed(blob)
    >>> len(bare) < len(blob), pickle.loads(bare) == state
    (True, True)
    """
    if len(blob) < 2 or blob[0] != _PROTO or blob[1] < 4:
        return blob
    out, pos, n = [blob[:2]], 2, len(blob)
    while pos < n:
        if blob[pos] != _FRAME or pos + 9 > n:
            return blob
        size = int.from_bytes(blob[pos + 1 : pos + 9], "little")
        out.append(blob[pos + 9 : pos + 9 + size])
        pos += 9 + size
    return b"".join(out) if pos == n else blob


def split_dumps(
    state: Any, key: bytes, cache: dict[int, tuple[Any, str]] | None = None
) -> tuple[bytes, str, dict[str, str | bytes]]:
    """Pickle ``state`` without its large values; return the pickle, its HMAC and the
    large values by SHA-256.

    ``cache`` (the dict of a previous call, updated in place) spares hashing again the
    large values still held by the same objects: strings are immutable.
    """
    buffer = io.BytesIO()
    pickler = _SplitPickler(buffer, {} if cache is None else dict(cache))
    pickler.dump(state)
    if cache is not None:  # only the values of this state: the others may be freed
        cache.clear()
        cache.update(pickler.seen)
    blob = unframed(buffer.getvalue())
    large = {digest: obj for obj, digest in pickler.seen.values()}
    return blob, sign(blob, key), large


class _JoinedUnpickler(pickle.Unpickler):
    """Resolves the persistent ids of :class:`_SplitPickler` from verified large values."""

    def __init__(self, file: io.BytesIO, large: Mapping[str, Large]) -> None:
        super().__init__(file)
        self.large = large
        self.made: dict[str, str | bytes] = {}  # one object per value, shared as before

    def persistent_load(self, pid: Any) -> str | bytes:
        if not (isinstance(pid, tuple) and len(pid) == 2 and pid[0] in ("s", "b")):
            raise CheckpointError(f"checkpoint refers to an unknown kind of value {pid!r:.80}")
        tag, digest = pid
        if digest in self.made:
            return self.made[digest]
        stored = self.large.get(digest)
        if stored is None:
            raise CheckpointError(f"checkpoint value {digest[:12]}... is not on the topic")
        data = stored[1]
        if stored[0] != tag or hashlib.sha256(data).hexdigest() != digest:
            raise CheckpointError(f"checkpoint value {digest[:12]}... does not match its hash")
        value: str | bytes = data.decode("utf-8", "surrogatepass") if tag == "s" else data
        self.made[digest] = value
        return value


def joined_loads(blob: bytes, signature: str, key: bytes, large: Mapping[str, Large]) -> Any:
    """Unpickle ``blob`` with its large values, only if ``signature`` is its HMAC under
    ``key`` (:class:`CheckpointError` otherwise, for a value missing or not matching, and
    for a verified pickle this version cannot rebuild: another version's classes)."""
    verify(blob, signature, key)
    try:
        return _JoinedUnpickler(io.BytesIO(blob), large).load()
    except CheckpointError:
        raise
    except Exception as exc:  # signed by a worker of another version: not readable here
        raise CheckpointError(
            f"checkpoint cannot be read by this streameval version ({type(exc).__name__}: {exc})"
        ) from exc
