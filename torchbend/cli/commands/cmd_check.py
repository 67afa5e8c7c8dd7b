"""``torchbend check``: check a .ts file the way nn~ will call it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...errors import TorchbendError
from ..options import subcommand

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "check", "check a .ts file the way nn~ will call it")
    p.add_argument("file", help="the TorchScript file")
    p.add_argument(
        "--latency",
        action="store_true",
        help="also print the delay the file adds in nn~ inside Pure Data, per buffer size "
        "and sample rate (nn~'s buffering, the file's FIFO and the model's delay)",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ...export import check_nntilde, latency

    if not Path(args.file).is_file():
        raise TorchbendError(f"no file {args.file!r}")
    print(check_nntilde(args.file))
    if args.latency:
        print(latency(args.file))
    return 0
