"""The command's parser class, argument types and the options several commands share."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from ..audio.stream import MAX_BLOCK_SIZE, MIN_BLOCK_SIZE
from ..export.nntilde import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from .resolve import MODEL_FORMS, parse_shape

__all__ = [
    "USAGE_ERROR",
    "Parser",
    "add_bend_options",
    "add_input_option",
    "add_model_options",
    "add_safety_option",
    "add_sound_options",
    "block_size",
    "count",
    "device",
    "port",
    "positive",
    "sample_rate",
    "seconds",
    "subcommand",
]

USAGE_ERROR = 2
"""Exit code of every expected failure (bad arguments, files, models), as argparse's own."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, ``torchbend <command>: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def subcommand(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """A command of ``sub`` (``torchbend NAME`` or ``torchbend sweep NAME``) whose help shows
    each option's default."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=summary,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    return parser


# -- argument types: each checks its value as it is parsed, before any work starts ----------


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {text!r}")
    return value


def positive(text: str) -> int:
    value = count(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 1 or more, got {text!r}")
    return value


def _whole(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``."""

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


block_size = _whole(MIN_BLOCK_SIZE, MAX_BLOCK_SIZE, "samples per block")
sample_rate = _whole(MIN_SAMPLE_RATE, MAX_SAMPLE_RATE, "a sample rate in Hz")
port = _whole(0, 65535, "a UDP port (0: any free one)")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {text!r}")
    return value


def device(text: str) -> int | str:
    """A sound card device as sounddevice takes it: an index, or (part of) a name."""
    return int(text) if text.isdigit() else text


# -- options several commands share ---------------------------------------------------------


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=f"the model: {MODEL_FORMS}")
    p.add_argument("--checkpoint", help="a state dict file to load into a module:factory MODEL")
    p.add_argument("--fn", default="forward", help="the method to trace and run")


def add_bend_options(p: argparse.ArgumentParser) -> None:
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


def add_safety_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--safety",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pass what is written through the safety stage of live play (tb.audio.Safety: "
        "NaN silenced, DC removed, a soft limiter within -0.3 dBFS, sound below -1.9 dBFS "
        "untouched) and say what it did; --no-safety writes the model's output as it is "
        "(a 16-bit file clips it at full scale)",
    )


def add_sound_options(p: argparse.ArgumentParser) -> None:
    """--sound FILE and --seconds S (what ``resolve.sound_input`` reads)."""
    p.add_argument("--sound", required=True, help="the audio file to run (WAV, FLAC or OGG)")
    p.add_argument(
        "--seconds",
        type=seconds,
        default=None,
        help="run only the first SECONDS of the sound (default: all of it, in one pass)",
    )


def add_input_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        type=parse_shape,
        default=parse_shape("1x1x4096"),
        metavar="SHAPE",
        help="the example input's shape, [batch, channels, time] as 1x1x4096 "
        "(random values, seed 0)",
    )
