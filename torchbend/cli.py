"""The ``torchbend`` command: inspect, bend, export, check, play live, and the demo."""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .bended import BendedModule
from .callbacks.base import BendingCallback
from .config import BendingConfig
from .errors import TorchbendError

__all__ = ["load_model", "main", "parse_bend"]

MODEL_FORMS = (
    "a shipped model name (see torchbend.models), a TorchScript file (.ts/.pt), a Python "
    " reference module:factory, or module:factory with --checkpoint FILE"
)


def load_model(spec: str, checkpoint: str | None = None) -> nn.Module:
    """Resolve MODEL as the command line gives it (see ``MODEL_FORMS``)."""
    path = Path(spec)
    if path.suffix in (".ts", ".pt", ".jit") and path.exists():
        return torch.jit.load(str(path))
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise TorchbendError(f"cannot import {spec!r} ({e}); MODEL is {MODEL_FORMS}") from None
        model = factory() if not isinstance(factory, nn.Module) else factory
        if not isinstance(model, nn.Module):
            raise TorchbendError(f"{spec} gave a {type(model).__name__}, not an nn.Module")
        if checkpoint is not None:
            state = torch.load(checkpoint, map_location="cpu", weights_only=True)
            model.load_state_dict(
                state.get("state_dict", state) if isinstance(state, dict) else state
            )
        return model.eval()
    if checkpoint is not None:
        raise TorchbendError(f"--checkpoint needs MODEL as module:factory, got {spec!r}")
    from . import models

    try:
        return models.load(spec)
    except TorchbendError as e:
        raise TorchbendError(f"{e}; MODEL is {MODEL_FORMS}") from None


def parse_bend(spec: str) -> tuple[BendingCallback, str]:
    """Parse ``'Mask(prob=0.3, dim=-2)@encoder.*conv$'`` into a callback and a pattern.

    Arguments are Python literals only (numbers, strings, tuples, None): nothing is evaluated.
    """
    from .callbacks.loading import callback_from_name

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


def _bended(args: argparse.Namespace) -> BendedModule:
    return BendedModule(load_model(args.model, getattr(args, "checkpoint", None)))


def _apply_bendings(bended: BendedModule, args: argparse.Namespace) -> list[str]:
    keys: list[str] = []
    if getattr(args, "config", None):
        keys += bended.bend(BendingConfig.load(args.config))
    for spec in getattr(args, "bend", None) or []:
        cb, pattern = parse_bend(spec)
        keys += bended.bend(cb, pattern)
    return keys


def _example(args: argparse.Namespace, bended: Any) -> dict[str, Any]:
    if getattr(args, "audio", None):
        from .audio import load

        audio, _ = load(
            args.audio, sample_rate=getattr(bended.module, "sample_rate", None), mono=True
        )
        return {"x": audio[None]}
    shape = [int(s) for s in args.input.split("x")]
    return {"x": torch.randn(*shape)}


def _trace(bended: BendedModule, fn: str, x: torch.Tensor) -> None:
    """Trace ``fn`` with ``x`` as its first argument (whatever the argument's name)."""
    names = bended.view().signature(fn).names
    if not names:
        raise TorchbendError(f"{fn} takes no argument to feed audio to")
    inputs: dict[str, Any] = {names[0]: x}
    bended.trace(fn, **inputs)


def cmd_inspect(args: argparse.Namespace) -> int:
    model = _bended(args)
    model.print_weights()
    _trace(model, args.fn, next(iter(_example(args, model).values())))
    print()
    model.print_activations(args.fn)
    return 0


