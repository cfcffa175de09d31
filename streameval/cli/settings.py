"""Where every option's value comes from: flag, environment, config file, default.

One precedence for every setting of every subcommand::

    command-line flag  >  environment variable  >  config file  >  built-in default

The config file is TOML, named by ``--config FILE`` (every subcommand has it) or
by ``$STREAMEVAL_CONFIG``; no file is read implicitly, so a run never depends on
a file that happens to lie in the working directory. Its sections:

* ``[experiment]`` -- the experiment options shared by ``evaluate``, ``run`` and
  ``submit`` (``dataset``, ``learner``, ``delay``, ``window``, ``reeval_k``,
  ...); the stream keys (``dataset``, ``delay``, ``limit``, ``stream_id``,
  ``data_dir``) also apply to ``replay`` and ``diagnose``, so one file drives a
  ``submit`` and its ``replay``;
* ``[evaluate]``, ``[run]``, ``[worker]``, ``[replay]``, ``[submit]``,
  ``[diagnose]``, ``[report]``, ``[bench]`` -- any option of that subcommand
  (a key here beats the same key in ``[experiment]``);
* environment-only settings registered by the Kafka layer (``[kafka]``:
  bootstrap servers, security protocol, SASL and TLS settings, topic prefix,
  partitions; ``[worker] checkpoint_key``). A file value of such a setting is
  exported to the environment of the process when the variable is unset, so
  the variable still wins and the worker processes ``run`` starts see it.

A key is the option's long name without the dashes, ``-`` written ``_``
(``--reeval-k 10`` is ``reeval_k = 10``); a repeatable option takes a list and
also answers to its plural (``learners = ["nb", "ta:ht"]``). An unknown section
or key, or a value of the wrong type, is an error naming the file, the line and
the key. Paths are relative to the working directory, as on the command line.

``streameval config show [COMMAND [OPTION ...]]`` prints every effective value
with its source, secrets masked (:mod:`streameval.cli.config_show`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streameval.cli.config_file import ConfigFile, SettingsError
from streameval.cli.config_file import tomllib as tomllib  # re-exported for the tests

CONFIG_ENV = "STREAMEVAL_CONFIG"
SECRET_MASK = "***"
EXPERIMENT = "experiment"
#: ``[experiment]`` keys that also apply to every other subcommand with that option.
STREAM_KEYS = frozenset({"dataset", "delay", "limit", "stream_id", "data_dir"})
#: ``[experiment]`` keys of where results go: ``submit`` has none of them (the worker publishes).
OUTPUT_KEYS = frozenset({"json", "plot", "report", "no_progress"})
#: Options whose value an environment variable gives when no flag does.
OPTION_ENV: dict[str, str] = {
    "config": CONFIG_ENV,
    "data_dir": "STREAMEVAL_DATA_DIR",
    "bootstrap": "KAFKA_BOOTSTRAP_SERVERS",
    "broker_timeout": "STREAMEVAL_BROKER_TIMEOUT",
    "memory_budget": "STREAMEVAL_MEMORY_BUDGET",
    "stream_memory_budget": "STREAMEVAL_STREAM_MEMORY_BUDGET",
    "stream_work_budget": "STREAMEVAL_STREAM_WORK_BUDGET",
    "max_string": "STREAMEVAL_MAX_STRING",
    "input_budget": "STREAMEVAL_INPUT_BUDGET",
    "stream_input_budget": "STREAMEVAL_STREAM_INPUT_BUDGET",
    "log_format": "STREAMEVAL_LOG_FORMAT",
}
#: Options that read a key of another section when their own is absent.
OPTION_FILE_ALIAS: dict[str, tuple[str, str]] = {"bootstrap": ("kafka", "bootstrap_servers")}
#: Options that never come from a file (the file itself, help).
NOT_IN_FILE = frozenset({"config", "help"})

FLAG, ENV, FILE, DEFAULT = "flag", "env", "file", "default"


@dataclass(frozen=True)
class FreeSection:
    """A section whose keys the user chooses (``[learners]``), each value of one type."""

    about: str
    value_type: type = str

    def check(self, config: ConfigFile, section: str, values: dict[str, Any]) -> dict[str, Any]:
        for key, value in values.items():
            if not isinstance(value, self.value_type):
                raise SettingsError(
                    f"{config.where(section, key)}: [{section}] {key} must be a "
                    f"{self.value_type.__name__} ({self.about})"
                )
        return dict(values)


@dataclass(frozen=True)
class EnvSetting:
    """A setting that only an environment variable (or the config file) gives."""

    env: str
    kind: type = str
    default: Any = None
    secret: bool = False
    help: str = ""


@dataclass(frozen=True)
class Source:
    """Where a value came from: ``flag``, ``env``, ``file`` or ``default``, and its name."""

    kind: str
    name: str = ""

    def __str__(self) -> str:
        return f"{self.kind} {self.name}".strip()


# -- the schema: every section and key, taken from the parser ---------------------------------


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subparsers of ``parser`` by name (in the order they were added)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The optional arguments of ``parser`` by dest (help and --config excluded)."""
    return {
        a.dest: a
        for a in parser._actions
        if a.option_strings and a.dest not in NOT_IN_FILE and a.dest != argparse.SUPPRESS
    }


