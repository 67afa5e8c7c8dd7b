"""Morphology: minimum (erode) and maximum (dilate) filters along the time axis."""

from __future__ import annotations

from typing import ClassVar

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .base import BendingCallback

__all__ = ["MAX_SIZE", "Dilate", "Erode"]

MAX_SIZE = 1 << 16
"""The widest window of :class:`Erode` and :class:`Dilate`, in samples (over a second of audio at
48 kHz): a wider one is surely a mistake, and would allocate as much per channel."""


def morphology(x: torch.Tensor, size: int, maximum: bool) -> torch.Tensor:
    """The maximum (or minimum) of ``x`` over windows of ``size`` samples along its last axis.

    Windows are centred on each sample (for an even size, one more sample after it than
    before); past the ends the edge values are repeated, which is the same as leaving the
    missing samples out of the window. The output has ``x``'s length.
    """
    length = x.shape[-1]
    if size <= 1 or length == 0:
        return x
    before = (size - 1) // 2
    after = size - 1 - before
    head_shape = list(x.shape)
    head_shape[-1] = before
    tail_shape = list(x.shape)
    tail_shape[-1] = after
    head = x[..., :1].expand(head_shape)
    tail = x[..., -1:].expand(tail_shape)
    # unfold gives a view of the windows, [..., length, size]; reducing it copies nothing.
    windows = torch.cat([head, x, tail], -1).unfold(-1, size, 1)
    return windows.amax(-1) if maximum else windows.amin(-1)


class _Morphology(BendingCallback):
    size = Argument(int, low=1, high=MAX_SIZE, neutral=1, meaning="a window in samples")
    takes_maximum: ClassVar[bool] = True

    def __init__(self, size: int | Control = 1) -> None:
        super().__init__()
        # An instance attribute: TorchScript does not read class attributes of modules.
        self.maximum = self.takes_maximum
        self.size = size

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        if len(shape) == 0:
            raise BendingError(f"{self!r} cannot bend '{name}': it is a scalar, with no time axis")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if self.size == 1 or x.dim() == 0:
            return x
        return morphology(x, self.size, self.maximum)


class Erode(_Morphology):
    """Replace each sample by the minimum over a window of ``size`` samples along time.

    Erosion thins the peaks of the target and widens its troughs; on an activation it
    shortens bursts of activity and lengthens silences.

    Args:
        size: width of the window in samples, an int from 1 to :data:`MAX_SIZE`, centred on
            each sample (for an even size, one more sample after than before). ``1`` is the
            identity. May be an int control.

    Shape:
        - Input: ``[..., time]``, any length.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Erode
        >>> Erode(3)(torch.tensor([0.0, 1.0, 1.0, 1.0, 0.0, 2.0, 0.0]), "x")
        tensor([0., 0., 1., 0., 0., 0., 0.])
    """

    takes_maximum = False


class Dilate(_Morphology):
    """Replace each sample by the maximum over a window of ``size`` samples along time.

    Dilation widens the peaks of the target and thins its troughs; on an activation it
    lengthens bursts of activity and shortens silences.

    Args:
        size: width of the window in samples, an int from 1 to :data:`MAX_SIZE`, centred on
            each sample (for an even size, one more sample after than before). ``1`` is the
            identity. May be an int control.

    Shape:
        - Input: ``[..., time]``, any length.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Dilate
        >>> Dilate(3)(torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0]), "x")
        tensor([1., 1., 1., 0., 2., 2., 2.])
    """

    takes_maximum = True
