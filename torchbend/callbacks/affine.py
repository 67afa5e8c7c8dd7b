"""Affine bendings: add a bias, multiply by a scale, or both."""

from __future__ import annotations

import torch

from ..controls import Control
from .argument import Argument
from .base import BendingCallback

__all__ = ["Affine", "Bias", "Scale"]


def add(x: torch.Tensor, bias: float | torch.Tensor) -> torch.Tensor:
    """``x + bias``, exactly ``x`` when ``bias`` is the number 0."""
    if isinstance(bias, torch.Tensor):
        return x + bias
    # Short-circuit rather than add 0.: -0.0 + 0.0 is +0.0, and the identity must be exact.
    if bias == 0.0:
        return x
    return x + bias


def multiply(x: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """``x * scale``, exactly ``x`` when ``scale`` is the number 1."""
    if isinstance(scale, torch.Tensor):
        return x * scale
    if scale == 1.0:
        return x
    return x * scale


class Bias(BendingCallback):
    """Add a constant to the target: ``x + bias``.

    Args:
        bias: the constant added, in the target's own units. ``0`` is the identity. May be a
            control; while it ramps, activations get the change spread along their last axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Bias
        >>> Bias(0.5)(torch.ones(2), "x")
        tensor([1.5000, 1.5000])
    """

    bias = Argument(float, neutral=0.0, ramps=True)

    def __init__(self, bias: float | Control = 0.0) -> None:
        super().__init__()
        self.bias = bias

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return add(x, self.along("bias", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return add(weight, self.bias)


class Scale(BendingCallback):
    """Multiply the target by a constant: ``x * scale``.

    Args:
        scale: the factor (unitless). ``1`` is the identity, ``-1`` flips the sign. May be a
            control; while it ramps, activations get the change spread along their last axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Scale
        >>> Scale(2.0)(torch.ones(2), "x")
        tensor([2., 2.])
    """

    scale = Argument(float, neutral=1.0, ramps=True)

    def __init__(self, scale: float | Control = 1.0) -> None:
        super().__init__()
        self.scale = scale

    def static_factor(self, name: str) -> torch.Tensor | None:
        start, end, value = self._ramps["scale"]
        return None if start != end else torch.tensor(value)  # a ramp varies along time

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return multiply(x, self.along("scale", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return multiply(weight, self.scale)


class Affine(BendingCallback):
    """Scale the target, then add a constant: ``x * scale + bias``.

    Args:
        scale: the factor (unitless). ``1`` leaves the target's amplitude as is.
        bias: the constant added after scaling, in the target's own units.

    With ``scale=1`` and ``bias=0`` the callback is the identity. Both may be controls.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Affine
        >>> Affine(scale=2.0, bias=-1.0)(torch.tensor([0.0, 1.0, 2.0]), "x")
        tensor([-1.,  1.,  3.])
    """

    scale = Argument(float, neutral=1.0, ramps=True)
    bias = Argument(float, neutral=0.0, ramps=True)

    def __init__(self, scale: float | Control = 1.0, bias: float | Control = 0.0) -> None:
        super().__init__()
        self.scale = scale
        self.bias = bias

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return add(multiply(x, self.along("scale", x)), self.along("bias", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return add(multiply(weight, self.scale), self.bias)
