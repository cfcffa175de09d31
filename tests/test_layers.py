"""The layers of the package, checked on the source: core, Kafka layer, command line.

``streameval.pipeline`` is the core: it imports neither the Kafka layer
(``streameval.agents``), nor the command line (``streameval.cli``), nor the bench
harness (``streameval.bench``), nor a Kafka client (``faust``, ``confluent_kafka``).
The Kafka layer does not import the command line; the command line may import both.
The topic schemas (``streameval.schemas``) import none of them. Between these packages
no import cycle exists.

Every module is read as source and parsed (``ast``), so an import inside a function
counts as much as one at the top, and nothing is imported to check it.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The packages whose imports are checked, and the folder each one lives in.
PACKAGES = ("streameval.pipeline", "streameval.schemas", "streameval.agents", "streameval.cli")
#: What each package must not import (a name and everything under it).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "streameval.pipeline": (
        "streameval.agents",
        "streameval.cli",
        "streameval.bench",
        "faust",
        "confluent_kafka",
    ),
    "streameval.schemas": (
        "streameval.pipeline",
        "streameval.agents",
        "streameval.cli",
        "streameval.bench",
    ),
    "streameval.agents": ("streameval.cli", "streameval.bench"),
}


def package_dir(package: str) -> Path:
    """The folder of ``package`` (found without importing it)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    return Path(next(iter(spec.submodule_search_locations)))


def modules(package: str) -> Iterator[tuple[str, Path]]:
    """``(module name, file)`` of every module of ``package``, sub-packages included."""
    root = package_dir(package)
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join([package, *parts]), path


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module name that ``source`` (the module ``module``) imports, anywhere in it.

    ``from a import b`` counts as importing ``a`` and ``a.b`` (``b`` may be a module);
    relative imports are resolved against ``module``.

    >>> sorted(imported_names("def f():\\n    from ..b import c\\nimport os.path", "p.q.m"))
    ['os.path', 'p.b', 'p.b.c']
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def imports_of(package: str) -> dict[str, set[str]]:
    """Per module of ``package``: the module names it imports."""
    out = {}
    for module, path in modules(package):
        source = path.read_text(encoding="utf-8")
        out[module] = imported_names(source, module, path.name == "__init__.py")
    return out


IMPORTS = {package: imports_of(package) for package in PACKAGES}


def test_the_scan_sees_imports_inside_functions_and_relative_ones() -> None:
    source = "import json\n\ndef f():\n    import faust\n    from . import sibling\n"
    assert imported_names(source, "streameval.pipeline.x") == {
        "json",
        "faust",
        "streameval.pipeline",
        "streameval.pipeline.sibling",
    }
    assert imported_names("from .report import html", "streameval.pipeline", True) == {
        "streameval.pipeline.report",
        "streameval.pipeline.report.html",
    }


def test_the_scan_is_not_vacuous() -> None:
    """Known imports are found: the worker imports the core's runner, lazily confluent_kafka."""
    worker = IMPORTS["streameval.agents"]["streameval.agents.worker"]
    assert "streameval.pipeline.runner" in worker and "confluent_kafka" in worker
    assert len(IMPORTS["streameval.pipeline"]) > 30
    assert "streameval.cli.main" in IMPORTS["streameval.cli"]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_across_a_layer(package: str) -> None:
    offending = sorted(
        f"{module} imports {name}"
        for module, names in IMPORTS[package].items()
        for name in names
        if any(within(name, banned) for banned in FORBIDDEN[package])
    )
    assert offending == [], "\n".join(offending)


def package_graph() -> dict[str, set[str]]:
    """Which of :data:`PACKAGES` each one imports (itself left out)."""
    graph: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for package, per_module in IMPORTS.items():
        for names in per_module.values():
            for name in names:
                for other in PACKAGES:
                    if other != package and within(name, other):
                        graph[package].add(other)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle of ``graph`` found by depth-first search (each once per start).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b', 'a']]
    >>> cycles({"a": {"b"}, "b": set()})
    []
    """
    found = []
    for start in sorted(graph):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append([*path, start])
                elif nxt not in path and nxt > start:  # each cycle from its smallest node
                    stack.append((nxt, [*path, nxt]))
    return found


def test_no_import_cycle_between_the_packages() -> None:
    graph = package_graph()
    assert cycles(graph) == [], graph
    # the direction of the layers: the command line on top of the Kafka layer on the core
    assert "streameval.pipeline" in graph["streameval.agents"]
    assert {"streameval.pipeline", "streameval.agents"} <= graph["streameval.cli"]
