"""``pip install .`` puts one import name into site-packages: ``streameval``.

The repository keeps its top-level folders (``pipeline/``, ``agents/``, ``schemas/``), which
install as ``streameval.pipeline``, ``streameval.agents`` and ``streameval.schemas``;
nothing generic (``import agents`` is a popular SDK's name) may land in site-packages.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with streameval's wheel installed in it, and nothing else
    of this checkout; the dependencies come from this environment through a ``.pth`` line
    (a path a ``.pth`` adds is not scanned for ``.pth`` files, so this checkout's editable
    install does not come along)."""
    top = tmp_path_factory.mktemp("packaging")
    wheels = top / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels),
         str(ROOT)],
        check=True, timeout=600,
    )  # fmt: skip
    (wheel,) = wheels.glob("streameval-*.whl")
    venv = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def run(venv: Path, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_site_packages_holds_one_import_name(clean_venv: Path, tmp_path: Path) -> None:
    names = run(
        clean_venv,
        "import sysconfig, os; print(sorted(os.listdir(sysconfig.get_paths()['purelib'])))",
        tmp_path,
    ).stdout
    ours = [n for n in eval(names) if "streameval" in n]
    assert sorted(ours) == ["streameval", "streameval-0.1.0.dist-info"]
    for generic in ("agents", "pipeline", "schemas"):
        assert generic not in names


@pytest.mark.parametrize("name", ["agents", "pipeline", "schemas"])
def test_generic_names_do_not_import(clean_venv: Path, tmp_path: Path, name: str) -> None:
    done = run(clean_venv, f"import {name}", tmp_path)
    assert done.returncode == 1
    assert f"ModuleNotFoundError: No module named '{name}'" in done.stderr


def test_streameval_imports_and_evaluates(clean_venv: Path, tmp_path: Path) -> None:
    """The installed package: the API, its sub-packages, their data files, the console
    script."""
    code = (
        "import streameval, streameval.agents.dashboard, streameval.schemas as s\n"
        "from river import naive_bayes\n"
        "assert 'site-packages' in streameval.__file__, streameval.__file__\n"
        "r = streameval.evaluate([({'x': float(i % 2)}, i % 2) for i in range(50)],"
        " naive_bayes.GaussianNB())\n"
        "from importlib import resources\n"
        "assert resources.files('streameval.agents').joinpath('static/dashboard.html').is_file()\n"
        "assert all(resources.files('streameval.schemas').joinpath(f'{k}.json').is_file()"
        " for k in s.KINDS)\n"
        "print(r['n_labelled'], sorted(s.KINDS)[:2])\n"
    )
    done = run(clean_venv, code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == "50"
    help_text = subprocess.run(
        [str(clean_venv / "bin" / "streameval"), "--help"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert help_text.returncode == 0 and "evaluate" in help_text.stdout
