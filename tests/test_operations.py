"""Operations: the Makefile's compose targets with either Compose client, the secrets file
kept out of git.

The compose targets are checked with ``make -n`` (print, do not run) against stand-in
``docker`` / ``docker-compose`` executables on ``PATH`` that answer ``compose version`` as
a machine with, or without, Compose v2 would: what is tested is the Makefile's choice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def stand_in(directory: Path, name: str, compose_v2: bool) -> None:
    path = directory / name
    code = 0 if compose_v2 or name == "docker-compose" else 1
    path.write_text(f"#!/bin/sh\nexit {code}\n")
    path.chmod(0o755)


@pytest.mark.parametrize(
    "clients, expected",
    [
        (["docker"], "docker compose -p streameval -f docker/docker-compose.yml up -d"),
        (["docker-compose"], "docker-compose -p streameval -f docker/docker-compose.yml up -d"),
    ],
    ids=["compose-v2", "compose-v1"],
)
def test_make_kafka_up_uses_the_compose_client_there_is(
    tmp_path: Path, clients: list[str], expected: str
) -> None:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    for name in ("docker", "docker-compose"):
        # v1 only: a docker whose `compose version` fails, beside docker-compose
        stand_in(tmp_path, name, compose_v2=clients == ["docker"])
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "kafka-up"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == expected


def test_the_checkpoint_key_file_is_git_ignored() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "docker/.env"], cwd=ROOT, capture_output=True, timeout=30
    )
    assert ignored.returncode == 0, "docker/.env (the checkpoint key) is not git-ignored"
    example = subprocess.run(
        ["git", "check-ignore", "-q", "docker/.env.example"], cwd=ROOT, capture_output=True
    )
    assert example.returncode == 1  # the template stays tracked