def _is_flag(action: argparse.Action) -> bool:
    return action.nargs == 0 and isinstance(action.const, bool)


def _is_list(action: argparse.Action) -> bool:
    return isinstance(action, argparse._AppendAction)


def check_option_value(action: argparse.Action, value: Any, where: str) -> Any:
    """``value`` from a file, checked against what ``action`` accepts (converted if needed)."""
    key = action.dest
    if _is_flag(action):
        if not isinstance(value, bool):
            raise SettingsError(f"{where}: {key} must be true or false, got {value!r}")
        return value
    if _is_list(action):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise SettingsError(f"{where}: {key} must be a list of strings, got {value!r}")
        return list(items)
    if action.type is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{where}: {key} must be an integer, got {value!r}")
    elif action.type is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(f"{where}: {key} must be a number, got {value!r}")
        value = float(value)
    else:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise SettingsError(f"{where}: {key} must be a string, got {value!r}")
        value = str(value)  # delay = 1000 means "--delay 1000"
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise SettingsError(f"{where}: {key} must be one of {choices}, got {value!r}")
    return value


def check_env_value(setting: EnvSetting, key: str, value: Any, where: str) -> Any:
    if setting.kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{where}: {key} must be an integer, got {value!r}")
        return value
    if not isinstance(value, str):
        raise SettingsError(f"{where}: {key} must be a string, got {value!r}")
    return value


