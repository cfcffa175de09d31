"""Checks of the command line that argparse does not make: bounds, and one-line usage errors.

A count option (``--limit``, ``--window``, ``--pack``, ...) is an ``int`` to argparse
and to the config file, so ``-5`` passes both; what it means is checked here,
once, whatever the value's source (flag, environment, file), with the option
and the source named.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from streameval.cli.errors import EXIT_USAGE
from streameval.cli.settings import subcommands

#: The least value of each count option (by dest).
MINIMUM: dict[str, int] = {
    "limit": 0,
    "window": 1,
    "auc_window": 1,
    "reeval_k": 1,
    "bins": 0,  # 0: only the first prediction's and test-then-train's bins
    "pending_cap": 1,
    "snapshot_every": 0,
    "pack": 1,
    "checkpoint_every": 1,
    "max_string": 1,
    "max_lag": 0,
    "quick_n": 1,
}


def check_bounds(args: argparse.Namespace) -> None:
    """Raise a one-line :class:`ValueError` for a count option below its least value.

    >>> check_bounds(argparse.Namespace(limit=-5, config_sources={}))
    Traceback (most recent call last):
    ...
    ValueError: --limit must be at least 0, got -5
    """
    sources = getattr(args, "config_sources", {})
    for dest, least in MINIMUM.items():
        value = getattr(args, dest, None)
        if isinstance(value, int) and value < least:
            source = sources.get(dest)
            where = f" ({source})" if source is not None and source.kind != "flag" else ""
            flag = "--" + dest.replace("_", "-")
            raise ValueError(f"{flag} must be at least {least}, got {value}{where}")


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` and its subcommands report a usage error as one line (no usage block)."""

    def error(self: argparse.ArgumentParser, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(EXIT_USAGE)

    todo: list[Any] = [parser]
    while todo:
        p = todo.pop()
        p.error = error.__get__(p)  # type: ignore[method-assign]
        todo.extend(subcommands(p).values())
