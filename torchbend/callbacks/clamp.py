"""Clamp: limit the values of a weight or an activation to a range."""

from __future__ import annotations

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .base import BendingCallback

__all__ = ["Clamp"]


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

    min = Argument(float, neutral=None, none="no bound", finite=False, ramps=True)
    max = Argument(float, neutral=None, none="no bound", finite=False, ramps=True)

    def __init__(
        self,
        min: float | Control | None = None,
        max: float | Control | None = None,
    ) -> None:
        super().__init__()
        self.min = min
        self.max = max
        if self.min is not None and self.max is not None and self.min > self.max:
            raise BendingError(
                f"{type(self).__name__}: min={self.min} is greater than max={self.max}; "
                "give min <= max"
            )

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        # Locals: TorchScript refines an Optional local, not an attribute, by ``is None``.
        low, high = self.min, self.max
        if low is None and high is None:
            return x
        return clamp(
            x,
            None if low is None else self.along("min", x),
            None if high is None else self.along("max", x),
        )

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return clamp(weight, self.min, self.max)
