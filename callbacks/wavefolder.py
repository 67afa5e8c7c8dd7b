"""WaveFolder: fold the values of an activation that exceed a threshold back inside it.

A drop-in callback file: load it with ``tb.load_callbacks("callbacks/wavefolder.py")``.
"""

from __future__ import annotations

import torch

import torchbend as tb
from torchbend.controls import Control


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
        threshold: the fold level, ``>= 1e-6``, in the target's own units; ``None`` (no fold)
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

    threshold = tb.Argument(
        float, low=1e-6, neutral=None, none="no fold", meaning="a fold level", ramps=True
    )

    def __init__(self, threshold: float | Control | None = None) -> None:
        super().__init__()
        self.threshold = threshold

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        threshold = self.threshold
        if threshold is None:
            return x
        # A number, or a tensor along time while a control ramps.
        return fold(x, level(self.along("threshold", x), x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        threshold = self.threshold  # weights crossfade over a ramp: no ramp along their axis
        if threshold is None:
            return weight
        return fold(weight, level(threshold, weight))


def level(threshold: float | torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``threshold`` as a tensor of ``x``'s dtype and device."""
    if isinstance(threshold, torch.Tensor):
        return threshold.to(dtype=x.dtype, device=x.device)
    return torch.tensor(threshold, dtype=x.dtype, device=x.device)
