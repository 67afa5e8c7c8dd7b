"""What :func:`~torchbend.export.nntilde` is given, checked: method names, params, labels,
whole numbers in bounds, and a plain module wrapped and traced on the input its params declare."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..bended import BendedModule
from ..errors import ExportError, TracingError
from .contract import check_params

__all__ = ["bended_for_export", "checked_labels", "checked_params", "method_names", "whole"]


def method_names(methods: Sequence[str] | str | None) -> list[str]:
    if methods is None:
        return []
    if isinstance(methods, str):
        return [methods]
    names = list(methods)
    wrong = [m for m in names if not isinstance(m, str)]
    if wrong or not names:
        raise ExportError(f"methods must be names of methods, got {methods!r}")
    return list(dict.fromkeys(names))


def whole(value: Any, what: str, low: int, high: int, unit: str) -> int:
    """``value`` as an int in ``[low, high]``, or :class:`ExportError` saying what it got."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value != int(value):
        raise ExportError(f"{what} must be a whole number of {unit}, got {value!r}")
    if not low <= value <= high:
        raise ExportError(f"{what} must be {low} to {high} {unit}, got {value!r}")
    return int(value)


def checked_params(
    params: Mapping[str, Sequence[int]] | None,
) -> dict[str, list[int]] | None:
    if params is None:
        return None
    checked = {}
    for method, values in params.items():
        where = f"params[{method!r}]"
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, torch.Tensor)):
            raise ExportError(
                f"{where} must be [in_channels, in_ratio, out_channels, out_ratio], got {values!r}"
            )
        items = values.tolist() if isinstance(values, torch.Tensor) else list(values)
        checked[method] = [whole(v, where, 1, 2**16, "channels or samples") for v in items]
    return checked


def checked_labels(
    labels: Mapping[str, Sequence[str]] | None, what: str
) -> dict[str, list[str]] | None:
    if labels is None:
        return None
    checked = {}
    for method, given in labels.items():
        if isinstance(given, str) or not all(isinstance(g, str) for g in given):
            raise ExportError(f"{what}[{method!r}] must be a list of strings, got {given!r}")
        checked[method] = list(given)
    return checked


def bended_for_export(
    module: Any, methods: Sequence[str], params: Mapping[str, Any] | None
) -> BendedModule:
    """``module`` as a :class:`BendedModule` with its methods traced: a plain module is
    wrapped and traced on the input its ``params`` declare (a TorchScript file needs none)."""
    if isinstance(module, BendedModule):
        return module
    if isinstance(module, torch.jit.ScriptModule):
        return BendedModule(module)
    if not isinstance(module, torch.nn.Module):
        raise ExportError(
            f"nntilde exports a tb.BendedModule (or a torch.nn.Module), got {type(module).__name__}"
        )
    names = list(methods) or ["forward"]
    missing = [m for m in names if m not in (params or {})]
    if missing:
        example = ", ".join(
            f"{m!r}: [in_channels, in_ratio, out_channels, out_ratio]" for m in missing
        )
        raise ExportError(
            f"nntilde got a plain {type(module).__name__}, whose input channels it cannot "
            "know: wrap it (bended = tb.BendedModule(model)) and trace each method on an "
            f"example [batch, channels, time] input, or pass params={{{example}}}"
        )
    # nn~ runs the file buffer by buffer: a model that can stream is traced streaming.
    set_streaming = getattr(module, "set_streaming", None)
    if callable(set_streaming):
        set_streaming(True)
    bended = BendedModule(module)
    generator = torch.Generator().manual_seed(0)
    for method in names:
        in_channels, in_ratio, _, out_ratio = check_params(method, (params or {})[method])
        # Batch 2: torch.export fixes sizes of 1; a buffer nn~ gives, of whole frames.
        size = max(in_ratio, out_ratio, 2048) // in_ratio
        x = torch.randn(2, in_channels, size, generator=generator)
        first = bended.view().signature(method).first
        if first is None:
            raise ExportError(f"method {method!r} takes no input for nn~ to feed a signal to")
        try:
            bended.trace(method, **{first: x})  # type: ignore[arg-type]
        except TracingError as e:
            raise ExportError(
                f"nntilde wrapped {type(module).__name__} in a BendedModule, and tracing "
                f"{method!r} on an input of shape {list(x.shape)} (from params) failed: {e}"
            ) from e
    return bended
