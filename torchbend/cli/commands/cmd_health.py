"""``torchbend health``: which node of a bent model went silent, NaN or exploded on a sound."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...audio.render import padded, ratio_of, trace_audio
from ...discover import health
from ..options import add_bend_options, add_model_options, add_sound_options, subcommand
from ..resolve import apply_bendings, bended_model, sound_input

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(
        sub,
        "health",
        "compare each activation of a bent model with the unbent model on a sound, and "
        "name the first that went silent, NaN, Inf or exploded",
    )
    add_model_options(p)
    add_sound_options(p)
    add_bend_options(p)
    p.add_argument(
        "--nodes", default=None, help="a pattern choosing the nodes to probe (default: all)"
    )
    p.add_argument("--picture", help="write a PNG heatmap of the nodes here (needs matplotlib)")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    model = bended_model(args)
    audio, _ = sound_input(args, model)
    x = padded(audio, ratio_of(model.module))
    trace_audio(model, args.fn, x)
    keys = apply_bendings(model, args)
    print(f"bent {len(keys)} target(s): {keys}", file=sys.stderr)
    report = health(model, x, fn=args.fn, nodes=args.nodes)
    print(report.table())
    first = report.first_problem()
    print(f"first problem: {first.node} ({first.problem})" if first else "no problem")
    if args.picture:
        print(f"wrote {report.picture(args.picture)}", file=sys.stderr)
    return 0
