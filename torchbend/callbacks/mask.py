"""Mask: zero a random part of a weight or an activation, drawn once per target."""

# No ``from __future__ import annotations``: TorchScript reads the type of ``dims`` (an empty
# list for ``dim=()``) only from a class annotation that is a real type.

from collections.abc import Sequence

import torch

from ..controls import Control
from .argument import Argument
from .axes import as_dims
from .draws import draw_key
from .seeded import Seeded

__all__ = ["Mask"]


class Mask(Seeded):
    """Zero each element of the target with probability ``prob``.

    Uniform noise is drawn once per target, when the target is registered, and the binary
    mask ``noise >= prob`` is kept (in the target's dtype) as a buffer: every call applies the
    same mask. When ``prob`` is a control and changes, the mask is derived again from the same
    noise, so that a higher ``prob`` zeroes the elements zeroed before and more; a new value
    of a ``seed`` control draws new noise (the same for the same seed).

    Args:
        prob: probability, between 0 and 1, that an element is zeroed. ``0`` is the identity.
            May be a control.
        dim: axis, or tuple of axes, that the mask varies along (negative axes count from the
            end). The mask has the target's size on those axes and size 1 on the others, so
            that it broadcasts over any batch size or length: ``dim=-2`` zeroes whole channels
            of a ``[batch, channels, time]`` activation. ``None``: one draw per element, over
            the target's full traced shape.
        seed: an int makes the masks reproducible (each target gets its own mask, drawn from
            the seed and the target's name); ``None`` draws from torch's global generator.
            May be an int control.

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

    dims: list[int] | None
    """The axes the mask varies along (``None``: every axis)."""

    prob = Argument(
        float,
        low=0.0,
        high=1.0,
        neutral=0.0,
        meaning="the probability of zeroing an element",
        derives=True,
    )

    def __init__(
        self,
        prob: float | Control = 0.3,
        dim: int | Sequence[int] | None = None,
        seed: int | Control | None = None,
    ) -> None:
        super().__init__(seed)
        self.prob = prob
        self.dim = dim
        self.dims = as_dims(type(self).__name__, dim)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.check_axes(name, shape, self.dims)
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        self.draw_uniform(name, shape, self.dims, device)
        self.derive(name, shape, dtype, device)

    def derive(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        noise = self.state(draw_key(name))
        self.add_state(name, (noise >= self.prob).to(dtype))

    def static_factor(self, name: str) -> torch.Tensor | None:
        # A control changes the mask between calls, never during one: it stays a factor.
        return self.state(name)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        mask = self.state(name)
        self.check_broadcast(mask, x, name)
        if self.prob == 0.0:
            return x
        return x * mask
