"""Clamp: limit the values of a weight or an activation to a range."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, Optional

import torch

from ..errors import BendingError
from .args import Control
from .base import BendingCallback

__all__ = ["Clamp"]


def _bound(arg: str) -> Callable[[Any], float | None]:
    def check(value: Any) -> float | None:
        if value is None:
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if math.isnan(number):
            raise BendingError(f"Clamp: {arg} must be a number or None (no bound), got {value!r}")
        return number

    return check


def clamp(
    x: torch.Tensor, low: float | torch.Tensor | None, high: float | torch.Tensor | None
) -> torch.Tensor:
    """``x`` clamped to ``[low, high]`` (bounds may be tensors that broadcast onto ``x``)."""
    if low is None and high is None:
        return x
    if isinstance(low, torch.Tensor) or isinstance(high, torch.Tensor):
        # torch.clamp takes two numbers or two tensors, not one of each: apply them in turn,
        # as torch.clamp does (min first, then max).
        if low is not None:
            x = torch.maximum(x, low) if isinstance(low, torch.Tensor) else x.clamp(min=low)
        if high is not None:
            x = torch.minimum(x, high) if isinstance(high, torch.Tensor) else x.clamp(max=high)
        return x
    return torch.clamp(x, low, high)


class Clamp(BendingCallback):
    """Clamp the target to ``[min, max]`` (:func:`torch.clamp`).

    Args:
        min: lower bound, in the target's own units; ``None`` for no lower bound.
        max: upper bound, in the target's own units; ``None`` for no upper bound.

    With both bounds ``None`` the callback is the identity. Either bound may be a control
    (then always a bound); while it ramps, activations get the change spread along their last
    axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Clamp
        >>> Clamp(min=-1.0, max=0.5)(torch.tensor([-2.0, 0.0, 2.0]), "x")
        tensor([-1.0000,  0.0000,  0.5000])
    """

    __jit_unused_properties__: ClassVar[list[str]] = ["min", "max"]

    def __init__(
        self,
        min: float | Control | None = None,
        max: float | Control | None = None,
    ) -> None:
        super().__init__()
        self.number("min", min, _bound("min"))
        self.number("max", max, _bound("max"))
        low, high = self.min, self.max
        if low is not None and high is not None and low > high:
            raise BendingError(f"Clamp: min={low} is greater than max={high}; give min <= max")

    @property
    def min(self) -> float | None:
        """Lower bound (``None``: none; a control's current value)."""
        return self.value("min")

    @property
    def max(self) -> float | None:
        """Upper bound (``None``: none; a control's current value)."""
        return self.value("max")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            low = torch.jit.annotate(Optional[float], self._min)  # noqa: UP045 - a runtime type
            high = torch.jit.annotate(Optional[float], self._max)  # noqa: UP045
            if low is None and high is None:
                return x
            return torch.clamp(x, low, high)
        low = None if self._min is None else self.along("min", x)
        high = None if self._max is None else self.along("max", x)
        return clamp(x, low, high)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            return self.bend(weight, name)  # scripted, bend reads the plain numbers
        return clamp(weight, self.min, self.max)
