"""The examples in the docstrings of every module run, and give what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

#: Walked under the one import name, so that no module is imported twice (as ``pipeline.x``
#: from the checkout and as ``streameval.pipeline.x``); the sub-packages live in folders of
#: their own (``pipeline/``, ``agents/``, ``schemas/``), so each is walked from its own path.
PACKAGES = ("streameval", "streameval.pipeline", "streameval.agents", "streameval.schemas")


def modules() -> list[str]:
    names = set()
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        names.add(package)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
            if not info.name.endswith(".__main__"):  # running it is the command line itself
                names.add(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_examples_exist() -> None:
    """The check above is not vacuous: the core's docstrings do carry examples."""
    finder = doctest.DocTestFinder()
    examples = sum(
        len(t.examples) for name in modules() for t in finder.find(importlib.import_module(name))
    )
    assert examples >= 100
