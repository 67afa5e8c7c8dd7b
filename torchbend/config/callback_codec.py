"""How a callback and its arguments are written in a configuration, and read back."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Any

import torch

from ..callbacks.base import BendingCallback, Chain
from ..controls import BendingParameter, ControlView
from ..errors import BendingError, did_you_mean
from .tensors import SideFile, decode_tensor, encode_tensor

__all__ = ["callback_dict", "callback_from_dict", "decode", "encode"]


def class_name(cb: BendingCallback) -> str:
    """How a configuration names the class of ``cb``: by class name for torchbend's own,
    ``module:qualname`` for others."""
    from .. import callbacks

    cls = type(cb)
    if getattr(callbacks, cls.__name__, None) is cls:
        return cls.__name__
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise BendingError(
            f"{cls.__qualname__} is defined in a script or a function and cannot be found by "
            "name when loading; define it in an importable module or a file loaded with "
            "tb.load_callbacks"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def encode(value: Any, where: str, side: SideFile | None = None) -> Any:
    """Argument ``value`` (at ``where``) as JSON: large tensors go to ``side`` if given."""
    if isinstance(value, BendingParameter):
        return {"control": value.name}
    if isinstance(value, ControlView):
        return {"control": value.name, "scale": value.scale, "offset": value.offset}
    if isinstance(value, BendingCallback):
        return {"callback": callback_dict(value, side)}
    if isinstance(value, torch.Tensor):
        return encode_tensor(value, where, side)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [encode(v, where, side) for v in value]}
    if isinstance(value, list):
        return [encode(v, where, side) for v in value]
    raise BendingError(
        f"{where}: argument of type {type(value).__name__} ({value!r}) cannot be saved; callback "
        "arguments must be numbers, strings, None, lists, tuples, tensors, controls or callbacks"
    )


def callback_dict(cb: BendingCallback, side: SideFile | None) -> dict[str, Any]:
    """``cb`` as JSON: its class and its arguments (see :func:`encode`)."""
    if isinstance(cb, Chain):
        chained = [callback_dict(c, side) for c in cb.chained()]
        return {"class": "Chain", "args": {"callbacks": chained}}
    name = class_name(cb)
    arguments = cb.arguments()
    if "seed" in arguments and arguments["seed"] is None:
        warnings.warn(
            f"{cb!r} has no seed: it draws from torch's global generator, so a config loaded "
            "from this file will not draw the same values; give it seed=<int>",
            stacklevel=4,  # the caller of to_dict() or save()
        )
    args = {k: encode(v, f"{name}.{k}", side) for k, v in arguments.items()}
    return {"class": name, "args": args}


def decode(
    value: Any,
    controls: dict[str, BendingParameter],
    where: str,
    allow: frozenset[str],
    folder: Path | None = None,
) -> Any:
    """What :func:`encode` wrote, with controls by name from ``controls``."""
    if isinstance(value, list):
        return [decode(v, controls, where, allow, folder) for v in value]
    if isinstance(value, dict):
        if "tuple" in value:
            return tuple(decode(v, controls, where, allow, folder) for v in value["tuple"])
        if "callback" in value:
            return callback_from_dict(value["callback"], controls, where, allow, folder)
        if "tensor" in value:
            return decode_tensor(value["tensor"], where, folder)
        if "control" in value:
            name = value["control"]
            if name not in controls:
                raise BendingError(f"{where} uses control {name!r}, which the file does not define")
            control = controls[name]
            if "scale" in value or "offset" in value:
                return ControlView(control, value.get("scale", 1.0), value.get("offset", 0.0))
            return control
        raise BendingError(f"{where}: cannot read argument {value!r}")
    return value


def callback_from_dict(
    d: dict[str, Any],
    controls: dict[str, BendingParameter],
    where: str,
    allow: frozenset[str],
    folder: Path | None,
) -> BendingCallback:
    """The callback :func:`callback_dict` wrote (its class found as ``allow`` lets it)."""
    from ..callbacks.importing import callback_from_name

    name = d["class"]
    if name == "Chain":
        return Chain(
            *[callback_from_dict(c, controls, where, allow, folder) for c in d["args"]["callbacks"]]
        )
    try:
        cls = callback_from_name(name, imports=allow)
    except BendingError as e:
        raise BendingError(f"{where}: {e}") from None
    args = {
        k: decode(v, controls, f"{where} ({name}.{k})", allow, folder)
        for k, v in d.get("args", {}).items()
    }
    try:
        return cls(**args)
    except BendingError as e:
        raise BendingError(f"{where}: {e}") from None
    except TypeError as e:
        raise BendingError(f"{where}: {wrong_arguments(cls, name, args, e)}") from None
    except Exception as e:  # a callback of a loaded file may raise anything: name where
        raise BendingError(
            f"{where}: {name}({', '.join(sorted(args))}) failed: {type(e).__name__}: {e}"
        ) from e


def wrong_arguments(cls: type, name: str, args: dict[str, Any], error: TypeError) -> str:
    """What is wrong with the arguments a callback refused: those it does not take (and what
    it takes), else what Python said (a required argument left out)."""
    parameters = list(inspect.signature(cls).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return f"{name}({', '.join(sorted(args))}) failed: {error}"
    takes = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [a for a in sorted(args) if a not in takes]
    if not unknown:
        return f"{name}({', '.join(sorted(args))}) failed: {error}"
    named = ", ".join(map(repr, unknown))
    return (
        f"{name} does not take the argument{'s' if len(unknown) > 1 else ''} {named}; it "
        f"takes {', '.join(takes) or 'none'}{did_you_mean(unknown[0], takes)}"
    )
