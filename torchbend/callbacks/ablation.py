"""Ablation: zero channels (or every channel but some), replace elements by random values,
offset channels at random."""

# No ``from __future__ import annotations``: TorchScript reads the type of Ablate's and Solo's
# ``channel_list`` (an empty list without channels) only from a class annotation that is a
# real type.

from collections.abc import Sequence

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dim, kept_shape, normalized_dim
from .base import BendingCallback
from .draws import draw_key
from .seeded import Seeded

__all__ = ["Ablate", "Bypass", "Offset", "Randomize", "Solo"]


def _as_channels(owner: str, channels: int | Sequence[int] | None) -> list[int]:
    if channels is None:
        return []
    items: list[object] = list(channels) if isinstance(channels, (tuple, list)) else [channels]
    found = [c for c in items if isinstance(c, int) and not isinstance(c, bool)]
    if len(found) != len(items):
        raise BendingError(
            f"{owner}: channels must be an int or a sequence of ints (indices along dim, "
            f"negative counting from the end), or None, got {channels!r}"
        )
    return found


def _check_channels(
    cb: BendingCallback, channels: list[int], dim: int, shape: torch.Size, name: str
) -> int:
    """The axis ``dim`` of ``shape``, or a :class:`BendingError` if it has none or a channel
    of ``channels`` is out of range along it (naming how many channels it has)."""
    axis = normalized_dim(repr(cb), dim, shape, name)
    size = shape[axis]
    wrong = [c for c in channels if not -size <= c < size]
    if wrong:
        raise BendingError(
            f"{cb!r} cannot bend '{name}' of shape {list(shape)}: channels {wrong} are out "
            f"of range for its {size} channels along dim={dim}; give indices from 0 to "
            f"{size - 1} (or from -{size} to -1)"
        )
    return axis


