"""Permute: shuffle the indices of a weight or an activation along one axis."""

from __future__ import annotations

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dim, call_axis, normalized_dim
from .draws import draw_key
from .seeded import Seeded

__all__ = ["Permute"]


class Permute(Seeded):
    """Shuffle the target along axis ``dim`` with a random permutation.

    The permutation is drawn once per target, when the target is registered, and kept as a
    buffer of indices: every call applies the same permutation. Two random orders of the
    indices are drawn and kept: the first ``round(amount * size)`` indices of the first order
    move, and are shuffled among themselves by the second; so that when ``amount`` is a control
    and changes, the permutation is derived again from the same draws. A new value of a
    ``seed`` control draws anew (the same for the same seed).

    Args:
        dim: the axis whose indices are shuffled (negative axes count from the end). The
            default ``-2`` shuffles the channels of a ``[batch, channels, time]`` activation,
            or the input channels of a ``[out, in]`` linear weight.
        seed: an int makes the permutations reproducible (each target gets its own, drawn
            from the seed and the target's name); ``None`` draws from torch's global generator.
            May be an int control.
        amount: fraction, between 0 and 1, of the indices that take part in the shuffle: the
            others stay in place. ``0`` is the identity, ``1`` a full random permutation.
            May be a control.

    Shape:
        - Input: any shape with the traced size along ``dim``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Permute
        >>> permute = Permute(dim=0, seed=2)
        >>> permute.register_target("x", torch.Size([5]), torch.float32, torch.device("cpu"))
        >>> permute(torch.arange(5.0), "x")
        tensor([0., 2., 4., 1., 3.])
    """

    amount = Argument(
        float,
        low=0.0,
        high=1.0,
        neutral=0.0,
        meaning="the fraction of indices shuffled",
        derives=True,
    )

    def __init__(
        self, dim: int = -2, seed: int | Control | None = None, amount: float | Control = 1.0
    ) -> None:
        super().__init__(seed)
        self.dim = as_dim(type(self).__name__, dim)
        self.amount = amount

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        normalized_dim(repr(self), self.dim, shape, name)
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        size = shape[self.dim + len(shape) if self.dim < 0 else self.dim]
        generator = self.generator_for(name)
        order = torch.randperm(size, generator=generator)
        shuffle = torch.randperm(size, generator=generator)
        self.add_state(draw_key(name), torch.stack([order, shuffle]).to(device))
        self.derive(name, shape, dtype, device)

    def derive(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        drawn = self.state(draw_key(name))
        order, shuffle = drawn[0], drawn[1]
        size = order.shape[0]
        # int(round()): TorchScript's round gives a float (rounding halves to even, as Python).
        moved = order[: int(round(self.amount * size))]  # noqa: RUF046
        permutation = torch.arange(size, device=order.device)
        permutation[moved] = moved[shuffle[: moved.shape[0]].argsort()]
        self.add_state(name, permutation)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        permutation = self.state(name)
        dim = call_axis(x, self.dim, self.label(), name)
        if x.shape[dim] != permutation.shape[0]:
            raise BendingError(
                f"{self.label()} holds a permutation of {permutation.shape[0]} indices for "
                f"'{name}' (its traced size along dim={self.dim}), but was called on a tensor "
                f"of shape {list(x.shape)}, of size {x.shape[dim]} along that axis"
            )
        if self.amount == 0.0:
            return x
        return x.index_select(dim, permutation)
