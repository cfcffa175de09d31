"""``streameval``: the command line.

Every subcommand documents itself (``streameval SUBCOMMAND --help``). The
experiment options are shared by ``evaluate`` (in-process) and ``run``
(through Kafka) so that the two run the same experiment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streameval.cli.broker import add_broker_command
from streameval.cli.checks import check_bounds, one_line_errors
from streameval.cli.data import add_data_command
from streameval.cli.experiment import (
    EPILOG_SPECS,
    add_experiment_options,
    config_from_args,
    print_results,
    write_outputs,
)
from streameval.cli.report import add_report_command

EPILOG_CONFIG = """
configuration: flags > environment variables > config file (--config FILE or
  $STREAMEVAL_CONFIG, TOML, see docs/streameval.example.toml) > defaults;
  `streameval config show [COMMAND [OPTION ...]]` prints every value and its source.
"""


def cmd_evaluate(args: argparse.Namespace) -> int:
    from streameval.pipeline.evaluate import evaluate_config

    config = config_from_args(args)
    results = evaluate_config(
        config,
        data_dir=args.data_dir,
        progress=not args.no_progress,
        allow_import=args.allow_import,
        jobs=args.jobs,
    )
    print_results(results)
    write_outputs(results, args)
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from streameval.pipeline.diagnostics.temporal import TemporalDependence
    from streameval.pipeline.report.table import diagnostics_table
    from streameval.pipeline.streams.datasets import load

    dataset = load(args.dataset, data_dir=args.data_dir)
    if dataset.task != "classification":
        raise SystemExit(f"streameval diagnose: {args.dataset} is a {dataset.task} stream")
    diag = TemporalDependence(max_lag=args.max_lag, quick_n=args.quick_n)
    for y in dataset.iter_labels(args.limit):
        diag.update(y)
    result = diag.get()
    print(f"{args.dataset}:")
    print(diagnostics_table(result, args.delta))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streameval",
        description="Evaluate stream classifiers honestly under temporal dependence and "
        "delayed labels, in-process or through Kafka.",
        epilog=EPILOG_SPECS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "evaluate",
        help="run an experiment in-process (the reference driver)",
        epilog=EPILOG_SPECS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_options(p)
    p.add_argument(
        "--allow-import",
        action="store_true",
        help="let learner specs import any class: import[path=package.module.Class] "
        "(local runs only; the Kafka worker never allows it)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        choices=(1, 2),
        default=None,
        help="processes for a run with --reeval-k: 2 moves the later half of the model "
        "learners to a second process (the same results, in less time), 1 keeps one "
        "(default: 2 when this machine gives the process two CPUs)",
    )
    p.set_defaults(handler=cmd_evaluate)

    p = sub.add_parser("diagnose", help="temporal-dependence diagnostics of a stream's labels")
    p.add_argument(
        "--dataset", required=True, help="dataset spec: electricity, csv:PATH[...], arff:PATH"
    )
    p.add_argument("--limit", type=int, default=None, help="use only the first N labels")
    p.add_argument(
        "--data-dir", default=None, help="directory of the dataset files ($STREAMEVAL_DATA_DIR)"
    )
    p.add_argument("--max-lag", type=int, default=5, help="Delta(l) for l = 0..L (default 5)")
    p.add_argument("--quick-n", type=int, default=100, help="size of the quick test sample")
    p.add_argument(
        "--delta",
        choices=("formula", "paper"),
        default="formula",
        help="Delta(l) as the temporal-dependence paper's formula reads (l = 0..L, negative "
        "for positive dependence; default) or as its text uses it (l = 1..L+1, positive)",
    )
    p.add_argument("--json", default=None, metavar="FILE", help="write the diagnostics JSON here")
    p.set_defaults(handler=cmd_diagnose)

    add_report_command(sub)
    add_data_command(sub)

    from streameval.bench import add_bench_command

    add_bench_command(sub)

    try:
        from streameval.cli.kafka import register
    except ImportError:  # pragma: no cover - the Kafka layer is part of the distribution
        register = None
    if register is not None:
        register(sub)
        add_broker_command(sub)
    add_config_command(sub)
    _finish(parser)
    return parser


def add_config_command(sub: Any) -> argparse.ArgumentParser:
    """``streameval config show``: every effective setting and where it came from."""
    p = sub.add_parser(
        "config",
        help="show every effective setting and its source (flag, env, file, default)",
        description="Settings come from, in this order of precedence: command-line flags, "
        "environment variables, the config file (--config FILE or $STREAMEVAL_CONFIG; TOML, "
        "see docs/streameval.example.toml), built-in defaults. Secrets are masked.",
    )
    actions = p.add_subparsers(dest="config_action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser(
        "show",
        help="print every setting as TOML with its source; with COMMAND and its flags, "
        "the values that command would run with",
        description="Print every setting as TOML, each line commented with its source. "
        "With COMMAND (and optionally its flags), the values that command would run with.",
    )
    _add_config_option(show)
    show.add_argument(
        "target", nargs="?", default=None, metavar="COMMAND", help="a subcommand, e.g. evaluate"
    )
    show.add_argument(
        "flags", nargs=argparse.REMAINDER, metavar="...", help="that subcommand's flags"
    )
    p.set_defaults(handler=cmd_config)
    return p


def _add_config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML config file; flags beat environment variables beat the file beat defaults "
        "($STREAMEVAL_CONFIG)",
    )


def _finish(parser: argparse.ArgumentParser) -> None:
    """--config on every subcommand, help on every option, the same help format everywhere."""
    from streameval.cli.helpformat import HelpFormatter
    from streameval.cli.settings import options, subcommands

    commands = subcommands(parser)
    shared = options(commands["evaluate"])
    one_line_errors(parser)
    parser.formatter_class = HelpFormatter
    parser.epilog = (parser.epilog or "") + EPILOG_CONFIG
    for name, p in commands.items():
        p.formatter_class = HelpFormatter
        for q in subcommands(p).values():  # config show, data list, data fetch
            q.formatter_class = HelpFormatter
        if "bootstrap" in options(p):
            p.epilog = (p.epilog or "") + _kafka_epilog()
        if name == "config":
            continue
        _add_config_option(p)
        for dest, action in options(p).items():
            # one meaning per option name: replay's --delay is evaluate's --delay
            if not action.help and dest in shared:
                action.help = shared[dest].help


def _kafka_epilog() -> str:
    try:
        from streameval.agents.config import ENV_FIELDS
    except ImportError:  # pragma: no cover
        return ""
    names = list(ENV_FIELDS)
    lines = ["", "kafka settings (environment, else [kafka] in the config file):"]
    for i in range(0, len(names), 3):
        lines.append("  " + ", ".join(names[i : i + 3]))
    lines.append("  STREAMEVAL_CHECKPOINT_KEY (HMAC key of checkpoints; [worker] checkpoint_key)")
    return "\n".join(lines) + "\n"


def settings_schema(parser: argparse.ArgumentParser) -> Any:
    """The config file's sections and keys: the parser's options plus the Kafka settings."""
    from streameval.cli.settings import FreeSection, Schema

    try:
        from streameval.cli.kafka import file_sections
    except ImportError:  # pragma: no cover - the Kafka layer is part of the distribution
        env_sections = {}
    else:
        env_sections = file_sections()
    from streameval.cli.source import SECTION

    free = {
        "learners": FreeSection("the import path of a learner class, package.module:Class"),
        "source": SECTION,
    }
    return Schema.build(parser, add_experiment_options, env_sections, free)


def register_learners(args: argparse.Namespace) -> None:
    """Register the config file's ``[learners]`` (name = import path) for this process."""
    from streameval.pipeline.learners.registry import REGISTRY

    values, config = getattr(args, "file_sections", {}).get("learners", ({}, None))
    for name, path in values.items():
        try:
            REGISTRY.register(name, path, origin=f"[learners] {name}")
        except ValueError as exc:
            where = config.where("learners", name) if config is not None else "[learners]"
            raise ValueError(f"{where}: {exc}") from None


