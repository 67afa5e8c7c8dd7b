"""Thresholds: zero the weakest elements, or the weakest channels, of a target."""

from __future__ import annotations

import math

import torch

from ..controls import Control
from .argument import Argument
from .axes import as_dim, call_axis, normalized_dim
from .base import BendingCallback

__all__ = ["Threshold", "ThresholdActivation"]


def threshold(x: torch.Tensor, value: float | torch.Tensor) -> torch.Tensor:
    """``x`` with the elements whose magnitude is below ``value`` set to zero."""
    if isinstance(value, torch.Tensor):
        return torch.where(x.abs() < value, torch.zeros_like(x), x)
    # Short-circuit: nothing is below 0, and the identity must be exact and free.
    if value == 0.0:
        return x
    return torch.where(x.abs() < value, torch.zeros_like(x), x)


class Threshold(BendingCallback):
    """Zero the elements of the target whose magnitude is below ``value``.

    Args:
        value: the threshold, ``>= 0``, in the target's own units: elements with
            ``|x| < value`` become 0, the others are kept as they are. ``0`` is the
            identity. May be a control; while it ramps, activations get the change spread
            along their last axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Threshold
        >>> Threshold(0.5)(torch.tensor([-1.0, -0.2, 0.3, 0.7]), "x")
        tensor([-1.0000,  0.0000,  0.0000,  0.7000])
    """

    value = Argument(float, low=0.0, neutral=0.0, meaning="a magnitude", ramps=True)

    def __init__(self, value: float | Control = 0.0) -> None:
        super().__init__()
        self.value = value

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return threshold(x, self.along("value", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return threshold(weight, self.value)


class ThresholdActivation(BendingCallback):
    """Keep the strongest channels of the target and zero the others.

    The strength of a channel (an index along ``dim``) is the mean magnitude of the target
    over every other axis, computed at each call (once for a weight); the
    ``round(keep * channels)`` strongest channels are kept, the others zeroed. For an
    activation the choice is shared by the whole batch.

    Args:
        keep: the fraction of channels kept, between 0 and 1. ``1`` is the identity, ``0``
            zeroes everything. May be a control.
        dim: the axis of channels (negative axes count from the end); ``-2``, the channels
            of a ``[batch, channels, time]`` activation or the input channels of a
            ``[out, in]`` linear weight.

    Shape:
        - Input: any shape with axis ``dim``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import ThresholdActivation
        >>> x = torch.tensor([[1.0, 1.0], [-3.0, 2.0], [0.5, 0.0], [2.0, -2.0]])
        >>> ThresholdActivation(keep=0.5)(x, "x")
        tensor([[ 0.,  0.],
                [-3.,  2.],
                [ 0.,  0.],
                [ 2., -2.]])
    """

    keep = Argument(float, low=0.0, high=1.0, neutral=1.0, meaning="the fraction of channels kept")

    def __init__(self, keep: float | Control = 1.0, dim: int = -2) -> None:
        super().__init__()
        self.keep = keep
        self.dim = as_dim(type(self).__name__, dim)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        normalized_dim(repr(self), self.dim, shape, name)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        dim = call_axis(x, self.dim, self.label(), name)
        size = x.shape[dim]
        kept = math.floor(self.keep * size + 0.5)
        if self.keep == 1.0 or kept == size:
            return x
        strength = x.detach().abs().float().movedim(dim, 0).reshape(size, -1).mean(1)
        chosen = torch.zeros(size, dtype=torch.bool, device=x.device)
        chosen[strength.topk(kept).indices] = True
        shape = [1] * x.dim()
        shape[dim] = size
        return torch.where(chosen.view(shape), x, torch.zeros_like(x))
