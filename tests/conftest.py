"""Shared fixtures: where the real datasets are."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kafka_fixtures import kafka_bootstrap, kafka_prefix, kafka_settings  # noqa: F401

# CI and developers keep ../shared beside the clone (see .ci/run)
DEFAULT_DATA_DIR = str(Path(__file__).resolve().parents[2] / "shared" / "datasets")
DATA_FILES = ("electricity.csv.gz", "covtype.csv.gz", "airlines_no_airports.csv.gz")

# No test downloads a dataset by accident (the download tests turn it on against a loopback
# server); subprocesses of the CLI inherit this.
os.environ.setdefault("STREAMEVAL_DOWNLOAD", "0")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory of the real datasets: ``STREAMEVAL_DATA_DIR``, else the shared one.

    Missing files fail the test under CI (``CI=true``) and skip it elsewhere.
    """
    path = Path(os.environ.get("STREAMEVAL_DATA_DIR") or DEFAULT_DATA_DIR)
    missing = [name for name in DATA_FILES if not (path / name).is_file()]
    if missing:
        message = (
            f"real datasets missing in {path}: {', '.join(missing)}; set STREAMEVAL_DATA_DIR "
            "to the directory holding them (see its README.md for origin and sha256)"
        )
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``moa`` run MOA in a JVM: on a machine without Java (or without CapyMOA,
    before Python 3.11) they are skipped saying what to install, except under CI, which
    installs Java (.ci/run) and must run them."""
    if item.get_closest_marker("moa") is None or os.environ.get("CI") == "true":
        return
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("MOA needs a Java runtime: apt install default-jre-headless")
    pytest.importorskip("capymoa", reason="MOA needs the moa extra: pip install 'streameval[moa]'")