@dataclass
class Schema:
    """Every section and key a config file may hold, derived from the parser.

    ``experiment_keys`` are the experiment options (``[experiment]``);
    ``env_sections`` the environment-only settings, by section then key.
    """

    parser: argparse.ArgumentParser
    experiment_keys: frozenset[str]
    env_sections: dict[str, dict[str, EnvSetting]] = field(default_factory=dict)
    #: sections whose keys are the user's (``[learners]``: names), checked by a function
    free_sections: dict[str, FreeSection] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        parser: argparse.ArgumentParser,
        add_experiment_options: Callable[[argparse.ArgumentParser], None],
        env_sections: Mapping[str, Mapping[str, EnvSetting]] | None = None,
        free_sections: Mapping[str, FreeSection] | None = None,
    ) -> Schema:
        probe = argparse.ArgumentParser(add_help=False)
        add_experiment_options(probe)
        keys = frozenset(options(probe))
        env = {s: dict(v) for s, v in (env_sections or {}).items()}
        return cls(parser, keys, env, dict(free_sections or {}))

    @property
    def commands(self) -> dict[str, argparse.ArgumentParser]:
        return subcommands(self.parser)

    def experiment_action(self, key: str) -> argparse.Action | None:
        for sub in self.commands.values():
            action = options(sub).get(key)
            if action is not None and key in self.experiment_keys:
                return action
        return None

    def sections(self) -> list[str]:
        names = [EXPERIMENT, *(n for n, p in self.commands.items() if options(p))]
        names += [s for s in self.env_sections if s not in names]
        return names + [s for s in self.free_sections if s not in names]

    def uses_experiment(self, command: str, key: str) -> bool:
        """Whether ``[experiment] key`` applies to ``command``."""
        opts = options(self.commands[command])
        if key not in opts or key not in self.experiment_keys:
            return False
        return self.experiment_keys - OUTPUT_KEYS <= set(opts) or key in STREAM_KEYS

    def canonical_key(self, section: str, key: str) -> str | None:
        """The option dest / env key that ``key`` names in ``section`` (None: unknown)."""
        wanted = key.replace("-", "_")
        known: dict[str, argparse.Action | EnvSetting] = {}
        if section == EXPERIMENT:
            for k in self.experiment_keys:
                action = self.experiment_action(k)
                if action is not None:
                    known[k] = action
        elif section in self.commands:
            known.update(options(self.commands[section]))
        known.update(self.env_sections.get(section, {}))
        if wanted in known:
            return wanted
        for k, target in known.items():
            if isinstance(target, argparse.Action) and _is_list(target) and wanted == k + "s":
                return k
        return None

    def check(self, config: ConfigFile) -> dict[str, dict[str, Any]]:
        """Every value of ``config`` checked and keyed by its canonical key.

        Raises :class:`SettingsError` naming the file, line and key of the first
        unknown section, unknown key or badly typed value.
        """
        out: dict[str, dict[str, Any]] = {}
        sections = self.sections()
        for section, values in config.sections.items():
            if section not in sections:
                raise SettingsError(
                    f"{config.where(section)}: unknown section [{section}]; "
                    f"known sections: {', '.join(f'[{s}]' for s in sections)}"
                )
            if section in self.free_sections:
                out[section] = self.free_sections[section].check(config, section, values)
                continue
            checked: dict[str, Any] = {}
            for key, value in values.items():
                where = config.where(section, key)
                canon = self.canonical_key(section, key)
                if canon is None:
                    raise SettingsError(
                        f"{where}: unknown key {key!r} in [{section}]; known keys: "
                        f"{', '.join(sorted(self.keys(section)))}"
                    )
                if canon in checked:
                    raise SettingsError(f"{where}: {canon!r} given twice in [{section}]")
                config.names[(section, canon)] = key
                env_setting = self.env_sections.get(section, {}).get(canon)
                if env_setting is not None:
                    checked[canon] = check_env_value(env_setting, canon, value, where)
                else:
                    action = (
                        self.experiment_action(canon)
                        if section == EXPERIMENT
                        else options(self.commands[section])[canon]
                    )
                    assert action is not None
                    checked[canon] = check_option_value(action, value, where)
            out[section] = checked
        return out

    def keys(self, section: str) -> list[str]:
        if section == EXPERIMENT:
            keys = set(self.experiment_keys)
        elif section in self.commands:
            keys = set(options(self.commands[section]))
        else:
            keys = set()
        return sorted(keys | set(self.env_sections.get(section, {})))


# -- resolution ---------------------------------------------------------------------------------


@dataclass
class Settings:
    """A checked config file (or none) and the environment, answering "value and source"."""

    schema: Schema
    environ: Mapping[str, str]
    config: ConfigFile | None = None
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_source: Source | None = None

    @classmethod
    def load(
        cls,
        schema: Schema,
        environ: Mapping[str, str],
        config_path: str | None = None,
        config_source: Source | None = None,
    ) -> Settings:
        if config_path is None and environ.get(CONFIG_ENV):
            config_path, config_source = environ[CONFIG_ENV], Source(ENV, CONFIG_ENV)
        if not config_path:
            return cls(schema, environ)
        config = ConfigFile.load(config_path)
        return cls(schema, environ, config, schema.check(config), config_source)

    def _file(self, section: str, key: str) -> tuple[Any, Source] | None:
        values = self.values.get(section, {})
        if key in values and self.config is not None:
            written = self.config.names.get((section, key), key)
            return values[key], Source(FILE, self.config.where(section, written))
        return None

    def option(self, command: str, action: argparse.Action) -> tuple[Any, Source] | None:
        """The value of ``command``'s option from the environment or the file (None: neither)."""
        dest = action.dest
        env = OPTION_ENV.get(dest)
        if env and self.environ.get(env):
            raw = self.environ[env]
            try:
                value = action.type(raw) if callable(action.type) else raw
            except (TypeError, ValueError):
                raise SettingsError(f"${env}={raw!r} is not a valid {action.dest}") from None
            return value, Source(ENV, env)
        if dest in NOT_IN_FILE:
            return None
        found = self._file(command, dest)
        if found is None and self.schema.uses_experiment(command, dest):
            found = self._file(EXPERIMENT, dest)
        if found is None and dest in OPTION_FILE_ALIAS:
            found = self._file(*OPTION_FILE_ALIAS[dest])
        return found

    def env_setting(self, section: str, key: str) -> tuple[Any, Source]:
        setting = self.schema.env_sections[section][key]
        raw = self.environ.get(setting.env)
        if raw is not None and raw.strip() != "":
            return raw, Source(ENV, setting.env)
        found = self._file(section, key)
        if found is not None:
            return found
        return setting.default, Source(DEFAULT)

    def export(self, environ: MutableMapping[str, str]) -> list[str]:
        """Put file values of environment-only settings into ``environ`` where unset.

        Returns the variables set. This is how ``[kafka]`` reaches
        :meth:`streameval.agents.config.KafkaSettings.from_env` and the workers ``run`` starts,
        with the environment still winning.
        """
        done = []
        for section, settings in self.schema.env_sections.items():
            for key, setting in settings.items():
                found = self._file(section, key)
                current = environ.get(setting.env)
                if found is not None and (current is None or current.strip() == ""):
                    environ[setting.env] = str(found[0])
                    done.append(setting.env)
        return done


