"""The probes of an effect map: small changes of one channel (or one direction) of an
activation, one per item of a batch, so that one call renders many probes."""

from __future__ import annotations

import torch

from ..callbacks.base import BendingCallback
from ..errors import DiscoveryError

__all__ = ["PROBES", "Probe", "probe_batch"]

PROBES: tuple[str, ...] = ("push", "scale")
"""The kinds of probe: ``push`` adds ``amount`` times the node's RMS to one channel (every
element of it); ``scale`` multiplies one channel by ``1 + amount``. Each runs both ways (``+``
and ``-``), so that the change it measures is a slope, not a curvature."""


class Probe(BendingCallback):
    """Item ``b`` of the batch gets ``x * (1 + gains[b]) + offsets[b]``, with ``gains`` and
    ``offsets`` ``[batch, channels]`` laid along the channel axis ``dim`` (1 for
    ``[batch, channels, ...]``) and broadcast over the other axes.

    Not for users (it needs the batch it was built for): the probes of
    :func:`torchbend.discover.rank` use it."""

    scriptable = False
    gains: torch.Tensor
    offsets: torch.Tensor

    def __init__(self, gains: torch.Tensor, offsets: torch.Tensor, dim: int = 1) -> None:
        super().__init__()
        self.register_buffer("gains", gains)
        self.register_buffer("offsets", offsets)
        self.dim = dim

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        batch, channels = self.gains.shape
        if x.dim() <= self.dim or x.shape[0] != batch or x.shape[self.dim] != channels:
            raise DiscoveryError(
                f"a probe made for {batch} items of {channels} channels along axis {self.dim} "
                f"met {name} of shape {list(x.shape)}"
            )
        shape = [batch] + [1] * (x.dim() - 1)
        shape[self.dim] = channels
        gains, offsets = self.gains.to(x.dtype), self.offsets.to(x.dtype)
        return x * (1 + gains.reshape(shape)) + offsets.reshape(shape)


def probe_batch(
    kind: str, channels: list[int], width: int, amount: float, rms: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gains, offsets)`` ``[2 * len(channels), width]`` for a :class:`Probe`: each channel
    of ``channels`` probed ``+amount`` then ``-amount`` (``push``: offsets of ``amount * rms``;
    ``scale``: gains of ``amount``)."""
    gains = torch.zeros(2 * len(channels), width)
    offsets = torch.zeros(2 * len(channels), width)
    for i, c in enumerate(channels):
        for j, sign in enumerate((1.0, -1.0)):
            if kind == "push":
                offsets[2 * i + j, c] = sign * amount * rms
            else:
                gains[2 * i + j, c] = sign * amount
    return gains, offsets
