"""``torchbend audition``: hear a channel of an activation soloed or bypassed, or the activation
itself over time, as a sound or a picture."""

from __future__ import annotations

import argparse
from typing import Any

from ...audio.render import check_audio, padded, ratio_of, trace_audio
from ...discover import activation_audio, activation_image, audition
from ...errors import TorchbendError
from ..options import add_bend_options, add_model_options, add_sound_options, subcommand
from ..resolve import apply_bendings, bended_model, output_path, sound_input

__all__ = ["MODES", "add_parser", "run"]

MODES = ("solo", "bypass", "activation")
"""What ``--out`` holds: the model's output with the channel soloed or bypassed, or the
activation itself as a sound."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(
        sub,
        "audition",
        "hear a channel of an activation soloed or bypassed, or the activation itself over "
        "time as a sound or a picture",
    )
    add_model_options(p)
    add_sound_options(p)
    p.add_argument(
        "--node", required=True, help="the activation (`torchbend inspect MODEL` lists them)"
    )
    p.add_argument(
        "--channel",
        type=int,
        default=None,
        help="the channel (along axis 1) to solo, bypass or play (default: every channel; "
        "their mean for --mode activation)",
    )
    p.add_argument(
        "--mode",
        default="solo",
        choices=MODES,
        help="solo: the output with only the channel kept at the node; bypass: with the "
        "channel zeroed; activation: the node's activation over time as a sound (a "
        "waveform at 200 frames a second or more, else the envelope of a tone)",
    )
    p.add_argument("--out", help="write the sound here (WAV)")
    p.add_argument("--image", help="write a picture of the activation here (PNG, channels x time)")
    add_bend_options(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ...audio import save

    if not args.out and not args.image:
        raise TorchbendError("give --out FILE.wav (the sound), --image FILE.png, or both")
    out = output_path(args.out, "--out", (".wav",)) if args.out else None
    image = output_path(args.image, "--image", (".png",)) if args.image else None
    model = bended_model(args)
    audio, rate = sound_input(args, model)
    x = padded(audio, ratio_of(model.module))
    trace_audio(model, args.fn, x)
    apply_bendings(model, args)
    length = audio.shape[-1]
    if out is not None:
        if args.mode == "activation":
            sound, _ = activation_audio(model, x, args.node, args.channel, rate, fn=args.fn)
            what = f"the activation {args.node}"
        else:
            y = audition(model, x, args.node, args.channel, fn=args.fn, mode=args.mode)
            check_audio(y, type(model.module).__name__, args.fn, x)
            sound = y[0]
            what = f"{type(model.module).__name__}.{args.fn} with {args.node}"
        channel = "every channel" if args.channel is None else f"channel {args.channel}"
        how = {"solo": " soloed", "bypass": " bypassed"}.get(args.mode, "")
        save(out, sound[..., :length], rate)
        print(f"wrote {out}: {what}, {channel}{how}, {length / rate:.2f} s")
    if image is not None:
        activation_image(model, x, args.node, image, fn=args.fn, rate=rate)
        print(f"wrote {image}: {args.node}, channels x time")
    return 0
