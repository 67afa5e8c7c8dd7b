"""Permute: shuffle the indices of a weight or an activation along one axis."""

from __future__ import annotations

import torch

from ..errors import BendingError
from .args import check_seed, target_generator
from .base import BendingCallback

__all__ = ["Permute"]


class Permute(BendingCallback):
    """Shuffle the target along axis ``dim`` with a random permutation.

    The permutation is drawn once per target, when the target is registered, and kept as a
    buffer of indices: every call applies the same permutation.

    Args:
        dim: the axis whose indices are shuffled (negative axes count from the end). The
            default ``-2`` shuffles the channels of a ``[batch, channels, time]`` activation,
            or the input channels of a ``[out, in]`` linear weight.
        seed: an int makes the permutations reproducible (each target gets its own, drawn
            from the seed and the target's name); ``None`` draws from torch's global generator.
        amount: fraction, between 0 and 1, of the indices that take part in the shuffle: the
            others stay in place. ``0`` is the identity, ``1`` a full random permutation.

    Shape:
        - Input: any shape with the traced size along ``dim``.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Permute
        >>> permute = Permute(dim=0, seed=2)
        >>> permute.register_target("x", torch.Size([5]), torch.float32, torch.device("cpu"))
        >>> permute(torch.arange(5.0), "x")
        tensor([0., 3., 1., 4., 2.])
    """

    def __init__(self, dim: int = -2, seed: int | None = None, amount: float = 1.0) -> None:
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise BendingError(
                f"Permute: dim must be an int (the axis to shuffle, negative counting from "
                f"the end), got {dim!r}"
            )
        amount = float(amount)
        if not 0.0 <= amount <= 1.0:
            raise BendingError(
                f"Permute: amount is the fraction of indices shuffled and must be between "
                f"0 and 1, got {amount}"
            )
        self.dim = dim
        self.seed = check_seed("Permute", seed)
        self._amount = amount

    @property
    def amount(self) -> float:
        """Fraction of the indices that take part in the shuffle."""
        return self._amount

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        rank = len(shape)
        if not -rank <= self.dim < rank:
            raise BendingError(
                f"{self!r} cannot bend '{name}' of shape {list(shape)}: dim={self.dim} is out "
                f"of range; give a dim between {-rank} and {rank - 1}"
            )
        size = shape[self.dim]
        generator = target_generator(self.seed, name)
        moved = torch.randperm(size, generator=generator)[: round(self.amount * size)]
        permutation = torch.arange(size)
        permutation[moved] = moved[torch.randperm(len(moved), generator=generator)]
        self.add_state(name, permutation.to(device))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        permutation = self.state(name)
        rank = x.dim()
        dim = self.dim
        if dim < -rank or dim >= rank:
            raise BendingError(
                f"Permute(dim={dim}) cannot bend '{name}': it was called on a tensor of shape "
                f"{list(x.shape)}, which has no axis {dim}"
            )
        if dim < 0:
            dim += rank
        if x.shape[dim] != permutation.shape[0]:
            raise BendingError(
                f"Permute(dim={self.dim}) holds a permutation of {permutation.shape[0]} indices "
                f"for '{name}' (its traced size along dim={self.dim}), but was called on a "
                f"tensor of shape {list(x.shape)}, of size {x.shape[dim]} along that axis"
            )
        if self.amount == 0.0:
            return x
        return x.index_select(dim, permutation)

    def extra_repr(self) -> str:
        args = []
        if self.dim != -2:
            args.append(f"dim={self.dim}")
        if self.seed is not None:
            args.append(f"seed={self.seed}")
        if self.amount != 1.0:
            args.append(f"amount={self.amount}")
        return ", ".join(args)
