"""``torchbend export``: export a bended model in one of the formats of
:data:`torchbend.export.FORMATS`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from ...audio.render import ratio_of, streams, trace_audio
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
    scripted = isinstance(model.module, torch.jit.ScriptModule)
    if scripted and args.format != "nntilde":
        raise TorchbendError(
            f"--format {args.format} takes a Python model (a shipped name or module:factory); "
            f"{args.model} is a TorchScript file: export it bent with --format nntilde, or "
            "render it with `torchbend bend`"
        )
    if target.streams:
        streams(model.module)  # called buffer by buffer, its state carried over
    x = example_input(args, model)
    if scripted:
        x = _file_input(x, ratio_of(model.module))
    trace_audio(model, args.fn, x)
    keys = apply_bendings(model, args)
    print(f"bent {len(keys)} target(s)", file=sys.stderr)
    inputs: dict[str, Any] = {model.view().signature(args.fn).names[0]: x}
    target.write(model, out_path, args.fn, inputs)
    print(f"wrote {args.output}")
    return 0


def _file_input(x: torch.Tensor, ratio: int) -> torch.Tensor:
    """The example input of a TorchScript file (an nn~ file: a RAVE export): whole frames of
    its ratio, and a batch of 2 at least, since torch's converter fixes sizes of 1 and nn~'s
    multichannel objects (mc.nn~) run batches."""
    x = torch.nn.functional.pad(x, (0, -x.shape[-1] % ratio))
    return x if x.shape[0] > 1 else torch.cat([x, x.flip(-1)])