def cmd_bend(args: argparse.Namespace) -> int:
    from .audio import load, save
    from .audio.stream import Stream

    model = _bended(args)
    inner = model.module
    sample_rate = int(getattr(inner, "sample_rate", 44100))
    audio, sr = load(args.input, sample_rate=sample_rate, mono=True)
    ratio = int(getattr(inner, "ratio", 1))
    _trace(model, args.fn, audio[None, :, : max(ratio, 4096 // ratio * ratio)])
    keys = _apply_bendings(model, args)
    print(f"bent {len(keys)} target(s): {keys}", file=sys.stderr)
    stream = Stream(model, method=args.fn, block_size=args.block_size, sample_rate=sr)

    def progress(i: int, count: int) -> None:
        if not args.quiet:
            bar = "#" * int(30 * i / count)
            print(f"\r[{bar:<30}] {i / count:4.0%}", end="", file=sys.stderr, flush=True)

    with torch.inference_mode():
        out = stream.process(audio, before_block=progress)
    if not args.quiet:
        print(f"\r[{'#' * 30}] 100%", file=sys.stderr)
    save(args.output, out, sr)
    print(f"wrote {args.output} ({stream.stats.realtime_factor:.0f}x realtime)", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from . import export

    model = _bended(args)
    if isinstance(model.module, torch.jit.ScriptModule):
        raise TorchbendError(
            "export takes a Python model (a shipped name or module:factory), not a TorchScript "
            "file: bend a TorchScript file with `torchbend bend`, or from Python"
        )
    x = next(iter(_example(args, model).values()))
    _trace(model, args.fn, x)
    keys = _apply_bendings(model, args)
    print(f"bent {len(keys)} target(s)", file=sys.stderr)
    inputs: dict[str, Any] = {model.view().signature(args.fn).names[0]: x}
    if args.format == "nntilde":
        sample_rate = int(getattr(model.module, "sample_rate", 44100))
        export.nntilde(model, args.output, methods=(args.fn,), sample_rate=sample_rate)
    elif args.format == "torchscript":
        export.torchscript(model, args.output)
    elif args.format == "pt2":
        export.pt2(model, args.output, fn=args.fn, **inputs)
    else:
        export.onnx(model, args.output, fn=args.fn, **inputs)
    print(f"wrote {args.output}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .export import check_nntilde

    report = check_nntilde(args.file)
    print(report)
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    from .audio.live import live

    model = _bended(args)
    if isinstance(model, BendedModule):
        _trace(model, args.fn, torch.zeros(1, 1, args.block_size))
    _apply_bendings(model, args)
    live(model, method=args.fn, block_size=args.block_size, osc_port=args.osc_port)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(Path(args.out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchbend", description="Network bending for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help=f"MODEL: {MODEL_FORMS}")
        p.add_argument("--checkpoint", help="weights for a module:factory MODEL")
        p.add_argument("--fn", default="forward", help="method to trace and run")

    def bend_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bend", action="append", help="'Callback(args)@pattern', repeatable")
        p.add_argument("--config", help="a bending configuration (JSON)")

    p = sub.add_parser("inspect", help="print the weights and activations tables")
    model_args(p)
    p.add_argument("--input", default="1x1x4096", help="example input shape, e.g. 1x1x4096")
    p.add_argument("--audio", help="an audio file as example input")
    p.set_defaults(run=cmd_inspect)

    p = sub.add_parser("bend", help="render an audio file through a bended model")
    model_args(p)
    p.add_argument("input")
    p.add_argument("output")
    bend_args(p)
    p.add_argument("--block-size", type=int, default=8192)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=cmd_bend)

    p = sub.add_parser("export", help="export a bended model")
    model_args(p)
    bend_args(p)
    p.add_argument("--format", choices=("nntilde", "torchscript", "pt2", "onnx"), default="nntilde")
    p.add_argument("--input", default="1x1x4096")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(run=cmd_export)

    p = sub.add_parser("check", help="check a .ts file the way nn~ will call it")
    p.add_argument("file")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("live", help="play a bended model on the sound card")
    model_args(p)
    bend_args(p)
    p.add_argument("--osc-port", type=int)
    p.add_argument("--block-size", type=int, default=2048)
    p.set_defaults(run=cmd_live)

    p = sub.add_parser("demo", help="bend the shipped model several ways on the shipped sounds")
    p.add_argument("--out", default="out/demo")
    p.set_defaults(run=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except TorchbendError as e:
        print(f"torchbend {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
