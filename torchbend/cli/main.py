"""The command line: its parser, and the one place failures become one-line errors."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ..audio.stream import MAX_BLOCK_SIZE, MIN_BLOCK_SIZE
from ..errors import TorchbendError
from ..export.nntilde import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from .commands import (
    cmd_bend,
    cmd_callbacks,
    cmd_check,
    cmd_demo,
    cmd_export,
    cmd_inspect,
    cmd_live,
    cmd_models,
)
from .resolve import MODEL_FORMS, parse_shape
from .studio import cmd_studio
from .sweep import ENGINES, cmd_sweep_best, cmd_sweep_map, cmd_sweep_plan, cmd_sweep_run

__all__ = ["build_parser", "main"]

USAGE_ERROR = 2
"""Exit code of every expected failure (bad arguments, files, models), as argparse's own."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, ``torchbend <command>: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from .. import __version__

    return f"torchbend {__version__}"


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 1 or more, got {text!r}")
    return value


def _channels(text: str) -> str:
    """``--channels``: ``mix``, ``all``, or a channel's index."""
    if text in ("mix", "all") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(
        f"expected 'mix', 'all' or a channel's index (0 is the left), got {text!r}"
    )


def _whole(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``, checked as it is parsed,
    before any work starts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected {what}, a whole number from {low} to {high}, got {text!r}"
            )
        return value

    return parse


_block_size = _whole(MIN_BLOCK_SIZE, MAX_BLOCK_SIZE, "samples per block")
_sample_rate = _whole(MIN_SAMPLE_RATE, MAX_SAMPLE_RATE, "a sample rate in Hz")
_port = _whole(0, 65535, "a UDP port (0: any free one)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {text!r}")
    return value


def _device(text: str) -> int | str:
    """A sound card device as sounddevice takes it: an index, or (part of) a name."""
    return int(text) if text.isdigit() else text


