"""How ``streameval ... --help`` prints an option: its help, its default, its variable.

Every option's help line ends with its default (unless the text already names
it) and with the environment variable that sets it, if one does
(:data:`streameval.cli.settings.OPTION_ENV`). ``--help`` with ``--config FILE`` adds
the value the file sets and its line: ``[now 200: file streameval.toml:29]``.
"""

from __future__ import annotations

import argparse

from streameval.cli.settings import OPTION_ENV


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Raw descriptions and epilogs (the spec lists), defaults and variables on every option."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or text == argparse.SUPPRESS:
            return action.help
        default = action.default
        shown = default not in (None, False, argparse.SUPPRESS) and default != []
        # a help text that speaks of its default ("default 30", "default: off") says it once
        if shown and "default" not in text.lower():
            text += " (default: %(default)s)"
        env = OPTION_ENV.get(action.dest)
        if env and f"${env}" not in text:
            text += f" [env ${env}]"
        found = getattr(action, "config_value", None)
        if found is not None:
            value, source = found
            shown_value = str(value).replace("%", "%%")
            text += f" [now {shown_value}: {str(source).replace('%', '%%')}]"
        return text
