"""Content-defined chunks: cut points that depend on the bytes around them, not on offsets.

A checkpoint's pickle changes here and there between two checkpoints (new labelled ids at the
end of the ingest guard's window, old ones gone from its start, the learners' counts), while
most of it stays byte for byte the same. Cut at fixed offsets, one byte inserted near the
start would change every chunk after it; cut where a rolling hash of the last
:data:`WINDOW` bytes has its low bits zero, the cut points move with the content, and the
chunks of an unchanged stretch come out identical: a checkpoint writes only the chunks that
are new (:mod:`streameval.agents.checkpoint`).

The hash (a "buzhash": the XOR of a random table's entries for the window's bytes, each
rotated by its distance) is computed for every position at once with numpy: ``WINDOW``
passes over the data, ~0.1 s for a few MB.

>>> import random
>>> data = random.Random(1).randbytes(600_000)
>>> before = split(data)
>>> after = split(data[:1000] + b"inserted" + data[1000:])
>>> b"".join(after) == data[:1000] + b"inserted" + data[1000:]
True
>>> len(set(before) & set(after)) >= len(before) - 2   # only the chunk around the edit
True
"""

from __future__ import annotations

import numpy as np

#: Bytes the rolling hash looks at.
WINDOW = 32
#: Low bits of the hash that must be zero at a cut: one every 8 KiB on average.
MASK_BITS = 13
#: Fewest and most bytes of a chunk (the most: one record of the checkpoints topic).
MIN_BYTES = 2 * 1024
MAX_BYTES = 256 * 1024

_TABLE = np.random.default_rng(0x5EED).integers(0, 2**32, size=256, dtype=np.uint64)
_TABLE = _TABLE.astype(np.uint32)


#: Bytes hashed at once: bounds the numpy temporaries (a few MB), whatever the state's size.
BLOCK = 256 * 1024


def _rolling_hash(data: bytes) -> np.ndarray:
    """The hash of the ``WINDOW`` bytes ending at every position (partial at the start)."""
    out = np.empty(len(data), dtype=np.uint32)
    for start in range(0, len(data), BLOCK):
        lead = min(start, WINDOW - 1)  # the bytes before the block its first windows need
        values = _TABLE[
            np.frombuffer(
                data,
                dtype=np.uint8,
                count=min(BLOCK, len(data) - start) + lead,
                offset=start - lead,
            )
        ]
        h = np.zeros(len(values), dtype=np.uint32)
        for k in range(min(WINDOW, len(values))):
            shifted = values[: len(values) - k]
            rotated = (shifted << np.uint32(k)) | (shifted >> np.uint32((32 - k) % 32))
            h[k:] ^= rotated
        out[start : start + len(values) - lead] = h[lead:]
    return out


def cut_points(data: bytes) -> list[int]:
    """The end offset of every chunk of ``data`` (the last one is ``len(data)``)."""
    n = len(data)
    if n <= MIN_BYTES:
        return [n]
    mask = np.uint32((1 << MASK_BITS) - 1)
    candidates = np.flatnonzero((_rolling_hash(data) & mask) == 0) + 1
    cuts: list[int] = []
    last = 0
    for c in candidates.tolist():
        while c - last > MAX_BYTES:  # no content cut for too long: a forced one
            last += MAX_BYTES
            cuts.append(last)
        if c - last >= MIN_BYTES and n - c >= MIN_BYTES:
            cuts.append(c)
            last = c
    while n - last > MAX_BYTES:
        last += MAX_BYTES
        cuts.append(last)
    return [*cuts, n]


def split(data: bytes) -> list[bytes]:
    """``data`` in content-defined chunks."""
    start, out = 0, []
    for end in cut_points(data):
        out.append(data[start:end])
        start = end
    return out
