"""BitCrusher: lower the bit depth and the sample rate of an activation, like a lo-fi sampler.

A drop-in callback file: load it with ``tb.load_callbacks("callbacks/bitcrusher.py")``.
"""

from __future__ import annotations

import torch

import torchbend as tb
from torchbend.controls import Control


def crush(x: torch.Tensor, bits: int, scale: float, hold: int) -> torch.Tensor:
    """``x`` rounded to steps of ``scale / 2**(bits - 1)``, then held for ``hold`` samples."""
    if bits > 0:
        step = scale / 2.0 ** (bits - 1)
        x = torch.round(x / step) * step
    if hold > 1 and x.dim() > 0:
        length = x.shape[-1]
        held = torch.div(torch.arange(length, device=x.device), hold, rounding_mode="floor")
        x = x.index_select(-1, held * hold)
    return x


class BitCrusher(tb.BendingCallback):
    """Reduce the bit depth and the sample rate of the target.

    Bit depth: values are rounded to steps of ``scale / 2**(bits - 1)``, so that
    ``[-scale, scale]`` holds ``2**bits`` levels (0 is one of them: silence stays silent;
    values beyond ``scale`` are not clipped). Sample rate: each sample is held for ``hold``
    samples along the last (time) axis (sample-and-hold), dividing the sample rate by
    ``hold``; the hold restarts at each call.

    Args:
        bits: bit depth, an int ``>= 0``; ``0`` leaves the depth alone. May be an int control.
        hold: samples each value is held for, an int ``>= 1``; ``1`` leaves the rate alone.
            May be an int control.
        scale: full scale in the target's own units, ``>= 1e-6``. May be a control.

    With ``bits=0`` and ``hold=1`` the callback is the identity.

    Shape:
        - Input: ``[..., time]``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> crusher = BitCrusher(bits=2, hold=2)
        >>> crusher(torch.tensor([0.1, 0.3, 0.6, -0.2, -0.9, 0.4]), "x")
        tensor([ 0.0000,  0.0000,  0.5000,  0.5000, -1.0000, -1.0000])
    """

    bits = tb.Argument(int, low=0, neutral=0, meaning="a bit depth")
    hold = tb.Argument(int, low=1, neutral=1, meaning="a number of samples")
    scale = tb.Argument(float, low=1e-6, meaning="the full scale")

    def __init__(
        self, bits: int | Control = 0, hold: int | Control = 1, scale: float | Control = 1.0
    ) -> None:
        super().__init__()
        self.bits = bits
        self.hold = hold
        self.scale = scale

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return crush(x, self.bits, self.scale, self.hold)
