"""``torchbend discover``: rank a model's channels by how much they move a descriptor."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from ...audio.perceptual import NAMES
from ...audio.render import ratio_of
from ...discover import knob, rank
from ...discover.probes import PROBES
from ...discover.rank import input_name
from ...errors import TorchbendError
from ...models.rates import model_sample_rate
from ..options import add_bend_options, add_model_options, positive, seconds, subcommand
from ..resolve import apply_bendings, bended_model, output_path, shows_progress

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(
        sub, "discover", "rank a model's channels by how much they move a descriptor of the sound"
    )
    add_model_options(p)
    add_bend_options(p)
    p.add_argument(
        "--sound",
        action="append",
        required=True,
        metavar="FILE",
        help="a sound to probe the model on (mono mix, at the model's rate); repeat it for more: "
        "each is cut to the shortest one and to --seconds",
    )
    p.add_argument("--descriptor", default="brightness", choices=NAMES, help="what to rank by")
    p.add_argument(
        "--targets",
        action="append",
        metavar="PATTERN",
        help="a regular expression of the activations to probe (default: every hidden one "
        "with a channel axis); repeat it for more",
    )
    p.add_argument("--probe", default="push", choices=PROBES, help="how each channel is moved")
    p.add_argument("--amount", type=float, default=0.5, help="the probe's size (default 0.5)")
    p.add_argument("--seconds", type=seconds, default=1.0, help="the sounds' length (default 1)")
    p.add_argument("--top", type=positive, default=20, help="rows printed (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seeds the random directions")
    p.add_argument("--picture", help="write the ranking's picture here (PNG)")
    p.add_argument("--records", help="write every row here (JSON, a list of records)")
    p.add_argument(
        "--knob",
        metavar="CONFIG",
        help="also find the knob for the descriptor (tb.discover.knob: a Steer driven by a "
        "control from -1 to 1, named like the descriptor) and save it, after the bendings "
        "given, as a bending configuration here (JSON), ready for --config",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(run=run)
    return p


def _sounds(args: argparse.Namespace, rate: int, ratio: int) -> dict[str, torch.Tensor]:
    from ...audio import load

    sounds = {path: load(path, sample_rate=rate, mono=True)[0].reshape(-1) for path in args.sound}
    length = min(min(x.numel() for x in sounds.values()), int(args.seconds * rate))
    length -= length % ratio
    if length <= 0:
        raise TorchbendError(f"the sounds are shorter than the model's ratio ({ratio} samples)")
    return {path: x[:length] for path, x in sounds.items()}


def run(args: argparse.Namespace) -> int:
    picture = output_path(args.picture, "--picture", (".png",)) if args.picture else None
    records = output_path(args.records, "--records", (".json",)) if args.records else None
    config = output_path(args.knob, "--knob", (".json",)) if args.knob else None
    bended = bended_model(args)
    rate = model_sample_rate(bended.module) or 44100
    sounds = _sounds(args, rate, ratio_of(bended.module))
    first = next(iter(sounds.values()))
    inputs: dict[str, Any] = {input_name(bended, args.fn): first[None, None]}
    bended.trace(args.fn, **inputs)
    apply_bendings(bended, args)

    def progress(done: int, total: int, node: str) -> None:
        if shows_progress(args):
            print(f"\r{done}/{total} nodes probed ({node})", end="", file=sys.stderr, flush=True)

    ranking = rank(
        bended,
        sounds,
        descriptor=args.descriptor,
        targets=args.targets,
        probe=args.probe,
        amount=args.amount,
        fn=args.fn,
        rate=rate,
        seed=args.seed,
        progress=progress,
    )
    if shows_progress(args):
        print(file=sys.stderr)
    print(ranking.table(args.top))
    if picture is not None:
        ranking.picture(str(picture))
        print(f"wrote {picture}")
    if records is not None:
        records.write_text(json.dumps(ranking.to_records(), indent=1) + "\n")
        print(f"wrote {records}")
    if config is not None:
        found = knob(bended, sounds, args.descriptor, ranking=ranking, fn=args.fn, rate=rate)
        found.attach(bended)  # after the bendings given, which it was calibrated on
        bended.bending_config().save(config)
        print(f"{found}\nwrote {config}")
    return 0
