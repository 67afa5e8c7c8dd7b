"""Bending one named channel of a latent: a channel-selective affine callback, and the walk
that moves each named channel of the demo's model across its range over a file."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..callbacks import Argument, BendingCallback
from ..callbacks.affine import add, multiply
from ..controls import BendingParameter, Control
from ..errors import BendingError

__all__ = ["WALKS", "OnChannel", "Walk", "walk_control"]


class OnChannel(BendingCallback):
    """Scale then shift one channel of an activation ``[batch, channels, time]``: ``x * scale +
    bias`` on channel ``channel``, the other channels untouched.

    The callbacks of :mod:`torchbend.callbacks` bend every channel of their target alike (or a
    random subset); a latent whose channels mean something (``model.latent_names``) is bent
    one channel at a time.

    Args:
        channel: the index of the channel bent (along axis 1).
        scale: the factor (unitless); ``1`` leaves the channel as is. May be a control.
        bias: added after scaling, in the channel's own units (octaves for a pitch in
            octaves). May be a control; while it ramps, the change is spread along time.

    Shape:
        - Input: ``[batch, channels, ...]``, with more than ``channel`` channels.
        - Output: same as input.

    Example:
        >>> OnChannel(1, bias=0.5)(torch.zeros(1, 3, 2), "z")
        tensor([[[0.0000, 0.0000],
                 [0.5000, 0.5000],
                 [0.0000, 0.0000]]])
    """

    scale = Argument(float, neutral=1.0, ramps=True)
    bias = Argument(float, neutral=0.0, ramps=True)

    def __init__(
        self, channel: int, scale: float | Control = 1.0, bias: float | Control = 0.0
    ) -> None:
        super().__init__()
        if isinstance(channel, bool) or not isinstance(channel, int) or channel < 0:
            raise BendingError(f"OnChannel: channel must be an index >= 0, got {channel!r}")
        self.channel = channel
        self.scale = scale
        self.bias = bias

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if x.dim() < 2 or x.shape[1] <= self.channel:
            raise BendingError(
                f"OnChannel: {name} has shape {list(x.shape)}, no channel {self.channel} along "
                f"axis 1; give a channel below {x.shape[1] if x.dim() > 1 else 0}"
            )
        c = self.channel
        one = x[:, c : c + 1]
        bent = add(multiply(one, self.along("scale", one)), self.along("bias", one))
        return torch.cat([x[:, :c], bent, x[:, c + 1 :]], 1)


@dataclass(frozen=True)
class Walk:
    """How the walk moves one named channel across the file: from ``start`` to ``end``, added
    to what the encoder measured (an offset: the melody and the dynamics stay), or in place of
    it (``replace``: the whole range of a channel bounded on both sides)."""

    channel: str
    """The channel's name in ``model.latent_names``."""
    start: float
    """Where the walk starts, in the channel's units."""
    end: float
    """Where it ends."""
    unit: str
    """What the channel's units are, for the printed description."""
    replace: bool = False
    """Whether the walk sets the channel instead of offsetting it."""

    def callback(self, channel: int, position: Control) -> OnChannel:
        """The bending of channel ``channel`` that follows ``position`` (-1 to 1)."""
        middle, half = (self.start + self.end) / 2, (self.end - self.start) / 2
        return OnChannel(channel, scale=0.0 if self.replace else 1.0, bias=middle + half * position)

    def describe(self) -> str:
        how = "set" if self.replace else "offset"
        return f"{how} from {self.start:+g} to {self.end:+g} ({self.unit}) across the file"


WALKS = (
    Walk("pitch", -1.0, 1.0, "octaves"),
    Walk("loudness", -0.5, 0.5, "x 20 dB"),
    Walk("brightness", -1.5, 1.5, "octaves of centroid, x 6 dB an octave"),
    Walk("noisiness", 0.0, 1.0, "share of the harmonics made noisy, 0 to 1", replace=True),
)
"""The demo's latent walk: each named channel of the character model, moved on its own."""


def walk_control() -> BendingParameter:
    """The walk's position, from -1 (the file's start) to 1 (its end)."""
    return BendingParameter("walk", -1.0, range=(-1.0, 1.0), ramp=1)
