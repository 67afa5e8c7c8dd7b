"""``torchbend inspect``: print the tables of a model's weights and activations."""

from __future__ import annotations

import argparse
from typing import Any

from ...audio.render import trace_audio
from ..options import add_input_option, add_model_options, subcommand
from ..resolve import bended_model, example_input

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "inspect", "print the tables of a model's weights and activations")
    add_model_options(p)
    add_input_option(p)
    p.add_argument(
        "--audio",
        help="an audio file as the example input, instead of --input (padded to the model's ratio)",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    model = bended_model(args)
    x = example_input(args, model)
    trace_audio(model, args.fn, x)
    model.print_weights()
    print()
    model.print_activations(args.fn)
    return 0
