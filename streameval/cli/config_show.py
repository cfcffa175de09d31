"""``streameval config show``: every effective setting, with its source, as TOML.

Each line is ``key = value  # source``, the source being the flag, environment
variable, config file line or default the value comes from
(:mod:`streameval.cli.settings` resolves them); secrets are masked and an unset
setting is a comment.

>>> toml_value(["nb", "ta:ht"]), toml_value(True), toml_value(0.5)
('["nb", "ta:ht"]', 'true', '0.5')
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from streameval.cli.settings import (
    CONFIG_ENV,
    DEFAULT,
    EXPERIMENT,
    FILE,
    FLAG,
    SECRET_MASK,
    Schema,
    Settings,
    Source,
    flag_name,
    options,
)


def toml_value(value: Any) -> str:
    """``value`` written as a TOML literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


#: Repeatable options shown under their plural, as config files write them (both are read).
SHOWN_PLURAL = {"learner": "learners", "detector": "detectors"}


def _line(key: str, value: Any, source: Source, secret: bool = False) -> str:
    key = SHOWN_PLURAL.get(key, key)
    if value is None:
        return f"# {key} (unset)".ljust(40) + f"  # {source}"
    shown = SECRET_MASK if secret and value else value
    return f"{key} = {toml_value(shown)}".ljust(40) + f"  # {source}"


def show_lines(
    schema: Schema,
    environ: Mapping[str, str],
    config_path: str | None = None,
    command: str | None = None,
    argv: Sequence[str] = (),
) -> list[str]:
    """``streameval config show``: every setting with its value and source, secrets masked.

    With ``command``, the options of that subcommand as ``argv`` (its flags)
    would set them; without, every section as the environment and the file set it.
    """
    settings = Settings.load(
        schema, environ, config_path, Source(FLAG, "--config") if config_path else None
    )
    lines = []
    if settings.config is not None:
        lines.append(f"# config file: {settings.config.path} ({settings.config_source})")
    else:
        lines.append(f"# config file: none (--config FILE or ${CONFIG_ENV})")
    commands = schema.commands
    if command is not None:
        sub = commands[command]
        flags = _flags_given(sub, argv)
        lines.append(f"[{command}]")
        for dest, action in options(sub).items():
            if dest in flags:
                lines.append(_line(dest, flags[dest], Source(FLAG, flag_name(action))))
                continue
            found = settings.option(command, action)
            value, source = found if found is not None else (action.default, Source(DEFAULT))
            lines.append(_line(dest, value, source))
        sections = [s for s in schema.env_sections if s == command or "bootstrap" in options(sub)]
    else:
        lines.append(f"[{EXPERIMENT}]")
        evaluate = next(c for c in commands if schema.experiment_keys <= set(options(commands[c])))
        for dest, action in options(commands[evaluate]).items():
            if dest in schema.experiment_keys:
                found = settings.option(evaluate, action)
                value, source = found if found is not None else (action.default, Source(DEFAULT))
                lines.append(_line(dest, value, source))
        for name, sub in commands.items():
            own = {d: a for d, a in options(sub).items() if d not in schema.experiment_keys}
            own_env = schema.env_sections.get(name, {})
            if not own and not own_env:
                continue
            lines.append(f"\n[{name}]")
            for dest, action in own.items():
                found = settings.option(name, action)
                value, source = found if found is not None else (action.default, Source(DEFAULT))
                lines.append(_line(dest, value, source))
            lines.extend(_env_lines(settings, name))
        sections = [s for s in schema.env_sections if s not in commands]
    for section in sections:
        if section != command:
            lines.append(f"\n[{section}]")
        lines.extend(_env_lines(settings, section))
    for section, free in schema.free_sections.items():
        lines.append(f"\n[{section}]  # {free.about}")
        for key, value in settings.values.get(section, {}).items():
            lines.append(_line(key, value, Source(FILE, settings.config.where(section, key))))
    return lines


def _env_lines(settings: Settings, section: str) -> Iterable[str]:
    for key, setting in settings.schema.env_sections.get(section, {}).items():
        value, source = settings.env_setting(section, key)
        yield _line(key, value, source, secret=setting.secret)


def _flags_given(sub: argparse.ArgumentParser, argv: Sequence[str]) -> dict[str, Any]:
    """The options ``argv`` sets on ``sub`` (defaults suppressed, nothing required)."""
    opts = options(sub)
    actions = [a for a in sub._actions if a.dest != "help"]
    saved = [(a, a.default, a.required) for a in actions]
    try:
        for a in actions:
            a.default, a.required = argparse.SUPPRESS, False
        ns, _ = sub.parse_known_args(list(argv))
    finally:
        for a, default, required in saved:
            a.default, a.required = default, required
    return {d: getattr(ns, d) for d in opts if hasattr(ns, d)}
