"""``torchbend export``: export a bended model in one of the formats of
:data:`torchbend.export.FORMATS`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from ...audio.render import streams, trace_audio
from ...errors import TorchbendError
from ...export.formats import FORMATS
from ..options import add_bend_options, add_input_option, add_model_options, subcommand
from ..resolve import apply_bendings, bended_model, example_input, output_path

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "export", "export a bended model (nn~, TorchScript, torch.export, ONNX)")
    add_model_options(p)
    add_bend_options(p)
    add_input_option(p)
    p.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default=next(iter(FORMATS)),
        help="what to write: "
        + "; ".join(f"{f.name} ({f.suffix}) {f.help}" for f in FORMATS.values()),
    )
    p.add_argument("-o", "--output", required=True, help="the file to write")
    p.set_defaults(run=run, audio=None)
    return p


def run(args: argparse.Namespace) -> int:
    out_path = output_path(args.output, "--output")
    target = FORMATS[args.format]
    model = bended_model(args)
    if isinstance(model.module, torch.jit.ScriptModule):
        raise TorchbendError(
            "export takes a Python model (a shipped name or module:factory), not a TorchScript "
            "file: bend a TorchScript file with `torchbend bend`, or from Python"
        )
    if target.streams:
        streams(model.module)  # called buffer by buffer, its state carried over
    x = example_input(args, model)
    trace_audio(model, args.fn, x)
    keys = apply_bendings(model, args)
    print(f"bent {len(keys)} target(s)", file=sys.stderr)
    inputs: dict[str, Any] = {model.view().signature(args.fn).names[0]: x}
    target.write(model, out_path, args.fn, inputs)
    print(f"wrote {args.output}")
    return 0
