"""Distortion: waveshaping of values (soft clipping, tanh, quantization, inversion, spread)."""

from __future__ import annotations

import math

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .base import BendingCallback

__all__ = ["Invert", "Quantize", "SoftClip", "Spread", "Tanh"]

MAX_BITS = 32


def soft_clip(x: torch.Tensor, drive: float | torch.Tensor) -> torch.Tensor:
    """``tanh(drive * x) / tanh(drive)``; exactly ``x`` when ``drive`` is the number 0.

    Drives below ``1e-4`` are computed as ``1e-4`` (a literal: TorchScript reads no float
    globals): the ratio loses precision as the drive goes to 0, and is 0 / 0 at 0, while it
    differs from ``x`` by about ``drive² x³ / 3``.
    """
    if isinstance(drive, torch.Tensor):
        drives = drive.clamp(min=1e-4)
        return torch.tanh(x * drives) / torch.tanh(drives)
    if drive == 0.0:
        return x
    drive = max(drive, 1e-4)
    return torch.tanh(x * drive) / math.tanh(drive)


def quantize(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` rounded to ``2**bits`` evenly spaced levels over ``[-max|x|, max|x|]``."""
    if bits == 0 or x.numel() == 0:
        return x
    y = x if x.is_floating_point() else x.float()
    peak = y.abs().amax()
    step = 2.0 * peak / (2.0**bits - 1.0)
    levels = torch.round((y + peak) / step) * step - peak
    # torch.where rather than a test of peak == 0 (all zeros, 0 / 0 above), which would wait
    # for the GPU.
    return torch.where(peak > 0, levels, y)


def spread(x: torch.Tensor, amount: float | torch.Tensor) -> torch.Tensor:
    """``mean + (x - mean) * (1 + amount)``, the mean taken along the last axis."""
    if not isinstance(amount, torch.Tensor):
        if amount == 0.0:
            return x
    y = x if x.is_floating_point() else x.float()
    mean = y.mean(-1, keepdim=True)
    # Two branches, so that TorchScript knows which sum each one is.
    if isinstance(amount, torch.Tensor):
        return mean + (y - mean) * (1.0 + amount)
    return mean + (y - mean) * (1.0 + amount)


class SoftClip(BendingCallback):
    """Soft-clip the target: ``tanh(drive * x) / tanh(drive)``.

    Values are pushed through a ``tanh`` curve whose slope at 0 is ``drive / tanh(drive)``
    and which maps ``±1`` to ``±1``: ``|x| < 1`` is boosted, ``|x| > 1`` squashed towards
    ``1 / tanh(drive)``; high drives clip hard. As ``drive`` goes to 0 the curve tends to the
    identity, so that turning the drive up from 0 starts smoothly (the often seen
    ``tanh(x * (1 + drive)) / tanh(1 + drive)`` jumps from ``x`` to ``tanh(x) / tanh(1)``
    when the drive leaves 0).

    Args:
        drive: how hard to clip, ``>= 0`` (unitless). ``0`` is the identity (short-circuit);
            ``1`` is a gentle saturation, ``10`` nearly a hard clip at ±1. May be a control;
            while it ramps, activations get the change spread along their last axis.

    Shape:
        - Input: any.
        - Output: same as input (floating point).

    Example:
        >>> import torch
        >>> from torchbend.callbacks import SoftClip
        >>> SoftClip(drive=2.0)(torch.tensor([-4.0, -1.0, 0.0, 0.5, 1.0]), "x")
        tensor([-1.0373, -1.0000,  0.0000,  0.7900,  1.0000])
    """

    drive = Argument(float, low=0.0, neutral=0.0, ramps=True)

    def __init__(self, drive: float | Control = 0.0) -> None:
        super().__init__()
        self.drive = drive

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return soft_clip(x, self.along("drive", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return soft_clip(weight, self.drive)


class Tanh(BendingCallback):
    """Apply :func:`torch.tanh` to the target: values squashed into ``(-1, 1)``.

    Args:
        active: ``False`` is the identity. May be a bool control.

    Shape:
        - Input: any.
        - Output: same as input (floating point).

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Tanh
        >>> Tanh()(torch.tensor([0.0, 1.0, 100.0]), "x")
        tensor([0.0000, 0.7616, 1.0000])
    """

    active = Argument(bool, neutral=False)

    def __init__(self, active: bool | Control = True) -> None:
        super().__init__()
        self.active = active

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if not self.active:
            return x
        return torch.tanh(x)


class Quantize(BendingCallback):
    """Quantize the target uniformly to ``2 ** bits`` levels.

    The levels are evenly spaced over ``[-m, m]``, where ``m = max |x|`` is the largest
    magnitude of the tensor being bent (for an activation, of each call), and each element is
    rounded to the nearest level. With ``bits=1`` every element becomes ``±m``; an even number
    of levels has no level at 0.

    Args:
        bits: bit depth, an int from 1 to 32; ``None`` or ``0`` is the identity. May be an int
            control (then ``0`` switches it off).

    Shape:
        - Input: any.
        - Output: same as input (floating point).

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Quantize
        >>> Quantize(bits=2)(torch.tensor([-3.0, -0.4, 0.2, 1.4, 3.0]), "x")
        tensor([-3., -1.,  1.,  1.,  3.])
    """

    bits = Argument(int, low=0, high=MAX_BITS, neutral=0, none="", meaning="a bit depth")

    def __init__(self, bits: int | Control | None = None) -> None:
        super().__init__()
        self.bits = bits

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        bits = self.bits
        if bits is None:
            return x
        return quantize(x, bits)


INVERT_MODES = ("sign", "one_minus")


class Invert(BendingCallback):
    """Invert the target: ``-x`` (``mode="sign"``) or ``1 - x`` (``mode="one_minus"``).

    ``"sign"`` flips a signal upside down; ``"one_minus"`` turns values in ``[0, 1]`` (gates,
    masks, probabilities, images) into their complement.

    Args:
        mode: ``"sign"`` or ``"one_minus"``.
        active: ``False`` is the identity. May be a bool control.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Invert
        >>> x = torch.tensor([0.0, 0.25, 1.0])
        >>> Invert()(x, "x"), Invert("one_minus")(x, "x")
        (tensor([-0.0000, -0.2500, -1.0000]), tensor([1.0000, 0.7500, 0.0000]))
    """

    active = Argument(bool, neutral=False)

    def __init__(self, mode: str = "sign", active: bool | Control = True) -> None:
        super().__init__()
        if mode not in INVERT_MODES:
            raise BendingError(
                f"{type(self).__name__}: mode must be one of "
                f"{', '.join(map(repr, INVERT_MODES))}, got {mode!r}"
            )
        self.mode = mode
        self.active = active

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if not self.active:
            return x
        if self.mode == "one_minus":
            return 1 - x
        return -x


class Spread(BendingCallback):
    """Push values away from (or towards) their mean along the last axis.

    ``mean + (x - mean) * (1 + amount)``, with ``mean`` the mean of the target along its last
    axis: ``amount > 0`` widens the dynamics around the mean, ``-1 < amount < 0`` narrows
    them, ``-1`` flattens the target to its mean, ``< -1`` mirrors it around the mean.

    Args:
        amount: the change of distance to the mean (unitless), a finite number. ``0`` is the
            identity. May be a control; while it ramps, activations get the change spread
            along their last axis.

    Shape:
        - Input: any, with at least one axis.
        - Output: same as input (floating point).

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Spread
        >>> Spread(1.0)(torch.tensor([1.0, 2.0, 3.0]), "x")
        tensor([0., 2., 4.])
    """

    amount = Argument(float, neutral=0.0, ramps=True)

    def __init__(self, amount: float | Control = 0.0) -> None:
        super().__init__()
        self.amount = amount

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return spread(x, self.along("amount", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return spread(weight, self.amount)
