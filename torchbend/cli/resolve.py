"""What the command's arguments name: a model, its bendings, an example input, a shape, a
file to write."""

from __future__ import annotations

import argparse
import ast
import math
import sys
from pathlib import Path

import torch

from ..audio.render import padded, ratio_of
from ..bended import BendedModule
from ..callbacks.base import BendingCallback
from ..config import BendingConfig
from ..errors import TorchbendError
from ..models.rates import model_sample_rate
from ..models.reference import MODEL_FORMS, load_model

__all__ = [
    "MODEL_FORMS",
    "apply_bendings",
    "bended_model",
    "example_input",
    "load_model",
    "output_path",
    "parse_bend",
    "parse_shape",
    "shows_progress",
    "sound_input",
]


def shows_progress(args: argparse.Namespace) -> bool:
    """A progress bar is drawn on a terminal, unless --quiet: never into a log file."""
    return not args.quiet and sys.stderr.isatty()


def bended_model(args: argparse.Namespace) -> BendedModule:
    """MODEL (with --checkpoint), wrapped."""
    return BendedModule(load_model(args.model, getattr(args, "checkpoint", None)))


def apply_bendings(bended: BendedModule, args: argparse.Namespace) -> list[str]:
    """Bend ``bended`` as --plugins, --mark, --config and --bend say; the keys bent."""
    from ..callbacks.importing import load_callbacks

    for path in getattr(args, "plugins", None) or []:
        load_callbacks(path)  # the user's own callbacks, which a configuration may name
    for spec in getattr(args, "mark", None) or []:
        alias, _, target = spec.partition("=")
        if not target:
            raise TorchbendError(
                f"--mark takes NAME=TARGET (such as latent=encoder_11), got {spec!r}"
            )
        bended.mark(alias, target)
    keys: list[str] = []
    if getattr(args, "config", None):
        keys += bended.bend(BendingConfig.load(args.config))
    for spec in getattr(args, "bend", None) or []:
        cb, pattern = parse_bend(spec)
        keys += bended.bend(cb, pattern)
    return keys


def sound_input(args: argparse.Namespace, bended: BendedModule) -> tuple[torch.Tensor, int]:
    """--sound (mono, at the model's rate), cut to its first --seconds, as ``[1, time]``, and
    its rate; a sound of no samples is an error."""
    from ..audio import load

    audio, rate = load(args.sound, sample_rate=model_sample_rate(bended.module), mono=True)
    if args.seconds is not None:
        audio = audio[:, : int(args.seconds * rate)]
    if audio.shape[-1] == 0:
        raise TorchbendError(f"--sound {args.sound} holds no samples to run; give a longer one")
    return audio, rate


def example_input(args: argparse.Namespace, bended: BendedModule) -> torch.Tensor:
    """The example input: --audio (padded to the model's ratio), or random of --input's shape."""
    if getattr(args, "audio", None):
        from ..audio import load

        audio, _ = load(args.audio, sample_rate=model_sample_rate(bended.module), mono=True)
        return padded(audio, ratio_of(bended.module))
    return torch.randn(*args.input, generator=torch.Generator().manual_seed(0))


def parse_bend(spec: str) -> tuple[BendingCallback, str]:
    """Parse ``'Mask(prob=0.3, dim=-2)@encoder.*conv$'`` into a callback and a pattern.

    Arguments are Python literals only (numbers, strings, tuples, None): nothing is evaluated.
    """
    from ..callbacks.importing import callback_from_name

    call, at, pattern = spec.partition("@")
    if not at or not pattern:
        raise TorchbendError(f"--bend takes 'Callback(args)@pattern', got {spec!r}")
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        raise TorchbendError(f"--bend: cannot read {call!r} as Callback(args)") from None
    if isinstance(node, ast.Name):
        name, args, kwargs = node.id, [], {}
    elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        name = ast.unparse(node.func)
        try:
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except ValueError:
            raise TorchbendError(f"--bend: arguments of {call!r} must be literals") from None
    else:
        raise TorchbendError(f"--bend: cannot read {call!r} as Callback(args)")
    cls = callback_from_name(name.replace(".", ":") if "." in name else name)
    try:
        return cls(*args, **kwargs), pattern
    except TypeError as e:
        raise TorchbendError(f"--bend {spec!r}: {e}") from None


MAX_INPUT_VALUES = 2**24
"""The most values an example input (``--input``) may hold: 64 MiB of float32, six minutes
of mono audio at 44.1 kHz; tracing allocates several times as much in activations."""


def parse_shape(text: str) -> tuple[int, ...]:
    """An input shape as the command takes it (``1x1x4096``): positive sizes joined by x,
    :data:`MAX_INPUT_VALUES` values at most."""
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(s < 1 for s in shape):
        raise argparse.ArgumentTypeError(
            f"expected positive sizes joined by 'x', such as 1x1x4096 ([batch, channels, "
            f"time]), got {text!r}"
        )
    if math.prod(shape) > MAX_INPUT_VALUES:
        raise argparse.ArgumentTypeError(
            f"expected {MAX_INPUT_VALUES} values at most (64 MiB of float32; the example "
            f"input need not be long), got {text!r}: {math.prod(shape)} values"
        )
    return shape


def output_path(path: str, option: str, suffixes: tuple[str, ...] = ()) -> Path:
    """``path`` checked before any work that would be lost: its folder exists and, if
    ``suffixes`` are given, it ends with one of them."""
    out = Path(path)
    if out.is_dir():
        raise TorchbendError(f"{option} {path!r} is a folder; give a file name in it")
    if not out.parent.is_dir():
        raise TorchbendError(
            f"{option} {path!r}: the folder {str(out.parent)!r} does not exist; create it first"
        )
    if suffixes and out.suffix.lower() not in suffixes:
        raise TorchbendError(
            f"{option} {path!r}: cannot write {out.suffix or 'a file without extension'}; "
            f"give a file ending in {', '.join(suffixes)}"
        )
    return out
