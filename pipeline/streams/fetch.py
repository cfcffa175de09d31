"""Downloading a data file once, verified, into the per-user data directory.

A real dataset that is not on disk is fetched on first use from its public home
(:class:`Download`) into the data directory: ``STREAMEVAL_DATA_DIR`` if set, else
``$XDG_CACHE_HOME/streameval`` (``~/.cache/streameval`` when that is unset).

Every download is

* **verified**: the bytes fetched must have the SHA-256 the registry names (and, for a
  file taken out of an archive, so must the extracted file);
* **atomic**: it is written to a temporary file in the target directory and renamed
  only once verified, so the cache holds a good file or nothing -- a corrupt, truncated
  or interrupted download leaves no trace;
* **bounded in time**: connecting and every read time out after
  :data:`TIMEOUT` seconds, so an unreachable server is a clear error, not a hang;
* **shown**: a progress line on stderr (a bar on a terminal), see
  :class:`~streameval.pipeline.progress.Progress`.

``STREAMEVAL_MIRROR=URL`` fetches every file from ``URL/<file name>`` instead of its
public home (a local mirror, a proxy, the tests' loopback server); the checksums are
unchanged. ``STREAMEVAL_DOWNLOAD=0`` turns downloading off (then a missing file is an
error saying how to place it by hand).

>>> url_for(Download("https://example.org/a/b.tar.gz", "0" * 64, 10), {})
'https://example.org/a/b.tar.gz'
>>> url_for(Download("https://example.org/a/b.tar.gz", "0" * 64, 10), {MIRROR_VAR: "http://m/"})
'http://m/b.tar.gz'
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from streameval.pipeline.progress import Progress
from streameval.pipeline.streams.base import DatasetError

__all__ = ["Download", "cache_dir", "downloads_enabled", "fetch", "url_for"]

MIRROR_VAR = "STREAMEVAL_MIRROR"
SWITCH_VAR = "STREAMEVAL_DOWNLOAD"
#: Seconds to wait for the connection and for each read.
TIMEOUT = 10.0
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Download:
    """Where a data file is published: ``url`` (``size`` bytes, ``sha256``), and, when the
    file is inside a tar archive, the ``member`` to take out of it."""

    url: str
    sha256: str
    size: int
    member: str | None = None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user cache of downloaded datasets (XDG base directory specification)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "streameval"


def downloads_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``STREAMEVAL_DOWNLOAD`` is ``0``, ``no``, ``false`` or ``off``."""
    env = os.environ if environ is None else environ
    return env.get(SWITCH_VAR, "1").strip().lower() not in ("0", "no", "false", "off")


def url_for(download: Download, environ: Mapping[str, str] | None = None) -> str:
    """The URL to fetch: the public home, or the mirror's copy of the same file name."""
    env = os.environ if environ is None else environ
    mirror = env.get(MIRROR_VAR)
    if not mirror:
        return download.url
    return mirror.rstrip("/") + "/" + download.url.rsplit("/", 1)[-1]


def fetch(download: Download, target: Path, sha256: str, *, progress: bool = True) -> Path:
    """Fetch ``download`` and leave the verified file at ``target`` (``sha256``).

    Raises :class:`DatasetError` naming the URL and the target on any failure, after
    removing every partial file.
    """
    url = url_for(download)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    extracted: Path | None = None
    try:
        with os.fdopen(fd, "wb") as out:
            digest = _copy_from(url, out, download.size, progress, target.name)
        _check(digest, download.sha256, f"{url} (downloaded)")
        if download.member is not None:
            extracted = _extract(tmp, download.member, target)
            tmp.unlink()
            tmp = extracted
        _check(_sha256_file(tmp), sha256, f"{target.name} from {url}")
        os.replace(tmp, target)
        return target
    except BaseException:
        for leftover in (tmp, extracted):
            if leftover is not None:
                leftover.unlink(missing_ok=True)
        raise


def _copy_from(url: str, out: object, size: int, progress: bool, name: str) -> str:
    """Stream ``url`` into ``out``; the hex SHA-256 of what was read."""
    h = hashlib.sha256()
    bar = Progress(total=size, label=f"bytes of {name}", enabled=progress, log_every=5.0)
    got = 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            expected = int(response.headers.get("Content-Length") or size)
            while chunk := response.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)  # type: ignore[attr-defined]
                got += len(chunk)
                bar.advance(len(chunk))
            out.flush()  # type: ignore[attr-defined]
            os.fsync(out.fileno())  # type: ignore[attr-defined]
    except (
        TimeoutError,
        urllib.error.URLError,
        http.client.HTTPException,
        OSError,
        ValueError,
    ) as exc:
        reason = getattr(exc, "reason", exc)
        raise DatasetError(f"could not download {url}: {reason}") from exc
    finally:
        bar.close()
    if got < expected:
        raise DatasetError(f"could not download {url}: truncated, {got:,} of {expected:,} bytes")
    return h.hexdigest()


def _extract(archive: Path, member: str, target: Path) -> Path:
    """Copy ``member`` of the tar ``archive`` into a temporary file beside ``target``."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with tarfile.open(archive) as tar, os.fdopen(fd, "wb") as out:
            source = tar.extractfile(member)
            if source is None:
                raise DatasetError(f"{member} is not a file in {archive.name}")
            shutil.copyfileobj(source, out, _CHUNK)
    except (tarfile.TarError, KeyError) as exc:
        Path(name).unlink(missing_ok=True)
        raise DatasetError(f"cannot take {member} out of the download: {exc}") from exc
    return Path(name)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _check(digest: str, expected: str, what: str) -> None:
    if digest != expected:
        raise DatasetError(f"{what} has sha256 {digest}, expected {expected}: refused")
