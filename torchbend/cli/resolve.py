"""What the command's arguments name: a model, a bending, a shape, a file to write."""

from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import torch
from torch import nn

from ..callbacks.base import BendingCallback
from ..errors import TorchbendError

__all__ = ["MODEL_FORMS", "load_model", "output_path", "parse_bend", "parse_shape"]

MODEL_FORMS = (
    "a shipped model name (see `torchbend models`), a TorchScript file (.ts/.pt/.jit), a "
    "Python reference module:factory, or module:factory with --checkpoint FILE"
)


def load_model(spec: str, checkpoint: str | None = None) -> nn.Module:
    """Resolve MODEL as the command line gives it (see ``MODEL_FORMS``)."""
    path = Path(spec)
    if path.suffix in (".ts", ".pt", ".jit"):
        if not path.is_file():
            raise TorchbendError(f"no file {spec!r}; MODEL is {MODEL_FORMS}")
        try:
            return torch.jit.load(str(path))
        except Exception as e:  # torch raises RuntimeError, ValueError... for a bad file
            raise TorchbendError(f"{spec} is not a TorchScript file torch can load ({e})") from e
    if ":" in spec:
        return _from_factory(spec, checkpoint)
    if checkpoint is not None:
        raise TorchbendError(f"--checkpoint needs MODEL as module:factory, got {spec!r}")
    from .. import models

    try:
        return models.load(spec)
    except TorchbendError as e:
        raise TorchbendError(f"{e}; MODEL is {MODEL_FORMS}") from None


def _from_factory(spec: str, checkpoint: str | None) -> nn.Module:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise TorchbendError(f"cannot import {spec!r} ({e}); MODEL is {MODEL_FORMS}") from None
    if isinstance(factory, nn.Module):
        model = factory
    elif callable(factory):
        try:
            model = factory()
        except Exception as e:  # the user's own code: whatever it raises is its message
            raise TorchbendError(
                f"{spec}() failed: {type(e).__name__}: {e}. MODEL module:factory names a "
                "function or class that builds the model without arguments"
            ) from e
    else:
        raise TorchbendError(f"{spec} is a {type(factory).__name__}, not a model or a factory")
    if not isinstance(model, nn.Module):
        raise TorchbendError(f"{spec} gave a {type(model).__name__}, not an nn.Module")
    if checkpoint is not None:
        _load_checkpoint(model, checkpoint)
    return model.eval()


def _load_checkpoint(model: nn.Module, checkpoint: str) -> None:
    if not Path(checkpoint).is_file():
        raise TorchbendError(f"--checkpoint: no file {checkpoint!r}")
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as e:  # unpickling errors come in many types
        raise TorchbendError(
            f"--checkpoint {checkpoint!r} is not a PyTorch checkpoint torch.load can read "
            f"with weights_only=True ({type(e).__name__}: {str(e).splitlines()[0]})"
        ) from e
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise TorchbendError(
            f"--checkpoint {checkpoint!r} holds a {type(state).__name__}, not a state dict"
        )
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise TorchbendError(
            f"--checkpoint {checkpoint!r} does not fit {type(model).__name__}: "
            + " ".join(str(e).split())
        ) from e


def parse_bend(spec: str) -> tuple[BendingCallback, str]:
    """Parse ``'Mask(prob=0.3, dim=-2)@encoder.*conv$'`` into a callback and a pattern.

    Arguments are Python literals only (numbers, strings, tuples, None): nothing is evaluated.
    """
    from ..callbacks.loading import callback_from_name

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


def parse_shape(text: str) -> tuple[int, ...]:
    """An input shape as the command takes it (``1x1x4096``): positive sizes joined by x."""
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(s < 1 for s in shape):
        raise argparse.ArgumentTypeError(
            f"expected positive sizes joined by 'x', such as 1x1x4096 ([batch, channels, "
            f"time]), got {text!r}"
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
