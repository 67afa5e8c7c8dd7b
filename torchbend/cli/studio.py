"""``torchbend studio``: the studio's server over :mod:`torchbend.studio`."""

from __future__ import annotations

import argparse
import sys

from ..config import BendingConfig
from ..errors import TorchbendError
from .resolve import load_model

__all__ = ["cmd_studio"]


def cmd_studio(args: argparse.Namespace) -> int:
    try:
        from ..studio import Limits, Studio, StudioServer
        from ..studio.server import check_bind
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
