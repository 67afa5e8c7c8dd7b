"""``torchbend sweep plan|run|map|best``: the command over :mod:`torchbend.sweep`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ...sweep import SweepStopped, best, describe_config, plan
from ...sweep import draw_map as sweep_map
from ...sweep import run as sweep_run
from ...sweep.best import score
from ...sweep.engines import ENGINES
from ..options import Parser, count, positive, subcommand
from ..resolve import shows_progress

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(
        sub, "sweep", "render many bendings over sounds, measure and map them (docs/sweeps.md)"
    )
    steps = p.add_subparsers(
        dest="step", required=True, parser_class=Parser, help="what to do (each has --help)"
    )
    q = subcommand(
        steps, "plan", "say how many renders a sweep makes, and about how long and how much disk"
    )
    q.add_argument("spec", help="the sweep specification (JSON or YAML)")
    q.add_argument("--workers", type=positive, help="workers to estimate for (one per core)")
    q.add_argument(
        "--no-probe", action="store_true", help="do not time a render to estimate the time"
    )

    q = subcommand(
        steps, "run", "render a sweep into a folder (again: renders only what is missing)"
    )
    q.add_argument("spec", help="the sweep specification (JSON or YAML)")
    q.add_argument("--out", required=True, help="the sweep's folder")
    q.add_argument("--engine", choices=ENGINES, default="local", help="where renders run")
    q.add_argument(
        "--workers",
        type=count,
        help="worker processes (local: one per core; 0 renders in this process) or Ray actors "
        "(ray: one per CPU of the cluster)",
    )
    q.add_argument("--address", help="a running Ray cluster's address (ray; else a local one)")
    q.add_argument("--quiet", action="store_true", help="no progress bar")

    q = subcommand(steps, "map", "write atlas.png and atlas.html: the renders on a 2-D map (PCA)")
    q.add_argument("dir", help="the sweep's folder")
    q.add_argument("--no-png", action="store_true", help="write only the HTML page")
    q.add_argument("--no-html", action="store_true", help="write only the PNG")
    q.add_argument(
        "--colour",
        metavar="NAME",
        help="colour the renders by this measure or descriptor effect (default: distance; "
        "effect_brightness, effect_loudness...: blue less, red more than the unbent render)",
    )

    q = subcommand(steps, "best", "list (or copy) the renders that rank highest on a measure")
    q.add_argument("dir", help="the sweep's folder")
    q.add_argument(
        "--by",
        default="distance",
        help="the measure (or descriptor effect: effect_brightness...) to rank by",
    )
    q.add_argument("--top", type=positive, default=20, help="how many")
    q.add_argument("--lowest", action="store_true", help="the lowest values instead")
    q.add_argument(
        "--broken",
        action="store_true",
        help="rank broken renders too (clipping, silent, DC, NaN), after every clean one",
    )
    q.add_argument("--copy", metavar="FOLDER", help="copy their audio there, in rank order")
    q.add_argument("--json", action="store_true", help="print the rows as JSON Lines")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """The step ``args.step`` of the sweep."""
    return STEPS[args.step](args)


def _plan(args: argparse.Namespace) -> int:
    print(plan(args.spec, probe=not args.no_probe, workers=args.workers))
    return 0


INTERRUPTED = 130
"""Exit code of a command stopped by SIGINT (128 + 2, as a shell reports it)."""


def _run(args: argparse.Namespace) -> int:
    try:
        result = sweep_run(
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


def _map(args: argparse.Namespace) -> int:
    atlas = sweep_map(args.dir, png=not args.no_png, html=not args.no_html, colour=args.colour)
    for path in (atlas.png, atlas.html):
        if path is not None:
            print(f"wrote {path}")
    print(f"{atlas.axis_label(0)}\n{atlas.axis_label(1)}")
    return 0


def _best(args: argparse.Namespace) -> int:
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
        what = "broken or failed" if "undefined" not in rows.left_out else "broken, failed or"
        what += " undefined" * ("undefined" in rows.left_out)
        print(
            f"left out {rows.excluded} {what} render(s) ({reasons}){hint}",
            file=sys.stderr,
        )
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    for rank, row in enumerate(rows, 1):
        flags = [f for f, on in row.get("flags", {}).items() if on]
        print(
            f"{rank:3d}. {score(row, args.by):10.4g}  {row['id']}  {row['audio']}  "
            f"{describe_config(row['config'])}" + (f"  [{', '.join(flags)}]" if flags else "")
        )
    if args.copy:
        print(f"copied {len(rows)} file(s) to {args.copy}", file=sys.stderr)
    return 0


STEPS: dict[str, Callable[[argparse.Namespace], int]] = {
    "plan": _plan,
    "run": _run,
    "map": _map,
    "best": _best,
}
"""What each step of ``torchbend sweep`` does."""
