"""``torchbend models``: list the shipped models."""

from __future__ import annotations

import argparse
from typing import Any

from ..options import subcommand
from .cmd_callbacks import summary

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "models", "list the shipped models")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ...models.checkpoints import MODELS, default_weights

    for name, cls in sorted(MODELS.items()):
        weights = default_weights(name)
        state = str(weights) if weights.is_file() else f"{weights} (missing)"
        print(f"{name}: {cls.__module__}.{cls.__name__}, weights {state}\n    {summary(cls)}")
    return 0
