"""WaveFolder: fold the values of an activation that exceed a threshold back inside it.

A drop-in callback file: load it with ``tb.load_callbacks("callbacks/wavefolder.py")``.
"""

from __future__ import annotations

import math
from typing import ClassVar, Optional

import torch

import torchbend as tb
from torchbend.controls import BendingParameter, ControlView


def fold(x: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """``x`` with every value beyond ``±threshold`` reflected back inside, as often as needed.

    Values within ``[-threshold, threshold]`` are kept exactly; ``threshold + d`` becomes
    ``threshold - d``, ``3 * threshold`` becomes ``-threshold``: a triangle wave of the input.
    """
    period = 4.0 * threshold
    phase = torch.remainder(x + threshold, period) / period
    folded = threshold - period * (phase - 0.5).abs()
    return torch.where(x.abs() <= threshold, x, folded.to(x.dtype))


class WaveFolder(tb.BendingCallback):
    """Fold back the values of the target that exceed ``threshold`` (a wavefolder).

    A value ``d`` above the threshold comes back ``d`` below it (and, past ``-threshold``,
    bounces again): loud passages gain harmonics instead of clipping, the classic sound of
    west-coast synthesizers.

    Args:
        threshold: the fold level, ``> 0``, in the target's own units; ``None`` (no fold)
            is the identity. May be a control (then always folding); while it ramps,
            activations get the change spread along their last axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> WaveFolder(1.0)(torch.tensor([0.5, 1.0, 1.5, 2.5, 3.0, -1.25]), "x")
        tensor([ 0.5000,  1.0000,  0.5000, -0.5000, -1.0000, -0.7500])
    """

    __jit_unused_properties__: ClassVar[list[str]] = ["threshold"]

    def __init__(self, threshold: float | BendingParameter | ControlView | None = None) -> None:
        super().__init__()
        self.number("threshold", threshold, _threshold)

    @property
    def threshold(self) -> float | None:
        """The fold level (``None``: no fold; a control's current value, kept above 0)."""
        threshold = self.value("threshold")
        return None if threshold is None else max(float(threshold), 1e-12)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        # Scripted, the callback keeps the number it was built with: TorchScript cannot read a
        # live control (and does not compile the eager branch).
        if torch.jit.is_scripting():
            threshold = torch.jit.annotate(Optional[float], self._threshold)  # noqa: UP045
            if threshold is None:
                return x
            return fold(x, torch.tensor(threshold, dtype=x.dtype, device=x.device))
        if self._threshold is None:
            return x
        # A number, or a tensor along time while a control ramps: fold() takes a tensor. A
        # control may go to 0 or below, where folding is undefined: keep it above 0.
        ramp = self.along("threshold", x)
        return fold(x, torch.as_tensor(ramp, dtype=x.dtype, device=x.device).clamp(min=1e-12))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        threshold = self.threshold
        if threshold is None:
            return weight
        return fold(weight, torch.tensor(threshold, dtype=weight.dtype, device=weight.device))


def _threshold(value: object) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value > 0 and math.isfinite(value))
    ):
        raise tb.BendingError(
            f"WaveFolder: threshold must be a finite number > 0 (or None, no fold), got {value!r}"
        )
    return float(value)