class Ablate(Seeded):
    """Zero whole channels of the target: given ones, a random fraction of them, or both.

    A random order of the channels is drawn once per target; the first
    ``round(fraction * channels)`` channels of that order are zeroed, with the channels listed
    in ``channels``. When ``fraction`` is a control and grows, the channels zeroed before
    stay zeroed and more join them; a new value of a ``seed`` control draws a new order (the
    same for the same seed).

    Args:
        channels: indices of channels (along ``dim``) always zeroed, an int or a sequence of
            ints (negative indices count from the end); ``None`` for none.
        fraction: fraction of the channels zeroed at random, between 0 and 1. May be a
            control.
        dim: the axis of channels (negative axes count from the end); ``-2``, the channels
            of a ``[batch, channels, time]`` activation or the input channels of a
            ``[out, in]`` linear weight.
        seed: an int makes the random choice reproducible (each target gets its own, drawn
            from the seed and the target's name); ``None`` draws from torch's global
            generator. May be an int control.

    With no ``channels`` and ``fraction=0`` the callback is the identity.

    Shape:
        - Input: any shape with the traced size along ``dim`` (and, for a ``dim`` counted
          from the start, the traced number of axes).
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Ablate
        >>> ablate = Ablate(channels=[0, -1])
        >>> ablate.register_target("act", torch.Size([1, 4, 2]), torch.float32, torch.device("cpu"))
        >>> ablate(torch.ones(1, 4, 3), "act")
        tensor([[[0., 0., 0.],
                 [1., 1., 1.],
                 [1., 1., 1.],
                 [0., 0., 0.]]])
    """

    channel_list: list[int]
    """The channels always zeroed (indices along ``dim``)."""

    fraction = Argument(
        float,
        low=0.0,
        high=1.0,
        neutral=0.0,
        meaning="the fraction of channels zeroed",
        derives=True,
    )

    def __init__(
        self,
        channels: int | Sequence[int] | None = None,
        fraction: float | Control = 0.0,
        dim: int = -2,
        seed: int | Control | None = None,
    ) -> None:
        super().__init__(seed)
        self.channels = channels
        self.channel_list = _as_channels(type(self).__name__, channels)
        self.has_channels = len(self.channel_list) > 0
        self.fraction = fraction
        self.dim = as_dim(type(self).__name__, dim)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        _check_channels(self, self.channel_list, self.dim, shape, name)
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        axis = self.dim + len(shape) if self.dim < 0 else self.dim  # checked when registered
        order = torch.randperm(shape[axis], generator=self.generator_for(name))
        self.add_state(draw_key(name), order.to(device))
        self.derive(name, shape, dtype, device)

    def derive(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        rank = len(shape)
        axis = self.dim + rank if self.dim < 0 else self.dim
        order = self.state(draw_key(name))
        size = order.shape[0]
        keep = torch.ones(size, dtype=torch.bool, device=order.device)
        keep[self.channel_list] = False
        # int(round()): TorchScript's round gives a float (rounding halves to even, as Python).
        keep[order[: int(round(self.fraction * size))]] = False  # noqa: RUF046
        view = [1] * rank
        view[axis] = size
        self.add_state(name, keep.view(view))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        keep = self.state(name)
        self.check_broadcast(keep, x, name)
        if self.fraction == 0.0 and not self.has_channels:
            return x
        return torch.where(keep, x, torch.zeros_like(x))


Bypass = Ablate
"""Another name of :class:`Ablate`: ``Bypass(channels)`` zeroes the listed channels (the
other half of :class:`Solo`)."""


class Solo(BendingCallback):
    """Keep only the listed channels of the target, every other channel zeroed.

    The opposite of ``Ablate(channels)`` (also named ``Bypass``): solo a channel of an
    activation to hear what it carries alone (:func:`torchbend.discover.audition`).

    Args:
        channels: indices of the channels kept (along ``dim``), an int or a non-empty
            sequence of ints (negative indices count from the end); the first by default.
        dim: the axis of channels (negative axes count from the end); ``-2``, the channels
            of a ``[batch, channels, time]`` activation.
        active: ``False`` is the identity. May be a bool control, to switch the solo live.

    Shape:
        - Input: any shape with the traced size along ``dim`` (and, for a ``dim`` counted
          from the start, the traced number of axes).
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Solo
        >>> solo = Solo(channels=1)
        >>> solo.register_target("act", torch.Size([1, 3, 2]), torch.float32, torch.device("cpu"))
        >>> solo(torch.ones(1, 3, 2), "act")
        tensor([[[0., 0.],
                 [1., 1.],
                 [0., 0.]]])
    """

    channel_list: list[int]
    """The channels kept (indices along ``dim``)."""

    active = Argument(bool, neutral=False)

    def __init__(
        self, channels: int | Sequence[int] = 0, dim: int = -2, active: bool | Control = True
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        self.channels = channels
        self.channel_list = _as_channels(owner, channels)
        if not self.channel_list:
            raise BendingError(f"{owner}: give at least one channel to keep, got {channels!r}")
        self.dim = as_dim(owner, dim)
        self.active = active

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        axis = _check_channels(self, self.channel_list, self.dim, shape, name)
        keep = torch.zeros(shape[axis], dtype=torch.bool, device=device)
        keep[self.channel_list] = True
        view = [1] * len(shape)
        view[axis] = shape[axis]
        self.add_state(name, keep.view(view))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        keep = self.state(name)
        self.check_broadcast(keep, x, name)
        if not self.active:
            return x
        return torch.where(keep, x, torch.zeros_like(x))


class Randomize(Seeded):
    """Replace a random fraction of the target's elements by random values.

    Once per target, a uniform number and a standard normal value are drawn for each element
    (the "Sample %" of circuit-bending tools); the elements whose uniform number is below
    ``fraction`` are replaced by ``std`` times their normal value, the others kept. When
    ``fraction`` is a control and grows, the elements replaced before stay replaced (by the
    same values) and more join them; ``std`` scales the same values; a new value of a
    ``seed`` control draws anew (the same for the same seed).

    Args:
        fraction: fraction of the elements replaced, between 0 and 1. ``0`` is the identity.
            May be a control.
        std: standard deviation of the replacing values (mean 0), ``>= 0``, in the target's
            own units. May be a control; while it ramps, activations get the change spread
            along their last axis.
        seed: an int makes the draws reproducible (each target gets its own, drawn from the
            seed and the target's name); ``None`` draws from torch's global generator. May be
            an int control.

    Shape:
        - Input: the traced shape of the target (the draws are per element).
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Randomize
        >>> randomize = Randomize(fraction=0.5, std=1.0, seed=0)
        >>> randomize.register_target("x", torch.Size([6]), torch.float32, torch.device("cpu"))
        >>> randomize(torch.zeros(6), "x")
        tensor([-1.7785,  2.0869,  0.0000,  0.0000, -0.0116,  0.0000])
    """

    fraction = Argument(
        float,
        low=0.0,
        high=1.0,
        neutral=0.0,
        meaning="the fraction of elements replaced",
        derives=True,
    )
    std = Argument(float, low=0.0, meaning="a standard deviation", ramps=True)

    def __init__(
        self,
        fraction: float | Control = 0.0,
        std: float | Control = 1.0,
        seed: int | Control | None = None,
    ) -> None:
        super().__init__(seed)
        self.fraction = fraction
        self.std = std

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        generator = self.generator_for(name)
        uniform = torch.rand(shape, generator=generator)
        normal = torch.randn(shape, generator=generator)
        self.add_state(draw_key(name), torch.stack([uniform, normal]).to(device))
        self.derive(name, shape, dtype, device)

    def derive(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        self.add_state(name, self.state(draw_key(name))[0] < self.fraction)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return self._randomize(x, name, self.along("std", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return self._randomize(weight, name, self.std)

    def _randomize(self, x: torch.Tensor, name: str, std: float | torch.Tensor) -> torch.Tensor:
        chosen = self.state(name)
        self.check_broadcast(chosen, x, name)
        if self.fraction == 0.0:
            return x
        normal = self.state(draw_key(name))[1]
        # Two branches, so that TorchScript knows which product each one is.
        if isinstance(std, torch.Tensor):
            values = normal * std
        else:
            values = normal * std
        return torch.where(chosen, values.to(x.dtype), x)


class Offset(Seeded):
    """Add a random constant to each channel of the target, drawn once per target.

    A number uniform in ``[-1, 1]`` is drawn for each channel (each index along ``dim``) when
    the target is registered; the channel is shifted by ``offset`` times that number. Where
    :class:`Bias` moves every channel by the same amount, Offset detunes them from each other.
    When ``offset`` is a control the same numbers are scaled; a new value of a ``seed``
    control draws anew (the same for the same seed).

    Args:
        offset: the largest shift, ``>= 0``, in the target's own units. ``0`` is the
            identity. May be a control; while it ramps, activations get the change spread
            along their last axis.
        dim: the axis of channels (negative axes count from the end); ``-2``, the channels
            of a ``[batch, channels, time]`` activation.
        seed: an int makes the draws reproducible (each target gets its own, drawn from the
            seed and the target's name); ``None`` draws from torch's global generator. May be
            an int control.

    Shape:
        - Input: any shape with the traced size along ``dim``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Offset
        >>> offset = Offset(0.5, seed=0)
        >>> offset.register_target("act", torch.Size([1, 2, 3]), torch.float32, torch.device("cpu"))
        >>> offset(torch.zeros(1, 2, 3), "act")
        tensor([[[ 0.3860,  0.3860,  0.3860],
                 [-0.0096, -0.0096, -0.0096]]])
    """

    offset = Argument(float, low=0.0, neutral=0.0, meaning="an amplitude", ramps=True)

    def __init__(
        self, offset: float | Control = 0.0, dim: int = -2, seed: int | Control | None = None
    ) -> None:
        super().__init__(seed)
        self.offset = offset
        self.dim = as_dim(type(self).__name__, dim)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        normalized_dim(repr(self), self.dim, shape, name)
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        size = kept_shape(shape, [self.dim])
        uniform = torch.rand(size, generator=self.generator_for(name))
        # A dtype has no is_floating_point in TorchScript; an empty tensor of it has.
        floating = torch.empty(0, dtype=dtype).is_floating_point()
        float_dtype = dtype if floating else torch.float32
        self.add_state(name, (2.0 * uniform - 1.0).to(dtype=float_dtype, device=device))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return self._shift(x, name, self.along("offset", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return self._shift(weight, name, self.offset)

    def _shift(self, x: torch.Tensor, name: str, offset: float | torch.Tensor) -> torch.Tensor:
        shifts = self.state(name)
        self.check_broadcast(shifts, x, name)
        if isinstance(offset, torch.Tensor):
            return x + shifts * offset
        # Short-circuit rather than add 0.: -0.0 + 0.0 is +0.0, and the identity must be exact.
        if offset == 0.0:
            return x
        return x + shifts * offset
