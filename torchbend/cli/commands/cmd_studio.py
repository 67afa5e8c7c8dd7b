"""``torchbend studio``: open a model in a web page, over :mod:`torchbend.studio`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...config import BendingConfig
from ...errors import TorchbendError
from ..options import add_safety_option, block_size, count, subcommand
from ..resolve import MODEL_FORMS, load_model

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(
        sub, "studio", "open a model in a web page to look inside it, bend it and hear it"
    )
    p.add_argument("model", nargs="?", default="tiny_ddsp", help=f"the model: {MODEL_FORMS}")
    p.add_argument("--checkpoint", help="a state dict file to load into a module:factory MODEL")
    p.add_argument("--fn", default="forward", help="the method to render (audio in, audio out)")
    p.add_argument(
        "--block-size",
        type=block_size,
        default=None,
        help="samples per block; by default 8192 for a model that streams, one pass otherwise",
    )
    p.add_argument(
        "--sound",
        action="append",
        metavar="FILE",
        help="an audio file to open besides the shipped sounds; repeat it for more",
    )
    p.add_argument("--config", help="a bending configuration file (JSON) to start from")
    p.add_argument(
        "--output",
        default="torchbend-studio",
        help="the folder renders, uploads and saved configurations go to",
    )
    p.add_argument("--sweep", metavar="FOLDER", help="a sweep's folder whose atlas the page opens")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    p.add_argument("--port", type=count, default=8765, help="the port (0: any free one)")
    p.add_argument(
        "--remote",
        action="store_true",
        help="let other machines reach the studio, by a --host they reach or an SSH tunnel "
        "(then every request needs the token)",
    )
    p.add_argument("--token", help="a token requests must carry (made for you with --remote)")
    p.add_argument("--no-browser", action="store_true", help="do not open the page")
    p.add_argument("--max-seconds", type=float, default=120.0, help="longest upload, in seconds")
    p.add_argument("--max-mb", type=float, default=50.0, help="largest upload, in megabytes")
    add_safety_option(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    try:
        from ...studio import Limits, Studio, StudioServer
        from ...studio.server import check_bind
    except ImportError as e:
        raise ImportError(
            f"the studio needs starlette and uvicorn ({e}): pip install 'torchbend[studio]'"
        ) from None
    token = check_bind(args.host, args.token, args.remote)  # before the model loads
    if args.max_seconds <= 0 or args.max_mb <= 0:
        raise TorchbendError("--max-seconds and --max-mb are numbers above 0")
    studio = Studio(
        load_model(args.model, args.checkpoint),
        args.model,
        fn=args.fn,
        sounds=args.sound or (),
        output=args.output,
        block_size=args.block_size,
        limits=Limits(bytes=int(args.max_mb * 1024 * 1024), seconds=args.max_seconds),
        sweep=args.sweep,
        safety=args.safety,
    )
    if args.config:
        studio.editor.set_config(BendingConfig.load(args.config).to_dict(keys=False))
    server = StudioServer(studio, args.host, args.port, token, args.remote)
    print(f"torchbend studio: {server.url} (Ctrl+C stops it)", file=sys.stderr, flush=True)
    server.run(open_browser=not args.no_browser)
    return 0
