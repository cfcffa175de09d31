"""SHA-256 of data files, computed once per process per file version.

A file version is identified by its resolved path, size and modification time
(ns): the digest is recomputed only if one of them changes, so a benchmark
that loads the same dataset many times hashes it once.

>>> import os, tempfile
>>> fd, path = tempfile.mkstemp()
>>> os.write(fd, b"abc"), os.close(fd)
(3, None)
>>> sha256_of(path)[:16]
'ba7816bf8f01cfea'
>>> os.remove(path)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20
_cache: dict[tuple[str, int, int], str] = {}


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of the file at ``path``, cached by (path, size, mtime)."""
    resolved = Path(path).resolve()
    st = resolved.stat()
    key = (str(resolved), st.st_size, st.st_mtime_ns)
    digest = _cache.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(resolved, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        digest = h.hexdigest()
        _cache[key] = digest
    return digest


def clear_cache() -> None:
    """Forget every digest (tests)."""
    _cache.clear()
