"""Time: reverse blocks of time, and shift each channel in time by its own amount."""

from __future__ import annotations

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dim, call_axis, kept_shape, normalized_dim
from .base import BendingCallback
from .seeded import Seeded

__all__ = ["Reverse", "Unphase", "reversed_blocks", "unphase_shifts"]


def reversed_blocks(length: int, block: int, device: torch.device) -> torch.Tensor:
    """The indices that reverse each block of ``block`` samples of an axis of ``length``.

    Blocks are counted from the start; a last block shorter than ``block`` is reversed on its
    own. ``block >= length`` reverses the whole axis.
    """
    t = torch.arange(length, device=device)
    start = torch.div(t, block, rounding_mode="floor") * block
    end = (start + block).clamp(max=length)
    return start + end - 1 - t


def unphase_shifts(draw: torch.Tensor, shift: float, length: int) -> torch.Tensor:
    """Each channel's shift in samples: ``round(draw * shift * length)`` (halves up).

    ``draw`` holds numbers in ``[-1, 1]``, one per channel; the product is taken in float64
    so that the rounding is the same on every device.
    """
    return torch.floor(draw.double() * (shift * length) + 0.5).long()


def _needs_time(owner: str, name: str, shape: torch.Size, what: str) -> None:
    if len(shape) < 2:
        raise BendingError(
            f"{owner} cannot bend '{name}' of shape {list(shape)}: it {what}, and a target of "
            "fewer than 2 axes (a bias, a scalar) has no time axis. Bend an activation "
            "[batch, channels, time], or a weight of 2 axes or more (its last axis taken as "
            "time)"
        )


class Reverse(BendingCallback):
    """Play the target backwards in time, within blocks of ``block`` samples.

    The last (time) axis is cut into blocks of ``block`` samples from the start of each call,
    and each block is reversed in place: ``[0 1 2 3 4 5 6]`` with ``block=3`` gives
    ``[2 1 0 5 4 3 6]`` (a last, shorter block is reversed on its own). Short blocks make a
    stutter, long ones play phrases backwards; ``None`` reverses the whole axis
    (:class:`Flip` along time). In a stream, blocks are counted from the start of each
    block of the stream: the whole of each is reversed with ``None``.

    Args:
        block: the length of a block in samples, an int ``>= 1``; ``None`` for the whole axis.
            ``1`` is the identity (each sample reversed on its own). May be an int control.

    Shape:
        - Input: ``[..., time]``, at least 2 axes when registered (a 1-d target, a bias, has
          no time and is refused).
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Reverse
        >>> Reverse(3)(torch.arange(7.0).unsqueeze(0), "x")
        tensor([[2., 1., 0., 5., 4., 3., 6.]])
        >>> Reverse()(torch.arange(4.0).unsqueeze(0), "x")
        tensor([[3., 2., 1., 0.]])
    """

    block = Argument(int, low=1, neutral=1, none="the whole axis", meaning="a length in samples")

    def __init__(self, block: int | Control | None = None) -> None:
        super().__init__()
        self.block = block

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        _needs_time(repr(self), name, shape, "reverses time along the last axis")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if x.dim() == 0:
            raise BendingError(
                f"{self.label()} cannot bend '{name}': it was called on a scalar, with no time axis"
            )
        block = self.block
        length = x.shape[-1]
        if block is None:
            if length <= 1:
                return x
            return x.flip(-1)
        if block == 1 or length <= 1:
            return x
        if block >= length:
            return x.flip(-1)
        return x.index_select(-1, reversed_blocks(length, block, x.device))


class Unphase(Seeded):
    """Shift each channel of the target in time by its own amount, wrapping around.

    A number ``u`` uniform in ``[-1, 1]`` is drawn for each channel (each index along ``dim``)
    when the target is registered; the channel is rolled along the last (time) axis by
    ``round(u * shift * length)`` samples (:func:`torch.roll`: positive amounts delay), for a
    call of ``length`` samples. Where :class:`Roll` moves every channel together, Unphase
    moves them apart, smearing the timing between channels (a random phase per channel).
    When ``shift`` is a control the same numbers are scaled; a new value of a ``seed``
    control draws anew (the same for the same seed). :meth:`shifts` gives the amounts.

    Args:
        shift: the largest shift, as a fraction of the length, from 0 to 1 (as :class:`Roll`'s
            ``shift``, so that one setting fits any length). ``0`` is the identity. May be a
            control.
        seed: an int makes the draws reproducible (each target gets its own, drawn from the
            seed and the target's name); ``None`` draws from torch's global generator. May be
            an int control.
        dim: the axis of channels (negative axes count from the end), not the last; ``-2``,
            the channels of a ``[batch, channels, time]`` activation, or the rows of an
            ``[out, in]`` weight.

    Shape:
        - Input: ``[..., time]`` with the traced size along ``dim``; at least 2 axes (a
          1-d target, a bias, has no time and is refused).
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Unphase
        >>> unphase = Unphase(0.5, seed=0)
        >>> unphase.register("act", torch.Size([1, 3, 6]), torch.float32, torch.device("cpu"))
        >>> unphase.shifts("act", 6).flatten()
        tensor([ 2,  0, -3])
        >>> unphase(torch.arange(6.0).expand(1, 3, 6), "act")
        tensor([[[4., 5., 0., 1., 2., 3.],
                 [0., 1., 2., 3., 4., 5.],
                 [3., 4., 5., 0., 1., 2.]]])
    """

    shift = Argument(float, low=0.0, high=1.0, neutral=0.0, meaning="a fraction of the length")

    def __init__(
        self, shift: float | Control = 0.25, seed: int | Control | None = None, dim: int = -2
    ) -> None:
        super().__init__(seed)
        self.shift = shift
        self.dim = as_dim(type(self).__name__, dim)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        _needs_time(repr(self), name, shape, "shifts channels along the last (time) axis")
        axis = normalized_dim(repr(self), self.dim, shape, name)
        if axis == len(shape) - 1:
            raise BendingError(
                f"{self!r} cannot bend '{name}' of shape {list(shape)}: dim={self.dim} is its "
                "last axis, the time axis the channels are shifted along; give the axis of "
                "channels (dim=-2 for [batch, channels, time])"
            )
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        size = kept_shape(shape, [self.dim])
        uniform = torch.rand(size, generator=self.generator_for(name))
        self.add_state(name, (2.0 * uniform - 1.0).to(device))

    def shifts(self, name: str, length: int) -> torch.Tensor:
        """The shift of each channel of target ``name``, in samples, for a call of ``length``
        samples (shaped to broadcast onto the target: size 1 but along ``dim``)."""
        return unphase_shifts(self.state(name), self.shift, length)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        draw = self.state(name)
        dim = call_axis(x, self.dim, self.label(), name)
        if dim == x.dim() - 1:
            raise BendingError(
                f"{self.label()} cannot bend '{name}': it was called on a tensor of shape "
                f"{list(x.shape)}, whose axis {self.dim} is not an axis of channels before time"
            )
        self.check_broadcast(draw, x, name)
        length = x.shape[-1]
        if self.shift == 0.0 or length <= 1:
            return x
        shifts = unphase_shifts(draw, self.shift, length)
        # torch.roll by s: out[t] = x[(t - s) mod length], one s per channel.
        t = torch.arange(length, device=x.device)
        index = torch.remainder(t - shifts.to(x.device), length)
        return x.gather(-1, index.expand(x.shape))