def cmd_config(args: argparse.Namespace) -> int:
    from streameval.cli.config_show import show_lines
    from streameval.cli.settings import FLAG, config_flag, subcommands

    parser = build_parser()
    commands = [n for n in subcommands(parser) if n != "config"]
    if args.target is not None and args.target not in commands:
        raise ValueError(f"unknown command {args.target!r}; one of {', '.join(commands)}")
    path = config_flag(args.flags)
    source = getattr(args, "config_source", None)
    if path is None and source is not None and source.kind == FLAG:
        path = args.config
    lines = show_lines(
        settings_schema(parser), os.environ, path, command=args.target, argv=args.flags
    )
    print("\n".join(lines))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from streameval.cli.settings import parse_args

    parser = build_parser()
    args = parse_args(parser, settings_schema(parser), argv)
    if getattr(args, "config_source", None) is not None and args.command != "config":
        from_file = sorted(d for d, src in args.config_sources.items() if src.kind == "file")
        sections = getattr(args, "file_sections", {}).items()
        from_file += [f"[{name}]" for name, (values, _) in sections if values]
        print(
            f"streameval {args.command}: config file {args.config} ({args.config_source}) "
            f"sets {', '.join(from_file) or 'nothing here'}; `streameval config show "
            f"{args.command}` lists every value and its source",
            file=sys.stderr,
        )
    from streameval.cli.errors import QuietLibrdkafka, exit_code, one_line

    quiet = QuietLibrdkafka() if not getattr(args, "verbose", True) else contextlib.nullcontext()
    with quiet:
        try:
            check_bounds(args)
            if args.command != "config":
                register_learners(args)
            return int(args.handler(args) or 0)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except Exception as exc:
            code = exit_code(exc)
            if os.environ.get("STREAMEVAL_DEBUG") or code is None:
                raise
            print(f"streameval {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
            return code


if __name__ == "__main__":
    sys.exit(main())
