"""Geometry: move values around along an axis (roll, flip, time stretch)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dim, as_dims, call_axis, normalized_dim
from .base import BendingCallback

__all__ = ["Flip", "Roll", "TimeStretch"]


def roll(x: torch.Tensor, shift: float, dim: int) -> torch.Tensor:
    """``x`` rolled along ``dim`` (a valid axis) by ``shift`` times its size, rounded."""
    size = x.shape[dim]
    if size == 0:
        return x
    steps = math.floor(shift * size + 0.5) % size
    # A roll by 0 would copy; return x itself so that the identity is exact and free.
    if steps == 0:
        return x
    return torch.roll(x, steps, dim)


def stretch(x: torch.Tensor, factor: float) -> torch.Tensor:
    """``x`` read at positions ``t * factor`` along its last axis (linear interpolation)."""
    length = x.shape[-1]
    if length == 0:
        return x
    if not x.is_floating_point():
        x = x.float()
    # Positions in float64: in float32, t * factor is off by more than a sample's 1/100th
    # beyond a few seconds of audio.
    positions = torch.arange(length, dtype=torch.float64, device=x.device) * factor
    positions = positions.clamp(0.0, float(length - 1))
    left = positions.floor().long()
    right = (left + 1).clamp(max=length - 1)
    weight = (positions - left.double()).to(x.dtype)
    a = x.index_select(-1, left)
    return a + (x.index_select(-1, right) - a) * weight


class Roll(BendingCallback):
    """Roll the target along ``dim`` (:func:`torch.roll`), wrapping around.

    Args:
        shift: how far, as a fraction of the target's size along ``dim``, between ``-1`` and
            ``1``; the shift in elements is ``round(shift * size)``. Positive values move
            elements towards higher indices: ``0.25`` delays a ``[batch, channels, time]``
            activation by a quarter of its length. A fraction rather than a count of elements,
            so that one setting (and one knob) fits targets of any size. ``0`` (and ``±1``)
            is the identity. May be a control.
        dim: the axis to roll along (negative axes count from the end); ``-1``, time for
            activations.

    Shape:
        - Input: any shape with axis ``dim``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Roll
        >>> Roll(0.25)(torch.arange(8.0), "x")
        tensor([6., 7., 0., 1., 2., 3., 4., 5.])
    """

    shift = Argument(
        float, low=-1.0, high=1.0, neutral=0.0, meaning="a fraction of the size along dim"
    )

    def __init__(self, shift: float | Control = 0.0, dim: int = -1) -> None:
        super().__init__()
        self.shift = shift
        self.dim = as_dim(type(self).__name__, dim)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        normalized_dim(repr(self), self.dim, shape, name)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return roll(x, self.shift, call_axis(x, self.dim, self.label(), name))


class Flip(BendingCallback):
    """Reverse the target along ``dim`` (:func:`torch.flip`).

    Args:
        dim: the axis, or tuple of axes, to reverse (negative axes count from the end); ``-1``
            plays an activation backwards in time.
        active: ``False`` is the identity. May be a bool control, to switch the flip live.

    Shape:
        - Input: any shape with the axes ``dim``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Flip
        >>> Flip()(torch.tensor([[1.0, 2.0, 3.0]]), "x")
        tensor([[3., 2., 1.]])
    """

    active = Argument(bool, neutral=False)

    def __init__(self, dim: int | Sequence[int] = -1, active: bool | Control = True) -> None:
        super().__init__()
        dims = as_dims(type(self).__name__, dim)
        if not dims:
            raise BendingError(
                f"{type(self).__name__}: dim must name at least one axis, got {dim!r}"
            )
        self.dim = dim
        self.dims = dims
        self.active = active

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.check_axes(name, shape, self.dims)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if not self.active:
            return x
        label = self.label()
        dims = [call_axis(x, d, label, name) for d in self.dims]
        return torch.flip(x, dims)


class TimeStretch(BendingCallback):
    """Play the target faster or slower along its last (time) axis, at the same length.

    The output at time ``t`` is the target read at position ``t * factor``, linearly
    interpolated between samples; past the end, the last value is held.

    Args:
        factor: reading speed, ``>= 0``. ``1`` is the identity; ``2`` plays twice as fast
            (the first half of the output holds the whole target, the second half its last
            value); ``0.5`` half as fast (the output holds the first half of the target,
            stretched); ``0`` holds the first value. May be a control.

    Shape:
        - Input: ``[..., time]``, any length.
        - Output: same as input (floating point).

    Example:
        >>> import torch
        >>> from torchbend.callbacks import TimeStretch
        >>> TimeStretch(0.5)(torch.arange(5.0), "x")
        tensor([0.0000, 0.5000, 1.0000, 1.5000, 2.0000])
        >>> TimeStretch(2.0)(torch.arange(5.0), "x")
        tensor([0., 2., 4., 4., 4.])
    """

    factor = Argument(float, low=0.0, neutral=1.0, meaning="a speed")

    def __init__(self, factor: float | Control = 1.0) -> None:
        super().__init__()
        self.factor = factor

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        if len(shape) == 0:
            raise BendingError(f"{self!r} cannot bend '{name}': it is a scalar, with no time axis")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if self.factor == 1.0 or x.dim() == 0:
            return x
        return stretch(x, self.factor)
