"""BitCrusher: lower the bit depth and the sample rate of an activation, like a lo-fi sampler.

A drop-in callback file: load it with ``tb.load_callbacks("callbacks/bitcrusher.py")``.
"""

from __future__ import annotations

from typing import ClassVar

import torch

import torchbend as tb
from torchbend.controls import BendingParameter, ControlView


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
        scale: full scale in the target's own units, ``> 0``. May be a control.

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

    __jit_unused_properties__: ClassVar[list[str]] = ["bits", "hold", "scale"]

    def __init__(
        self,
        bits: int | BendingParameter | ControlView = 0,
        hold: int | BendingParameter | ControlView = 1,
        scale: float | BendingParameter | ControlView = 1.0,
    ) -> None:
        super().__init__()
        self.number("bits", bits, lambda v: _int("bits", v, 0))
        self.number("hold", hold, lambda v: _int("hold", v, 1))
        self.number("scale", scale, _scale)

    @property
    def bits(self) -> int:
        """Bit depth (a control's current value; 0 or below: full depth)."""
        return int(self.value("bits"))

    @property
    def hold(self) -> int:
        """Samples each value is held for (a control's current value; 1 or below: none)."""
        return int(self.value("hold"))

    @property
    def scale(self) -> float:
        """Full scale (a control's current value)."""
        # A control may go to 0 or below: keep a step that divides.
        return max(float(self.value("scale")), 1e-12)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        # Scripted, the callback keeps the numbers it was built with: TorchScript cannot read a
        # live control (and does not compile the eager branch).
        if torch.jit.is_scripting():
            bits = torch.jit.annotate(int, self._bits)
            hold = torch.jit.annotate(int, self._hold)
            scale = torch.jit.annotate(float, self._scale)
        else:
            bits, hold, scale = self.bits, self.hold, self.scale
        return crush(x, bits, scale, hold)


def _int(arg: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise tb.BendingError(f"BitCrusher: {arg} must be an int >= {low}, got {value!r}")
    if value < low:
        raise tb.BendingError(f"BitCrusher: {arg} must be an int >= {low}, got {value!r}")
    return int(value)


def _scale(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e30:
        raise tb.BendingError(f"BitCrusher: scale must be a number > 0, got {value!r}")
    return float(value)
