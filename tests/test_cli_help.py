"""`streameval --help` and every subcommand's help: complete, with defaults and variables.

Walks every subparser of the real parser: an option without help, a default the help does
not show, or an environment variable it does not name fails; the README's command table and
the parser's subcommands must list the same commands.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streameval.cli.helpformat import HelpFormatter
from streameval.cli.main import build_parser
from streameval.cli.settings import OPTION_ENV, subcommands

ROOT = Path(__file__).resolve().parents[1]


def all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    out = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        out.append((name, parser))
        for child, sub in subcommands(parser).items():
            walk(f"{name} {child}", sub)

    walk("streameval", build_parser())
    return out


PARSERS = all_parsers()


def test_every_subcommand_is_walked() -> None:
    names = {n for n, _ in PARSERS}
    for command in ("evaluate", "diagnose", "report", "bench", "run", "worker", "replay"):
        assert f"streameval {command}" in names
    assert {"streameval submit", "streameval config", "streameval config show"} <= names


def shows(text: str, default: object) -> bool:
    """Whether ``text`` names ``default`` (``30`` names the float 30.0 too).

    >>> shows("(default 30)", 30.0), shows("(default 30)", 3.0)
    (True, False)
    """
    names = {str(default)}
    if isinstance(default, float) and default.is_integer():
        names.add(str(int(default)))
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.]|\.\d)", text) for n in names)


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[n for n, _ in PARSERS])
def test_every_option_has_help_default_and_variable(
    name: str, parser: argparse.ArgumentParser
) -> None:
    assert parser.formatter_class is HelpFormatter, name
    formatter = HelpFormatter(parser.prog)
    problems = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if not choice.help:
                    problems.append(f"subcommand {choice.dest} has no help")
            continue
        label = "/".join(action.option_strings) or action.dest
        if not action.help:
            problems.append(f"{label} has no help")
            continue
        text = formatter._expand_help(action)
        default = action.default
        shown = default not in (None, False, argparse.SUPPRESS, [])
        if action.option_strings and shown and not shows(text, default):
            problems.append(f"{label}: default {default!r} not shown in {text!r}")
        if text.lower().count("default") > 1:
            problems.append(f"{label}: the default is said twice in {text!r}")
        env = OPTION_ENV.get(action.dest)
        if env and f"${env}" not in text:
            problems.append(f"{label}: environment variable {env} not named in {text!r}")
    assert not problems, f"{name}: " + "; ".join(problems)


def test_help_runs_for_every_command() -> None:
    """`--help` renders (no format errors) through the real entry point, env included."""
    for name, _ in PARSERS:
        argv = name.split()[1:]
        done = subprocess.run(
            [sys.executable, "-m", "streameval.cli", *argv, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"},
        )
        assert done.returncode == 0, (name, done.stderr)
        assert done.stdout.startswith("usage: streameval"), name
    evaluate = subprocess.run(
        [sys.executable, "-m", "streameval.cli", "evaluate", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"},
    ).stdout
    flat = " ".join(evaluate.split())
    assert "--bins B number of bins between first prediction and label (default 50; 0:" in flat
    assert "--auc-window AUC_WINDOW sliding window of the prequential AUC" in flat
    assert "(default: 1000)" in flat and "$STREAMEVAL_CONFIG" in flat


def test_kafka_commands_name_every_kafka_variable() -> None:
    from streameval.agents.config import ENV_FIELDS

    for name, parser in PARSERS:
        if name.split()[-1] in ("run", "worker", "replay", "submit"):
            text = " ".join(parser.format_help().split())
            missing = [v for v in [*ENV_FIELDS, "STREAMEVAL_CHECKPOINT_KEY"] if v not in text]
            assert not missing, (name, missing)
    assert "streameval config show" in " ".join(PARSERS[0][1].format_help().split())


def test_help_shows_the_config_files_values(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[experiment]\nauc_window = 321\n")
    out = subprocess.run(
        [sys.executable, "-m", "streameval.cli", "evaluate", "--config", "c.toml", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"},
    ).stdout
    assert "(default: 1000) [now 321: file c.toml:2]" in " ".join(out.split())


def readme_commands() -> list[str]:
    """The first column of the README's command table."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("| command | what it does |")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        m = re.match(r"^\| `([a-z-]+)` \| \S", line)
        assert m, f"malformed row of the README's command table: {line!r}"
        rows.append(m.group(1))
    return rows


def test_readme_table_lists_every_subcommand_and_nothing_else() -> None:
    parser_commands = list(subcommands(build_parser()))
    table = readme_commands()
    assert sorted(table) == sorted(parser_commands)
    assert len(table) == len(set(table))


def test_submit_lists_only_the_options_it_uses() -> None:
    """``submit`` writes no results (the worker publishes them): no --json, --plot, --report."""
    commands = subcommands(build_parser())
    submit = {o for a in commands["submit"]._actions for o in a.option_strings}
    evaluate = {o for a in commands["evaluate"]._actions for o in a.option_strings}
    assert evaluate - submit == {
        "--json",
        "--plot",
        "--report",
        "--no-progress",
        "--allow-import",
        "--jobs",
    }
    assert {"--learner", "--reeval-k", "--snapshot-every", "--broker-timeout"} <= submit


def test_config_show_names_list_keys_as_the_file_does(tmp_path: Path, capsys) -> None:
    from streameval.cli.main import main

    path = tmp_path / "c.toml"
    path.write_text('[experiment]\nlearners = ["nb", "ht"]\ndetectors = ["ph"]\njson = "r.json"\n')
    assert main(["config", "show", "evaluate", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(rf'^learners = \["nb", "ht"\]\s+# file {re.escape(str(path))}:2$', out, re.M)
    assert re.search(r'^detectors = \["ph"\]\s+# file ', out, re.M)
    assert not re.search(r"^(learner|detector) = ", out, re.M)
    # submit has no json: the [experiment] key applies to evaluate and run only
    assert main(["config", "show", "submit", "--config", str(path)]) == 0
    assert not re.search(r"^json = ", capsys.readouterr().out, re.M)


def test_a_results_path_from_a_config_file_is_named(tmp_path: Path, monkeypatch, capsys) -> None:
    from streameval.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text('[evaluate]\njson = "r.json"\n')
    argv = ["evaluate", "--config", "c.toml", "--dataset", "sea[n=300]", "--learner", "nb"]
    assert main([*argv, "--no-progress"]) == 0
    assert "results written to r.json (json from c.toml:2)" in capsys.readouterr().err
    assert json.loads((tmp_path / "r.json").read_text())["n_instances"] == 300


def test_the_command_line_starts_without_rivers_generators() -> None:
    """``river.datasets`` (and with it scikit-learn) is imported when a synthetic stream is
    made, not by every command: it cost ~0.8 s of each ``streameval --help``."""
    code = (
        "import sys, streameval.cli.main\n"
        "assert 'river.datasets' not in sys.modules, 'imported at start'\n"
        "from streameval.pipeline.streams import load\n"
        "next(iter(load('sea[n=3]')))\n"
        "assert 'river.datasets' in sys.modules, 'a generator did not import it'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
