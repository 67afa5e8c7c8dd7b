"""The command line: its parser, built from the command modules, and the one place failures
become one-line errors."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import TorchbendError
from .commands import (
    cmd_audition,
    cmd_bend,
    cmd_callbacks,
    cmd_check,
    cmd_demo,
    cmd_discover,
    cmd_export,
    cmd_health,
    cmd_inspect,
    cmd_live,
    cmd_models,
    cmd_studio,
    cmd_sweep,
)
from .options import USAGE_ERROR, Parser

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS = (
    cmd_inspect,
    cmd_bend,
    cmd_export,
    cmd_check,
    cmd_health,
    cmd_live,
    cmd_demo,
    cmd_callbacks,
    cmd_models,
    cmd_studio,
    cmd_sweep,
    cmd_discover,
    cmd_audition,
)
"""The modules of the subcommands, in the order ``torchbend --help`` lists them: each has
``add_parser(subparsers)`` (its options, with ``run`` as the parser's default) and
``run(args)`` (its action, returning the exit code)."""


def _version() -> str:
    from .. import __version__

    return f"torchbend {__version__}"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="torchbend",
        description="Network bending for PyTorch: inspect a model, bend it, render audio "
        "through it, export it for nn~, play it live.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = " ".join(filter(None, [args.command, getattr(args, "step", None)]))

    def one_line(message: Warning | str, *_: Any, **__: Any) -> str:
        """A warning as one line, as errors are (not the library's file and source line)."""
        return f"torchbend {command}: warning: {' '.join(str(message).split())}\n"

    default_format, warnings.formatwarning = warnings.formatwarning, one_line
    try:
        return int(args.run(args))
    except (TorchbendError, ImportError) as e:
        message = " ".join(str(e).split())
        print(f"torchbend {command}: error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    finally:
        warnings.formatwarning = default_format


if __name__ == "__main__":
    sys.exit(main())