def _subcommand(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """A command of ``sub`` (``torchbend NAME`` or ``torchbend sweep NAME``) whose help shows
    each option's default."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=summary,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="torchbend",
        description="Network bending for PyTorch: inspect a model, bend it, render audio "
        "through it, export it for nn~, play it live.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        return _subcommand(sub, name, summary)

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help=f"the model: {MODEL_FORMS}")
        p.add_argument("--checkpoint", help="a state dict file to load into a module:factory MODEL")
        p.add_argument("--fn", default="forward", help="the method to trace and run")

    def bend_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--bend",
            action="append",
            metavar="CALLBACK@PATTERN",
            help="a bending, such as 'Mask(0.3, dim=-2)@decoder_1$' (literal arguments "
            "only; `torchbend callbacks` lists them); repeat it for more",
        )
        p.add_argument(
            "--mark",
            action="append",
            metavar="NAME=TARGET",
            help="name a weight or an activation, such as 'latent=encoder_11', so that "
            "'#latent' stands for it in --bend patterns; repeat it for more",
        )
        p.add_argument(
            "--config",
            help="a bending configuration file (JSON); it may name callbacks of torchbend "
            "and of --plugins files, and never makes torchbend import anything",
        )
        p.add_argument(
            "--plugins",
            action="append",
            metavar="PATH",
            help="a .py file, or a folder of them, defining callbacks (tb.load_callbacks); "
            "repeat it for more",
        )

    def safety_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--safety",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="pass what is written through the safety stage of live play (tb.audio.Safety: "
            "NaN silenced, DC removed, a soft limiter within -0.3 dBFS, sound below -1.9 dBFS "
            "untouched) and say what it did; --no-safety writes the model's output as it is "
            "(a 16-bit file clips it at full scale)",
        )

    def input_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--input",
            type=parse_shape,
            default=parse_shape("1x1x4096"),
            metavar="SHAPE",
            help="the example input's shape, [batch, channels, time] as 1x1x4096 "
            "(random values, seed 0)",
        )

    p = command("inspect", "print the tables of a model's weights and activations")
    model_args(p)
    input_args(p)
    p.add_argument(
        "--audio",
        help="an audio file as the example input, instead of --input (padded to the model's ratio)",
    )
    p.set_defaults(run=cmd_inspect)

    p = command("bend", "render an audio file through a bended model")
    model_args(p)
    p.add_argument("input", help="the audio file to render (WAV, FLAC or OGG)")
    p.add_argument("output", help="the file to write (.wav, .flac or .ogg)")
    bend_args(p)
    p.add_argument(
        "--block-size",
        type=_block_size,
        default=None,
        help="samples per block; by default a model that streams (set_streaming, or a "
        "TorchScript file) runs by blocks of 8192 with its state carried over, and any "
        "other in one pass over the whole file",
    )
    p.add_argument(
        "--channels",
        type=_channels,
        default="mix",
        metavar="{mix,all,N}",
        help="which channels of INPUT to render: 'mix' their average (mono; it warns if they "
        "cancel out), 'all' of them (each through the model, written as they came: stereo "
        "stays stereo), or the one of index N (0 is the left)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    safety_arg(p)
    p.set_defaults(run=cmd_bend)

    p = command("export", "export a bended model (nn~, TorchScript, torch.export, ONNX)")
    model_args(p)
    bend_args(p)
    input_args(p)
    p.add_argument(
        "--format",
        choices=("nntilde", "torchscript", "pt2", "onnx"),
        default="nntilde",
        help="what to write",
    )
    p.add_argument("-o", "--output", required=True, help="the file to write")
    p.set_defaults(run=cmd_export, audio=None)

    p = command("check", "check a .ts file the way nn~ will call it")
    p.add_argument("file", help="the TorchScript file")
    p.set_defaults(run=cmd_check)

    p = command("live", "play a bended model on the sound card (needs torchbend[live])")
    model_args(p)
    bend_args(p)
    p.add_argument("--osc-port", type=_port, help="UDP port of an OSC server for the controls")
    p.add_argument("--block-size", type=_block_size, default=2048, help="samples per block")
    p.add_argument("--sample-rate", type=_sample_rate, default=44100, help="in Hz")
    p.add_argument(
        "--input-device", type=_device, help="sound card input (name or index; the default)"
    )
    p.add_argument(
        "--output-device", type=_device, help="sound card output (name or index; the default)"
    )
    p.add_argument("--duration", type=_seconds, help="seconds to play; until Ctrl-C without it")
    p.add_argument(
        "--no-safety",
        action="store_true",
        help="send the model's output to the card as it is, without the safety stage (NaN "
        "silenced, DC removed, soft limiter within [-1, 1])",
    )
    p.set_defaults(run=cmd_live)

    p = command("demo", "bend the shipped model several ways on the shipped sounds")
    p.add_argument("--out", default="out/demo", help="the folder to write to")
    safety_arg(p)
    p.set_defaults(run=cmd_demo)

    p = command("callbacks", "list the bending callbacks: name, arguments, what each does")
    p.set_defaults(run=cmd_callbacks)

    p = command("models", "list the shipped models")
    p.set_defaults(run=cmd_models)

    p = command("studio", "open a model in a web page to look inside it, bend it and hear it")
    p.add_argument("model", nargs="?", default="tiny_rave", help=f"the model: {MODEL_FORMS}")
    p.add_argument("--checkpoint", help="a state dict file to load into a module:factory MODEL")
    p.add_argument("--fn", default="forward", help="the method to render (audio in, audio out)")
    p.add_argument(
        "--block-size",
        type=_block_size,
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
    p.add_argument("--port", type=_count, default=8765, help="the port (0: any free one)")
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
    safety_arg(p)
    p.set_defaults(run=cmd_studio)

    p = command("sweep", "render many bendings over sounds, measure and map them (docs/sweeps.md)")
    steps = p.add_subparsers(
        dest="step", required=True, parser_class=Parser, help="what to do (each has --help)"
    )

    def step(name: str, summary: str) -> argparse.ArgumentParser:
        return _subcommand(steps, name, summary)

    q = step("plan", "say how many renders a sweep makes, and about how long and how much disk")
    q.add_argument("spec", help="the sweep specification (JSON or YAML)")
    q.add_argument("--workers", type=_positive, help="workers to estimate for (one per core)")
    q.add_argument(
        "--no-probe", action="store_true", help="do not time a render to estimate the time"
    )
    q.set_defaults(run=cmd_sweep_plan)

    q = step("run", "render a sweep into a folder (again: renders only what is missing)")
    q.add_argument("spec", help="the sweep specification (JSON or YAML)")
    q.add_argument("--out", required=True, help="the sweep's folder")
    q.add_argument("--engine", choices=ENGINES, default="local", help="where renders run")
    q.add_argument(
        "--workers",
        type=_count,
        help="worker processes (local: one per core; 0 renders in this process) or Ray actors "
        "(ray: one per CPU of the cluster)",
    )
    q.add_argument("--address", help="a running Ray cluster's address (ray; else a local one)")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    q.set_defaults(run=cmd_sweep_run)

    q = step("map", "write atlas.png and atlas.html: the renders on a 2-D map (PCA)")
    q.add_argument("dir", help="the sweep's folder")
    q.add_argument("--no-png", action="store_true", help="write only the HTML page")
    q.add_argument("--no-html", action="store_true", help="write only the PNG")
    q.set_defaults(run=cmd_sweep_map)

    q = step("best", "list (or copy) the renders that rank highest on a measure")
    q.add_argument("dir", help="the sweep's folder")
    q.add_argument("--by", default="distance", help="the measure to rank by")
    q.add_argument("--top", type=_positive, default=20, help="how many")
    q.add_argument("--lowest", action="store_true", help="the lowest values instead")
    q.add_argument(
        "--broken",
        action="store_true",
        help="rank broken renders too (clipping, silent, DC, NaN), after every clean one",
    )
    q.add_argument("--copy", metavar="FOLDER", help="copy their audio there, in rank order")
    q.add_argument("--json", action="store_true", help="print the rows as JSON Lines")
    q.set_defaults(run=cmd_sweep_best)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = " ".join(filter(None, [args.command, getattr(args, "step", None)]))

    def one_line(message: Warning | str, *_: Any, **__: Any) -> str:
        """A warning as one line, as errors are (not the library's file and source line)."""
        return f"torchbend {command}: warning: {' '.join(str(message).split())}\n"

    default_format, warnings.formatwarning = warnings.formatwarning, one_line
    try:
        return int(args.run(args))
    except (TorchbendError, ImportError) as e:
        message = " ".join(str(e).split())
        print(f"torchbend {command}: error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    finally:
        warnings.formatwarning = default_format


if __name__ == "__main__":
    sys.exit(main())
