"""The sample rate and the ratio a model declares: its own attributes, or, for a TorchScript
file written for nn~ (a RAVE export), what nn~'s contract keeps in the file.

A RAVE export keeps its rate in ``sr`` (nn~ 1.6 and RAVE v2) or in a ``sampling_rate`` buffer
(RAVE v1), and its methods' ratios in ``<method>_params`` buffers, ``[in_channels, in_ratio,
out_channels, out_ratio]``: ``encode_params`` of a RAVE v2 file ends with 2048, one latent
frame per 2048 samples. nn~ runs such a file on buffers that are multiples of its largest
ratio; so does torchbend.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["model_ratio", "model_sample_rate"]

RATE_ATTRIBUTES = ("sample_rate", "sr", "sampling_rate")
"""Where a model keeps its sample rate: torchbend's models, nn~ files, RAVE v1 files."""


def _number(value: Any) -> int | float | None:
    """A positive number held as one (or as a one-element tensor), else ``None``."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype == torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return value


def model_sample_rate(module: nn.Module) -> int | None:
    """The sample rate ``module`` declares (``sample_rate``, ``sr`` or ``sampling_rate``, a
    number or a one-element tensor), in Hz; ``None`` if it declares none."""
    for name in RATE_ATTRIBUTES:
        rate = _number(getattr(module, name, None))
        if rate is not None:
            return int(rate)
    return None


def _method_params(module: nn.Module) -> list[list[int]]:
    """The ``[in_channels, in_ratio, out_channels, out_ratio]`` of each method ``module``
    registered for nn~ (its ``get_methods()``, else every ``<method>_params`` buffer)."""
    get_methods = getattr(module, "get_methods", None)
    try:
        names = list(get_methods()) if callable(get_methods) else []
    except Exception:  # a file whose method fails to run declares none
        names = []
    if not names:
        names = [
            name.removesuffix("_params")
            for name, _ in module.named_buffers(recurse=False)
            if name.endswith("_params")
        ]
    found = []
    for name in names:
        params = getattr(module, f"{name}_params", None)
        if isinstance(params, torch.Tensor) and params.shape == (4,):
            found.append([int(v) for v in params.tolist()])
    return found


def model_ratio(module: nn.Module) -> int:
    """Samples per frame of ``module``: its ``ratio`` attribute, else the largest ratio of the
    methods it registered for nn~ (a RAVE export: its latent's ratio), else 1."""
    ratio = getattr(module, "ratio", None)
    if isinstance(ratio, int) and not isinstance(ratio, bool) and ratio > 0:
        return ratio
    ratios = [r for params in _method_params(module) for r in (params[1], params[3]) if r > 0]
    return max(ratios, default=1)
