"""Config file, environment and flags: one precedence, clear errors, sources, secrets masked.

flag > environment > config file > default (``streameval/cli/settings.py``), checked pair by pair on
real options of the real parser, plus an experiment run from a file giving the same results
JSON as the same options given as flags.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streameval.agents.config import KafkaSettings

from streameval.cli.main import build_parser, main, settings_schema
from streameval.cli.settings import FILE, FLAG, ConfigFile, Source, parse_args, tomllib
from streameval.cli.settings import subcommands as subcommands_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "streameval.example.toml"
PASSWORD = "s3cret-PASS-42"


def parse(argv: list[str], environ: dict[str, str] | None = None):
    parser = build_parser()
    return parse_args(parser, settings_schema(parser), argv, {} if environ is None else environ)


def write(tmp_path: Path, text: str, name: str = "se.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_defaults_without_file_or_env() -> None:
    args = parse(["evaluate", "--dataset", "electricity"])
    assert args.window is None and args.bins == 50 and args.data_dir is None
    assert args.learner is None and args.detector == []
    assert args.config_sources["dataset"] == Source(FLAG, "--dataset")
    assert args.config_sources["bins"].kind == "default"


def test_file_beats_default_and_fills_a_required_option(tmp_path: Path) -> None:
    path = write(tmp_path, '[experiment]\ndataset = "sea[n=100]"\nwindow = 100\nfading = 1\n')
    args = parse(["evaluate", "--config", path])
    assert (args.dataset, args.window, args.fading) == ("sea[n=100]", 100, 1.0)
    assert isinstance(args.fading, float)
    assert args.config_sources["window"] == Source(FILE, f"{path}:3")
    assert args.config_sources["bins"].kind == "default" and args.bins == 50


def test_flag_beats_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[experiment]\ndataset = "sea"\nwindow = 100\nlearners = ["nb"]\n')
    args = parse(["evaluate", "--config", path, "--window", "7", "--learner", "ht"])
    assert args.window == 7 and args.config_sources["window"] == Source(FLAG, "--window")
    # a repeatable flag replaces the file's list, it does not extend it
    assert args.learner == ["ht"]
    args = parse(["evaluate", "--config", path])
    assert args.learner == ["nb"]


def test_env_beats_file_and_flag_beats_env(tmp_path: Path) -> None:
    path = write(tmp_path, '[experiment]\ndataset = "sea"\ndata_dir = "/from/file"\n')
    env = {"STREAMEVAL_DATA_DIR": "/from/env"}
    args = parse(["evaluate", "--config", path], env)
    assert args.data_dir == "/from/env"
    assert args.config_sources["data_dir"] == Source("env", "STREAMEVAL_DATA_DIR")
    args = parse(["evaluate", "--config", path, "--data-dir", "/from/flag"], env)
    assert args.data_dir == "/from/flag"
    args = parse(["evaluate", "--config", path], {})
    assert args.data_dir == "/from/file" and args.config_sources["data_dir"].kind == FILE


def test_env_values_are_typed_like_flags(tmp_path: Path, capsys) -> None:
    parser = build_parser()
    worker = subcommands_of(parser)["worker"]
    if "broker_timeout" not in {a.dest for a in worker._actions}:
        pytest.skip("no --broker-timeout option in this checkout")
    path = write(tmp_path, "[worker]\nbroker_timeout = 9\n")
    env = {"STREAMEVAL_BROKER_TIMEOUT": "2.5"}
    args = parse(["worker", "--config", path], env)
    assert args.broker_timeout == 2.5 and args.config_sources["broker_timeout"].kind == "env"
    assert parse(["worker", "--config", path], {}).broker_timeout == 9.0
    with pytest.raises(SystemExit):
        parse(["worker"], {"STREAMEVAL_BROKER_TIMEOUT": "soon"})
    assert "$STREAMEVAL_BROKER_TIMEOUT='soon'" in capsys.readouterr().err


def test_bootstrap_flag_env_file(tmp_path: Path) -> None:
    """--bootstrap > $KAFKA_BOOTSTRAP_SERVERS > [kafka] bootstrap_servers > embedded."""
    path = write(tmp_path, '[kafka]\nbootstrap_servers = "file:9092"\n')
    env: dict[str, str] = {}
    args = parse(["worker", "--config", path], env)
    assert args.bootstrap == "file:9092"
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "file:9092"  # exported for KafkaSettings.from_env
    env = {"KAFKA_BOOTSTRAP_SERVERS": "env:9092"}
    assert parse(["worker", "--config", path], env).bootstrap == "env:9092"
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "env:9092"
    assert parse(["worker", "--config", path, "--bootstrap", "flag:1"], env).bootstrap == "flag:1"
    assert parse(["worker"], {}).bootstrap is None


def test_kafka_section_reaches_kafka_settings_env_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[kafka]\n"
        'bootstrap_servers = "k1:9093"\nsecurity_protocol = "SASL_SSL"\n'
        'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "file-user"\n'
        f'sasl_password = "{PASSWORD}"\npartitions = 2\ntopic_prefix = "t."\n',
    )
    env = {"KAFKA_SASL_USERNAME": "env-user"}
    parse(["submit", "--config", path, "--dataset", "sea"], env)
    s = KafkaSettings.from_env(env)
    assert s.sasl_username == "env-user" and s.sasl_password == PASSWORD
    assert (s.partitions, s.topic_prefix, s.effective_protocol) == (2, "t.", "SASL_SSL")
    conf = s.confluent_config()
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512" and conf["bootstrap.servers"] == "k1:9093"


def test_config_flag_beats_config_env(tmp_path: Path) -> None:
    a = write(tmp_path, '[experiment]\ndataset = "sea"\nwindow = 1\n', "a.toml")
    b = write(tmp_path, '[experiment]\ndataset = "sea"\nwindow = 2\n', "b.toml")
    assert parse(["evaluate"], {"STREAMEVAL_CONFIG": a}).window == 1
    assert parse(["evaluate", "--config", b], {"STREAMEVAL_CONFIG": a}).window == 2


def test_command_section_beats_experiment_and_stream_keys_reach_replay(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[experiment]\ndataset = "sea"\ndelay = 25\nbins = 10\nwindow = 5\n'
        "[run]\nbins = 30\n[replay]\npack = 50\n",
    )
    run = parse(["run", "--config", path])
    assert (run.bins, run.window, run.delay) == (30, 5, "25")
    evaluate = parse(["evaluate", "--config", path])
    assert evaluate.bins == 10
    replay = parse(["replay", "--config", path])
    assert (replay.dataset, replay.delay, replay.pack) == ("sea", "25", 50)
    assert not hasattr(replay, "window")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[experiment]\nwindw = 3\n", r":2: unknown key 'windw' in \[experiment\]"),
        (
            '[experiment]\ndataset = "sea"\n\n[worker]\nweb_prot = 1\n',
            r":5: unknown key 'web_prot'",
        ),
        ("[experimnt]\nwindow = 3\n", r":1: unknown section \[experimnt\]"),
        ("window = 3\n", r"top-level key 'window' outside a section"),
        ("[experiment]\nallow_import = true\n", r"unknown key 'allow_import' in \[experiment\]"),
        ("[kafka]\npassword = 'x'\n", r"unknown key 'password' in \[kafka\]"),
        ("[experiment]\nwindow = [\n", r"not valid TOML"),
    ],
)
def test_unknown_keys_and_syntax_are_errors_naming_file_and_line(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SystemExit) as exc:
        parse(["evaluate", "--config", path, "--dataset", "sea"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("streameval evaluate: error: ") and path in err
    assert re.search(message, err), err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[experiment]\nwindow = "1000"\n', r":2: window must be an integer, got '1000'"),
        ("[experiment]\nwindow = 1.5\n", r"window must be an integer"),
        ("[experiment]\nfading = true\n", r"fading must be a number"),
        ('[experiment]\ndrift_reset = "yes"\n', r"drift_reset must be true or false"),
        ("[experiment]\nlearners = [1, 2]\n", r"learner must be a list of strings"),
        ("[experiment]\ndataset = [1]\n", r"dataset must be a string"),
        ('[kafka]\npartitions = "4"\n', r"\[?partitions must be an integer"),
        ("[kafka]\nsasl_password = 123\n", r"sasl_password must be a string"),
        ("[worker]\nweb = 1\n", r"web must be true or false"),
    ],
)
def test_wrong_types_are_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    parser = build_parser()
    with pytest.raises(ValueError, match=message) as exc:
        settings_schema(parser).check(ConfigFile.load(path))
    assert path in str(exc.value)


def test_error_messages_on_the_command_line(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "[experiment]\nwindw = 3\n")
    with pytest.raises(SystemExit) as exc:
        main(["config", "show", "--config", path])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}:2: unknown key 'windw' in [experiment]" in err
    assert "known keys:" in err and "window" in err
    with pytest.raises(SystemExit):
        main(["evaluate", "--config", path, "--dataset", "sea"])
    assert f"{path}:2: unknown key 'windw'" in capsys.readouterr().err


def test_config_show_sources_and_masked_secrets(tmp_path: Path, capsys, monkeypatch) -> None:
    path = write(
        tmp_path,
        '[experiment]\ndataset = "sea"\nwindow = 100\n'
        f'[kafka]\nsasl_username = "u"\nsasl_password = "{PASSWORD}"\n'
        f'ssl_key_password = "{PASSWORD}"\n[worker]\ncheckpoint_key = "{PASSWORD}"\n',
    )
    monkeypatch.setenv("STREAMEVAL_DATA_DIR", "/data/env")
    monkeypatch.delenv("KAFKA_SASL_PASSWORD", raising=False)
    assert main(["config", "show", "--config", path, "run", "--bins", "7"]) == 0
    out = capsys.readouterr().out
    assert PASSWORD not in out
    lines = {line.split("=")[0].strip(): line for line in out.splitlines() if "=" in line}
    assert lines["window"].endswith(f"# file {path}:3")
    assert lines["bins"].endswith("# flag --bins")
    assert lines["data_dir"].endswith("# env STREAMEVAL_DATA_DIR")
    assert lines["seed"].endswith("# default")
    assert 'sasl_password = "***"' in lines["sasl_password"]
    assert 'ssl_key_password = "***"' in lines["ssl_key_password"]
    assert lines["sasl_password"].endswith(f"# file {path}:6")
    # the environment wins, and is masked too
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", PASSWORD + "-env")
    assert main(["config", "show", "--config", path]) == 0
    out = capsys.readouterr().out
    assert PASSWORD not in out
    assert any(
        line.startswith('sasl_password = "***"') and line.endswith("# env KAFKA_SASL_PASSWORD")
        for line in out.splitlines()
    )
    assert any(line.startswith('checkpoint_key = "***"') for line in out.splitlines())


def test_config_show_output_is_a_config_file(tmp_path: Path, capsys) -> None:
    """What `config show` prints loads back as a valid config file with the same values."""
    path = write(tmp_path, '[experiment]\ndataset = "sea"\nlearners = ["nb", "ta:ht"]\n')
    assert main(["config", "show", "--config", path]) == 0
    shown = write(tmp_path, capsys.readouterr().out, "shown.toml")
    config = ConfigFile.load(shown)
    values = settings_schema(build_parser()).check(config)
    assert values["experiment"]["learner"] == ["nb", "ta:ht"]
    assert values["experiment"]["bins"] == 50


def test_example_file_loads_and_drives_run() -> None:
    data = tomllib.loads(EXAMPLE.read_text())
    parser = build_parser()
    values = settings_schema(parser).check(ConfigFile.load(EXAMPLE))
    assert values["experiment"]["learner"] == data["experiment"]["learners"]
    args = parse(["run", "--config", str(EXAMPLE)])
    assert (args.dataset, args.delay, args.reeval_k, args.bins) == (
        "electricity",
        "natural",
        10,
        20,
    )
    assert args.learner == ["nochange", "nb", "ta:ht"]


def test_run_from_file_equals_run_from_flags(tmp_path: Path, monkeypatch, capsys) -> None:
    """The same experiment from a config file and from flags: the same results JSON."""
    monkeypatch.chdir(tmp_path)
    flags = [
        "--dataset", "sea[n=3000]", "--delay", "40", "--learner", "nochange",
        "--learner", "nb", "--learner", "ta:ht", "--window", "500", "--fading", "0.999",
        "--reeval-k", "5", "--bins", "8", "--detector", "ph", "--no-progress",
    ]  # fmt: skip
    assert main(["evaluate", *flags, "--json", "flags.json"]) == 0
    path = write(
        tmp_path,
        '[experiment]\ndataset = "sea[n=3000]"\ndelay = 40\n'
        'learners = ["nochange", "nb", "ta:ht"]\nwindow = 500\nfading = 0.999\n'
        'reeval_k = 5\nbins = 8\ndetectors = ["ph"]\nno_progress = true\njson = "file.json"\n',
    )
    assert main(["evaluate", "--config", path]) == 0
    err = capsys.readouterr().err
    assert f"config file {path} (flag --config) sets bins, dataset, delay, detector," in err
    a = json.loads((tmp_path / "flags.json").read_text())
    b = json.loads((tmp_path / "file.json").read_text())
    a.pop("runtime", None), b.pop("runtime", None)
    assert a == b
    assert a["config"]["bins"] == 8 and set(a["learners"]) == {"nochange", "nb", "ta:ht"}
    assert (tmp_path / "file.binned.png").stat().st_size > 0
