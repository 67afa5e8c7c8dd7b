"""``torchbend sweep plan|run|map|best``: the command over :mod:`torchbend.sweep`."""

from __future__ import annotations

import argparse
import json
import sys

from ..sweep import SweepStopped, best, describe_config, plan, run
from ..sweep import draw_map as sweep_map
from ..sweep.engines import ENGINES
from .commands import shows_progress

__all__ = ["ENGINES", "cmd_sweep_best", "cmd_sweep_map", "cmd_sweep_plan", "cmd_sweep_run"]


def cmd_sweep_plan(args: argparse.Namespace) -> int:
    print(plan(args.spec, probe=not args.no_probe, workers=args.workers))
    return 0


INTERRUPTED = 130
"""Exit code of a command stopped by SIGINT (128 + 2, as a shell reports it)."""


def cmd_sweep_run(args: argparse.Namespace) -> int:
    try:
        result = run(
            args.spec,
            args.out,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            progress=shows_progress(args),
        )
    except SweepStopped as e:
        print(
            f"torchbend sweep run: stopped with {e.done} of {e.total} renders done in "
            f"{e.folder}; run the same command again to resume",
            file=sys.stderr,
        )
        return INTERRUPTED
    except KeyboardInterrupt:  # while loading the model or the inputs: nothing was lost
        print("torchbend sweep run: stopped while loading; run it again to resume", file=sys.stderr)
        return INTERRUPTED
    print(result)
    return 0


def cmd_sweep_map(args: argparse.Namespace) -> int:
    atlas = sweep_map(args.dir, png=not args.no_png, html=not args.no_html)
    for path in (atlas.png, atlas.html):
        if path is not None:
            print(f"wrote {path}")
    print(f"{atlas.axis_label(0)}\n{atlas.axis_label(1)}")
    return 0


def cmd_sweep_best(args: argparse.Namespace) -> int:
    rows = best(
        args.dir,
        by=args.by,
        top=args.top,
        lowest=args.lowest,
        broken=args.broken,
        copy_to=args.copy,
    )
    if rows.excluded:
        reasons = ", ".join(f"{name} {count}" for name, count in sorted(rows.left_out.items()))
        hint = "" if args.broken else "; --broken ranks them after the clean ones"
        print(
            f"left out {rows.excluded} broken or failed render(s) ({reasons}){hint}",
            file=sys.stderr,
        )
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    for rank, row in enumerate(rows, 1):
        flags = [f for f, on in row.get("flags", {}).items() if on]
        print(
            f"{rank:3d}. {row['measures'][args.by]:10.4g}  {row['id']}  {row['audio']}  "
            f"{describe_config(row['config'])}" + (f"  [{', '.join(flags)}]" if flags else "")
        )
    if args.copy:
        print(f"copied {len(rows)} file(s) to {args.copy}", file=sys.stderr)
    return 0
