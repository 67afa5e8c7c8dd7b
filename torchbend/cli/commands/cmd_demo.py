"""``torchbend demo``: bend the shipped character model several ways on the shipped sounds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..options import add_safety_option, subcommand

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(
        sub,
        "demo",
        "bend the shipped character model (tiny_ddsp) several ways on the shipped sounds, walk "
        "its named latent channels, and measure what each bending does",
    )
    p.add_argument("--out", default="out/demo", help="the folder to write to")
    add_safety_option(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ...demo import run_demo

    run_demo(Path(args.out), safety=args.safety)
    return 0
