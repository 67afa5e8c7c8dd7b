"""Mask: zero a random part of a weight or an activation, drawn once per target."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import BendingError
from .args import as_dims, check_seed, kept_shape, target_generator
from .base import BendingCallback

__all__ = ["Mask"]


class Mask(BendingCallback):
    """Zero each element of the target with probability ``prob``.

    The binary mask is drawn once per target, when the target is registered, and kept (in the
    target's dtype) as a buffer: every call applies the same mask.

    Args:
        prob: probability, between 0 and 1, that an element is zeroed. ``0`` is the identity.
        dim: axis, or tuple of axes, that the mask varies along (negative axes count from the
            end). The mask has the target's size on those axes and size 1 on the others, so
            that it broadcasts over any batch size or length: ``dim=-2`` zeroes whole channels
            of a ``[batch, channels, time]`` activation. ``None``: one draw per element, over
            the target's full traced shape.
        seed: an int makes the masks reproducible (each target gets its own mask, drawn from
            the seed and the target's name); ``None`` draws from torch's global generator.

    Shape:
        - Input: any shape the mask broadcasts onto: the traced shape without ``dim``, any
          shape with the traced sizes on the ``dim`` axes otherwise.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Mask
        >>> mask = Mask(prob=0.5, dim=-2, seed=2)
        >>> mask.register_target("act", torch.Size([1, 4, 3]), torch.float32, torch.device("cpu"))
        >>> mask(torch.ones(1, 4, 5), "act")
        tensor([[[0., 0., 0., 0., 0.],
                 [1., 1., 1., 1., 1.],
                 [0., 0., 0., 0., 0.],
                 [1., 1., 1., 1., 1.]]])
    """

    def __init__(
        self, prob: float = 0.3, dim: int | Sequence[int] | None = None, seed: int | None = None
    ) -> None:
        super().__init__()
        prob = float(prob)
        if not 0.0 <= prob <= 1.0:
            raise BendingError(
                f"Mask: prob is the probability of zeroing an element and must be between "
                f"0 and 1, got {prob}"
            )
        self._prob = prob
        self.dim = dim
        self.dims = as_dims("Mask", dim)
        self.seed = check_seed("Mask", seed)

    @property
    def prob(self) -> float:
        """Probability of zeroing an element."""
        return self._prob

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        size = list(shape)
        if self.dims is not None:
            try:
                size = kept_shape(size, self.dims)
            except BendingError as e:
                raise BendingError(f"{self!r} cannot bend '{name}': {e}") from None
        noise = torch.rand(size, generator=target_generator(self.seed, name))
        self.add_state(name, (noise >= self.prob).to(dtype=dtype, device=device))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        mask = self.state(name)
        self.check_broadcast(mask, x, name)
        if self.prob == 0.0:
            return x
        return x * mask

    def extra_repr(self) -> str:
        args = []
        if self.prob != 0.3:
            args.append(f"prob={self.prob}")
        if self.dim is not None:
            args.append(f"dim={self.dim!r}")
        if self.seed is not None:
            args.append(f"seed={self.seed}")
        return ", ".join(args)