def _command_of(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[str, int] | None:
    commands = subcommands(parser)
    for i, token in enumerate(argv):
        if token == "--":
            return None
        if not token.startswith("-"):
            return (token, i) if token in commands else None
    return None


def config_flag(argv: Sequence[str]) -> str | None:
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    known, _ = pre.parse_known_args(list(argv))
    return known.config


def parse_args(
    parser: argparse.ArgumentParser,
    schema: Schema,
    argv: Sequence[str] | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> argparse.Namespace:
    """Parse ``argv`` with flag > environment > config file > default.

    The namespace gets ``config_sources`` (dest -> :class:`Source`) for every
    option of the subcommand. File values of environment-only settings are
    exported into ``environ`` (default ``os.environ``) where unset.
    """
    env: MutableMapping[str, str] = os.environ if environ is None else environ
    argv = list(sys.argv[1:] if argv is None else argv)
    found = _command_of(parser, argv)
    if found is None:
        return parser.parse_args(argv)  # no subcommand: argparse's own message or help
    command, index = found
    rest = argv[index + 1 :]
    flag_path = config_flag(rest)
    try:
        settings = Settings.load(
            schema,
            env,
            flag_path,
            Source(FLAG, "--config") if flag_path else None,
        )
    except SettingsError as exc:
        parser.exit(2, f"streameval {command}: error: {exc}\n")
    if command != "config":  # config show reports the file as the file
        settings.export(env)
    sub = subcommands(parser)[command]
    opts = options(sub)
    try:
        resolved = {dest: settings.option(command, a) for dest, a in opts.items()}
    except SettingsError as exc:
        parser.exit(2, f"streameval {command}: error: {exc}\n")
    saved = {dest: (a.default, a.required) for dest, a in opts.items()}
    asking_help = any(t in ("-h", "--help") for t in rest)
    try:
        for dest, action in opts.items():
            if asking_help:
                found = resolved[dest]
                if found is not None and found[1].kind == FILE:
                    # --help shows the file's value beside the built-in default
                    action.config_value = found  # type: ignore[attr-defined]
                continue
            action.default = argparse.SUPPRESS
            if resolved[dest] is not None:
                action.required = False
        args = parser.parse_args(argv)
    finally:
        for dest, (default, required) in saved.items():
            opts[dest].default, opts[dest].required = default, required
            opts[dest].__dict__.pop("config_value", None)
    sources: dict[str, Source] = {}
    for dest in opts:
        if hasattr(args, dest):
            sources[dest] = Source(FLAG, flag_name(opts[dest]))
        elif resolved[dest] is not None:
            value, sources[dest] = resolved[dest]
            setattr(args, dest, value)
        else:
            setattr(args, dest, saved[dest][0])
            sources[dest] = Source(DEFAULT)
    if settings.config is not None and getattr(args, "config", None) is None:
        args.config = str(settings.config.path)
    args.config_source = settings.config_source
    args.config_sources = sources
    args.file_sections = {
        name: (settings.values.get(name, {}), settings.config) for name in schema.free_sections
    }
    return args


def flag_name(action: argparse.Action) -> str:
    """The option's longest flag (``--reeval-k``), as sources and errors name it."""
    return max(action.option_strings, key=len)
