"""The config file: a TOML file of sections of keys, read once, with line lookup.

Every error about a file value names the file and the line of the key
(``settings.toml:12``), so the user finds the key to fix without searching;
:mod:`streameval.cli.settings` checks the keys and values against the parser.

>>> text = "[experiment]\\ndataset = 'electricity'\\n\\n[run]\\npack = 1\\n"
>>> config = ConfigFile(Path("s.toml"), tomllib.loads(text), text)
>>> config.where("run", "pack"), config.where("experiment")
('s.toml:5', 's.toml:1')
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib


class SettingsError(ValueError):
    """A config file that cannot be used: syntax, unknown key, wrong type."""


@dataclass
class ConfigFile:
    """A parsed TOML config file (sections of keys), with line lookup for errors."""

    path: Path
    sections: dict[str, dict[str, Any]]
    text: str = ""
    #: (section, canonical key) -> the key as written (``learners`` for ``learner``)
    names: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ConfigFile:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"config file {p}: {exc.strerror or exc}") from exc
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"config file {p}: not valid TOML: {exc}") from exc
        for name, value in data.items():
            if not isinstance(value, dict):
                line = _line_of(text, None, name)
                raise SettingsError(
                    f"{_where(p, line)}: top-level key {name!r} outside a section; "
                    "put it under [experiment], [kafka] or a subcommand's [section]"
                )
        return cls(p, data, text)

    def line(self, section: str, key: str | None = None) -> int | None:
        return _line_of(self.text, section, key)

    def where(self, section: str, key: str | None = None) -> str:
        return _where(self.path, self.line(section, key))


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)


def _line_of(text: str, section: str | None, key: str | None) -> int | None:
    """The line of ``key`` in ``[section]`` (or of the section header), 1-based."""
    current: str | None = None
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")
    for number, line in enumerate(text.splitlines(), 1):
        m = header.match(line)
        if m:
            current = m.group(1).strip().strip("\"'")
            if key is None and current == section:
                return number
            continue
        if key is not None and current == section:
            m = re.match(r"^\s*[\"']?([A-Za-z0-9_-]+)[\"']?\s*=", line)
            if m and m.group(1) == key:
                return number
    return None
