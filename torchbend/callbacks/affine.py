"""Affine bendings: add a bias, multiply by a scale, or both."""

from __future__ import annotations

import math

import torch

from ..errors import BendingError
from .base import BendingCallback

__all__ = ["Affine", "Bias", "Scale"]


def _finite(owner: str, arg: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise BendingError(f"{owner}: {arg} must be a finite number, got {value}")
    return value


class Bias(BendingCallback):
    """Add a constant to the target: ``x + bias``.

    Args:
        bias: the constant added, in the target's own units. ``0`` is the identity.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Bias
        >>> Bias(0.5)(torch.ones(2), "x")
        tensor([1.5000, 1.5000])
    """

    def __init__(self, bias: float = 0.0) -> None:
        super().__init__()
        self._bias = _finite("Bias", "bias", bias)

    @property
    def bias(self) -> float:
        """The constant added to the target."""
        return self._bias

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        bias = self.bias
        # Short-circuit rather than add 0.: -0.0 + 0.0 is +0.0, and the identity must be exact.
        if bias == 0.0:
            return x
        return x + bias

    def extra_repr(self) -> str:
        return f"bias={self.bias}" if self.bias != 0.0 else ""


class Scale(BendingCallback):
    """Multiply the target by a constant: ``x * scale``.

    Args:
        scale: the factor (unitless). ``1`` is the identity, ``-1`` flips the sign.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Scale
        >>> Scale(2.0)(torch.ones(2), "x")
        tensor([2., 2.])
    """

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self._scale = _finite("Scale", "scale", scale)

    @property
    def scale(self) -> float:
        """The factor the target is multiplied by."""
        return self._scale

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        scale = self.scale
        if scale == 1.0:
            return x
        return x * scale

    def extra_repr(self) -> str:
        return f"scale={self.scale}" if self.scale != 1.0 else ""


class Affine(BendingCallback):
    """Scale the target, then add a constant: ``x * scale + bias``.

    Args:
        scale: the factor (unitless). ``1`` leaves the target's amplitude as is.
        bias: the constant added after scaling, in the target's own units.

    With ``scale=1`` and ``bias=0`` the callback is the identity.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Affine
        >>> Affine(scale=2.0, bias=-1.0)(torch.tensor([0.0, 1.0, 2.0]), "x")
        tensor([-1.,  1.,  3.])
    """

    def __init__(self, scale: float = 1.0, bias: float = 0.0) -> None:
        super().__init__()
        self._scale = _finite("Affine", "scale", scale)
        self._bias = _finite("Affine", "bias", bias)

    @property
    def scale(self) -> float:
        """The factor the target is multiplied by."""
        return self._scale

    @property
    def bias(self) -> float:
        """The constant added after scaling."""
        return self._bias

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        scale = self.scale
        bias = self.bias
        if scale != 1.0:
            x = x * scale
        if bias != 0.0:
            x = x + bias
        return x

    def extra_repr(self) -> str:
        args = []
        if self.scale != 1.0:
            args.append(f"scale={self.scale}")
        if self.bias != 0.0:
            args.append(f"bias={self.bias}")
        return ", ".join(args)
