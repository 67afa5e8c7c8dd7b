"""What a model reference names: a shipped model, a TorchScript file, or a Python factory
(with a checkpoint), as the command line and sweep specifications give it."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from ..errors import TorchbendError

__all__ = ["MODEL_FORMS", "load_model"]

MODEL_FORMS = (
    "a shipped model name (see `torchbend models`), a TorchScript file (.ts/.pt/.jit), a "
    "Python reference module:factory, or module:factory with --checkpoint FILE"
)


def load_model(spec: str, checkpoint: str | None = None, option: str = "--checkpoint") -> nn.Module:
    """Resolve MODEL as the command line gives it (see ``MODEL_FORMS``); errors about the
    checkpoint name it as ``option`` (the command's flag, or a sweep's field)."""
    path = Path(spec)
    if path.suffix in (".ts", ".pt", ".jit"):
        if not path.is_file():
            raise TorchbendError(f"no file {spec!r}; MODEL is {MODEL_FORMS}")
        try:
            return torch.jit.load(str(path))
        except Exception as e:  # torch raises RuntimeError, ValueError... for a bad file
            raise TorchbendError(f"{spec} is not a TorchScript file torch can load ({e})") from e
    if ":" in spec:
        return _from_factory(spec, checkpoint, option)
    if checkpoint is not None:
        raise TorchbendError(f"{option} needs MODEL as module:factory, got {spec!r}")
    from .checkpoints import load

    try:
        return load(spec)
    except TorchbendError as e:
        raise TorchbendError(f"{e}; MODEL is {MODEL_FORMS}") from None


def _import(name: str) -> ModuleType:
    """Import module ``name`` as ``python -m`` finds it: installed, or in the current folder.

    The current folder is appended to ``sys.path`` (so that a file there never shadows an
    installed module) only when ``name`` is found nowhere else, and stays there for what the
    module imports later and for the processes a sweep starts.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        here = os.getcwd()
        if e.name != name.partition(".")[0] or here in sys.path:
            raise
        sys.path.append(here)
        importlib.invalidate_caches()
        return importlib.import_module(name)


def _from_factory(spec: str, checkpoint: str | None, option: str) -> nn.Module:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(_import(module_name), attr)
    except (ImportError, AttributeError, ValueError) as e:
        where = ""
        if isinstance(e, ModuleNotFoundError):
            where = (
                f"; modules are looked for among installed packages and in the current folder "
                f"{os.getcwd()!r}: run from the folder that holds it, or add that folder to "
                "PYTHONPATH"
            )
        raise TorchbendError(
            f"cannot import {spec!r} ({e}){where}; MODEL is {MODEL_FORMS}"
        ) from None
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
        _load_checkpoint(model, checkpoint, option)
    return model.eval()


def _load_checkpoint(model: nn.Module, checkpoint: str, option: str) -> None:
    if not Path(checkpoint).is_file():
        raise TorchbendError(f"{option}: no file {checkpoint!r}")
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as e:  # unpickling errors come in many types
        raise TorchbendError(
            f"{option} {checkpoint!r} is not a PyTorch checkpoint torch.load can read "
            f"with weights_only=True ({type(e).__name__}: {str(e).splitlines()[0]})"
        ) from e
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise TorchbendError(
            f"{option} {checkpoint!r} holds a {type(state).__name__}, not a state dict"
        )
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise TorchbendError(
            f"{option} {checkpoint!r} does not fit {type(model).__name__}: "
            + " ".join(str(e).split())
        ) from e
