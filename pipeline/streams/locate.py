"""Where a real dataset's file is: the data directory, the package, or a fresh download.

The data directory is the ``data_dir`` argument, else ``STREAMEVAL_DATA_DIR`` if set,
else the per-user cache (:func:`~streameval.pipeline.streams.fetch.cache_dir`). In it,
each accepted form of the dataset (:attr:`RealDataset.files`) is tried in order; a file
that is there must have its SHA-256 (there is no fallback from a wrong file to another
source: a wrong file is an error). When no form is there:

* electricity is read from the copy inside the package;
* a dataset with a public home is downloaded into the data directory
  (:func:`~streameval.pipeline.streams.fetch.fetch`: verified, atomic, with progress),
  unless ``STREAMEVAL_DOWNLOAD=0``;
* otherwise :class:`DatasetError` names the directory and how it was chosen, every path
  looked at, the URL tried and why it failed, and how to place the file by hand.

Digests are computed once per process per file version
(:mod:`streameval.pipeline.streams.checksum`).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from streameval.pipeline.streams.base import DatasetError
from streameval.pipeline.streams.checksum import sha256_of
from streameval.pipeline.streams.fetch import cache_dir, downloads_enabled, fetch, url_for
from streameval.pipeline.streams.real import RealDataset

__all__ = ["ENV_VAR", "data_directory", "find", "locate", "packaged_path"]

ENV_VAR = "STREAMEVAL_DATA_DIR"


def data_directory(data_dir: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The directory to read (and download into) and how it was chosen."""
    if data_dir is not None:
        return Path(data_dir), f"the data_dir argument {str(data_dir)!r}"
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env), f"{ENV_VAR}={env!r}"
    return cache_dir(), f"{ENV_VAR} is not set: the per-user cache"


def packaged_path(info: RealDataset) -> Path | None:
    """The copy of ``info.file`` inside the package, if one ships."""
    if not info.packaged:
        return None
    path = Path(str(resources.files("streameval.pipeline.streams") / "data" / info.file))
    return path if path.is_file() else None


def find(info: RealDataset, data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The verified file of ``info`` already on disk (data directory or package), or None."""
    directory, _ = data_directory(data_dir)
    for form in info.files:
        path = directory / form.name
        if path.is_file():
            verify(info, path)
            return path
    packaged = packaged_path(info)
    if packaged is not None:
        verify(info, packaged)
    return packaged


def locate(
    info: RealDataset,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool | None = None,
) -> Path:
    """The verified file to read for ``info`` (see the module docstring); ``download``
    overrides ``STREAMEVAL_DOWNLOAD``."""
    directory, how = data_directory(data_dir)
    looked = []
    for form in info.files:
        path = directory / form.name
        if path.is_file():
            verify(info, path)
            return path
        looked.append(path)
    packaged = packaged_path(info)
    if packaged is not None:
        verify(info, packaged)
        return packaged
    where = f"looked for {' and '.join(map(str, looked))} ({how})"
    if info.download is None or info.download_as is None:
        raise DatasetError(f"dataset {info.name!r}: not found; {where}. {_by_hand(info)}")
    if not (downloads_enabled() if download is None else download):
        raise DatasetError(
            f"dataset {info.name!r}: not found and downloads are off (STREAMEVAL_DOWNLOAD=0); "
            f"{where}. {_by_hand(info)}"
        )
    target = directory / info.download_as
    try:
        return fetch(info.download, target, info.form(info.download_as).sha256)
    except (DatasetError, OSError) as exc:
        raise DatasetError(f"dataset {info.name!r}: {exc}; {where}. {_by_hand(info)}") from exc


def verify(info: RealDataset, path: Path) -> None:
    """Raise :class:`DatasetError` unless ``path`` has the SHA-256 of its accepted form."""
    expected = info.form(path.name).sha256
    try:
        digest = sha256_of(path)
    except OSError as exc:
        raise DatasetError(
            f"dataset {info.name!r}: cannot read {path}: {exc}. {_by_hand(info)}"
        ) from exc
    if digest != expected:
        raise DatasetError(
            f"dataset {info.name!r}: {path} has sha256 {digest}, expected {expected}: "
            f"not the expected file. {_by_hand(info)}"
        )


def _by_hand(info: RealDataset) -> str:
    forms = " or ".join(f"{f.name} (sha256 {f.sha256})" for f in info.files)
    source = ""
    if info.download is not None:
        member = info.download.member
        inside = f" (take {member} out of it, as {info.download_as})" if member else ""
        source = f"; download: {url_for(info.download)}{inside}"
    return (
        f"To place it by hand, put {forms} in {ENV_VAR} or the cache {cache_dir()}; "
        f"origin: {info.origin}{source} (see the README.md of the shared datasets directory)."
    )
