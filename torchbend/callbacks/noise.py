"""Noise: add or multiply Gaussian noise, drawn afresh at every call of an activation."""

from collections.abc import Sequence

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dims, kept_shape
from .seeded import Seeded

__all__ = ["Noise", "Normal"]

OPS = ("add", "mul")


class Noise(Seeded):
    """Add Gaussian noise to the target, or multiply it by noise around 1.

    With ``n`` standard normal noise, ``op="add"`` gives ``x + std * n`` and ``op="mul"`` gives
    ``x * (1 + std * n)``. Activations get new noise at every call; weights get theirs once,
    when they are bent.

    Args:
        std: standard deviation of the noise, ``>= 0``: in the target's own units for
            ``"add"``, relative to the target (``0.1`` is about 10 %) for ``"mul"``. ``0`` is
            the identity. May be a control; while it ramps, activations get the change spread
            along their last axis.
        op: ``"add"`` or ``"mul"``.
        dim: axis, or tuple of axes, that the noise varies along (negative axes count from the
            end); it is constant along the other axes, e.g. ``dim=-2`` draws one value per
            channel of a ``[batch, channels, time]`` activation. ``None``: one value per
            element.
        seed: an int makes the noise reproducible: a sequence of calls on activations gives
            the same sequence of noises, and each weight gets its own noise, drawn from the
            seed and the weight's name. ``None`` draws from torch's global generator. May be
            an int control: a new value starts the sequence of that seed again.

    Shape:
        - Input: any (with at least as many axes as ``dim`` needs).
        - Output: same as input.

    Notes:
        With a seed, noise is drawn on the CPU (so that a seed gives the same noise on any
        device) and then moved to the target's device.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Noise
        >>> noise = Noise(std=0.1, seed=0)
        >>> noise(torch.zeros(3), "x")
        tensor([ 0.1541, -0.0293, -0.2179])
        >>> Noise(std=0.5, op="mul", dim=0, seed=0)(torch.ones(2, 3), "x")
        tensor([[1.7705, 1.7705, 1.7705],
                [0.8533, 0.8533, 0.8533]])
    """

    # TorchScript must know the type of ``dims`` when it is an empty list (``dim=()``: one
    # value for the whole target), and it only reads that type from a class annotation that
    # is a real type, not a string: this is why this module, unlike the others, does not
    # import ``annotations`` from ``__future__``.
    dims: list[int] | None
    """The axes the noise varies along (``None``: every axis)."""

    std = Argument(float, low=0.0, neutral=0.0, meaning="a standard deviation", ramps=True)

    def __init__(
        self,
        std: float | Control = 0.1,
        op: str = "add",
        dim: int | Sequence[int] | None = None,
        seed: int | Control | None = None,
    ) -> None:
        super().__init__(seed)
        self.std = std
        if op not in OPS:
            raise BendingError(
                f"{type(self).__name__}: op must be one of {', '.join(map(repr, OPS))}, got {op!r}"
            )
        self.op = op
        self.dim = dim
        self.dims = as_dims(type(self).__name__, dim)
        self.redraw()

    def redraw(self) -> None:
        # The activations' noise comes from one generator, started again from a new seed; a
        # weight's noise is drawn when it is bent, from the seed and its name
        # (Seeded.generator_for). Scriptable: ``seed`` is an int or None when scripted, never
        # both, and TorchScript compiles the one branch its type takes.
        seed = self.seed
        if seed is None:
            self.generator = None
            return
        self.generator = torch.Generator().manual_seed(seed)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.check_axes(name, shape, self.dims)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return self._add_noise(x, self.generator, self.along("std", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return self._add_noise(weight, self.generator_for(name), self.std)

    def _add_noise(
        self,
        x: torch.Tensor,
        generator: torch.Generator | None,
        std: float | torch.Tensor,
    ) -> torch.Tensor:
        # One return per type of ``std``, each without reassigning it: TorchScript compiles a
        # refined variable that is reassigned after an early return, but writes code for it
        # that ``torch.jit.load`` rejects (a float in one branch, a Tensor in the other).
        if isinstance(std, torch.Tensor):
            return self._combine(x, self._draw(x, generator) * std)
        # Short-circuit rather than add 0. * n: -0.0 + 0.0 is +0.0, and the identity must be exact.
        if std == 0.0:
            return x
        return self._combine(x, self._draw(x, generator) * std)

    def _draw(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        shape = list(x.shape)
        dims = self.dims
        if dims is not None:
            shape = kept_shape(shape, dims)
        dtype = x.dtype if x.is_floating_point() else torch.float32
        if generator is None:
            return torch.randn(shape, dtype=dtype, device=x.device)
        return torch.randn(shape, generator=generator).to(dtype=dtype, device=x.device)

    def _combine(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        if self.op == "mul":
            return x * (1.0 + n)
        return x + n


Normal = Noise
"""Alias of :class:`Noise`."""
