"""``torchbend bend``: render an audio file through a bended model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from ...audio.render import STREAM_BLOCK, padded, ratio_of, render, streams, trace_audio
from ...audio.stream import check_block_size
from ...errors import TorchbendError
from ...models.rates import model_sample_rate
from ..options import add_bend_options, add_model_options, add_safety_option, block_size, subcommand
from ..resolve import apply_bendings, bended_model, output_path, shows_progress

__all__ = ["add_parser", "run"]


def _channel_choice(text: str) -> str:
    """``--channels``: ``mix``, ``all``, or a channel's index."""
    if text in ("mix", "all") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(
        f"expected 'mix', 'all' or a channel's index (0 is the left), got {text!r}"
    )


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "bend", "render an audio file through a bended model")
    add_model_options(p)
    p.add_argument("input", help="the audio file to render (WAV, FLAC or OGG)")
    p.add_argument("output", help="the file to write (.wav, .flac or .ogg)")
    add_bend_options(p)
    p.add_argument(
        "--block-size",
        type=block_size,
        default=None,
        help="samples per block; by default a model that streams (set_streaming, or a "
        "TorchScript file) runs by blocks of 8192 with its state carried over, and any "
        "other in one pass over the whole file",
    )
    p.add_argument(
        "--channels",
        type=_channel_choice,
        default="mix",
        metavar="{mix,all,N}",
        help="which channels of INPUT to render: 'mix' their average (mono; it warns if they "
        "cancel out), 'all' of them (each through the model, written as they came: stereo "
        "stays stereo), or the one of index N (0 is the left)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed torch's random numbers before rendering (torch.manual_seed): a model that "
        "draws noise as it runs, as RAVE exports do, then renders the same file every time",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_safety_option(p)
    p.set_defaults(run=run)
    return p


def _channels(audio: torch.Tensor, choice: str, path: str) -> torch.Tensor:
    """The channels of ``audio`` that ``--channels`` picks: ``mix`` (one, their average),
    ``all``, or one by its index."""
    from ...audio.io import downmix

    if choice == "mix":
        return downmix(audio, Path(path).name)
    if choice == "all":
        return audio
    index = int(choice)
    if index >= audio.shape[0]:
        raise TorchbendError(
            f"--channels {index}: {path} has {audio.shape[0]} channel(s), give 0 to "
            f"{audio.shape[0] - 1}, 'mix' or 'all'"
        )
    return audio[index : index + 1]


def run(args: argparse.Namespace) -> int:
    from ...audio import load, save
    from ...audio.io import FORMATS
    from ...audio.safety import FILE_CEILING, Safety
    from ...audio.safety_stats import decibels

    out_path = output_path(args.output, "OUTPUT", tuple(FORMATS))
    model = bended_model(args)
    sample_rate = model_sample_rate(model.module) or 44100
    audio, sr = load(args.input, sample_rate=sample_rate)
    audio = _channels(audio, args.channels, args.input)
    # A model that streams runs by blocks with its state carried over; any other in one pass
    # (or by the blocks asked for).
    block = args.block_size
    if streams(model.module) and block is None:
        block = STREAM_BLOCK
    if block is not None:
        check_block_size(block, ratio_of(model.module))
    x = torch.zeros(1, 1, block) if block is not None else padded(audio[:1], ratio_of(model.module))
    trace_audio(model, args.fn, x)
    keys = apply_bendings(model, args)
    print(f"bent {len(keys)} target(s): {keys}", file=sys.stderr)

    def progress(i: int, count: int) -> None:
        bar = "#" * int(30 * i / count)
        print(f"\r[{bar:<30}] {i / count:4.0%}", end="", file=sys.stderr, flush=True)

    safety = Safety(sr, ceiling=FILE_CEILING) if args.safety else False
    shown = shows_progress(args)
    if args.seed is not None:
        torch.manual_seed(args.seed)
    out, how = render(model, audio, sr, args.fn, block, progress if shown else None, safety=safety)
    if shown and block is not None:
        print(f"\r[{'#' * 30}] 100%", file=sys.stderr)
    save(out_path, out, sr)
    peak = float(out.abs().max())
    print(f"wrote {args.output} ({how}; peak {decibels(peak)})", file=sys.stderr)
    return 0
