"""Clamp: limit the values of a weight or an activation to a range."""

from __future__ import annotations

import math

import torch

from ..errors import BendingError
from .base import BendingCallback

__all__ = ["Clamp"]


def _bound(arg: str, value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        raise BendingError(f"Clamp: {arg} must be a number or None (no bound), got nan")
    return value


class Clamp(BendingCallback):
    """Clamp the target to ``[min, max]`` (:func:`torch.clamp`).

    Args:
        min: lower bound, in the target's own units; ``None`` for no lower bound.
        max: upper bound, in the target's own units; ``None`` for no upper bound.

    With both bounds ``None`` the callback is the identity.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Clamp
        >>> Clamp(min=-1.0, max=0.5)(torch.tensor([-2.0, 0.0, 2.0]), "x")
        tensor([-1.0000,  0.0000,  0.5000])
    """

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        super().__init__()
        self._min = _bound("min", min)
        self._max = _bound("max", max)
        if self._min is not None and self._max is not None and self._min > self._max:
            raise BendingError(
                f"Clamp: min={self._min} is greater than max={self._max}; give min <= max"
            )

    @property
    def min(self) -> float | None:
        """Lower bound (``None``: none)."""
        return self._min

    @property
    def max(self) -> float | None:
        """Upper bound (``None``: none)."""
        return self._max

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        low = self.min
        high = self.max
        if low is None and high is None:
            return x
        return torch.clamp(x, low, high)

    def extra_repr(self) -> str:
        args = []
        if self.min is not None:
            args.append(f"min={self.min}")
        if self.max is not None:
            args.append(f"max={self.max}")
        return ", ".join(args)
