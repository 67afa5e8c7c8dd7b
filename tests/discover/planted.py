"""A synthesizer whose descriptors are set by known channels of its activations: the ground
truth a ranking of effects must find."""

from __future__ import annotations

import math

import torch
from torch import nn

RATE = 44100
CHANNELS = 32
PLANTED = {"loudness": ("level", 3), "brightness": ("tone", 5), "pitch": ("pitch", 2)}
"""Descriptor -> (node, channel) that sets it, and nothing else."""
SEVERAL = ("mixed", 0)
"""A distractor: this channel sets the loudness and the brightness together."""
IDLE = "idle"
"""A distractor node: no channel of it changes anything."""


class Planted(nn.Module):
    """Harmonic tones (of one power whatever their tilt) whose pitch, tilt and level come
    from channels of 1x1 convolutions of a constant (each output ``[batch, CHANNELS, 1]`` is
    an activation named like the layer); the other channels of each are read by nothing. The
    input only gives the length."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        for name in ("level", "tone", "pitch", "mixed", "idle"):
            conv = nn.Conv1d(1, CHANNELS, 1)
            with torch.no_grad():
                conv.weight.zero_()
                conv.bias.copy_(0.5 * torch.randn(CHANNELS, generator=generator))
            setattr(self, name, conv)
        with torch.no_grad():
            self.level.bias[3] = -1.0  # a gain of e^-1
            self.tone.bias[5] = 0.5  # harmonics fall as k^-(2 - 0.5)
            self.pitch.bias[2] = -0.5  # 311 Hz
            self.mixed.bias[0] = 0.5
        self.register_buffer("orders", torch.arange(1, 21, dtype=torch.float32)[:, None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time = x.shape[0], x.shape[-1]
        one = x.new_ones(batch, 1, 1)
        level, tone, pitch = self.level(one), self.tone(one), self.pitch(one)
        mixed, idle = self.mixed(one), self.idle(one)
        f0 = 440.0 * torch.exp2(pitch[:, 2:3])  # [batch, 1, 1]
        t = torch.arange(time, dtype=x.dtype, device=x.device) / RATE
        tilt = -2.0 + tone[:, 5:6] + mixed[:, 0:1]  # [batch, 1, 1]
        audible = (self.orders[None] * f0 < 16000.0).to(x.dtype)
        amplitudes = audible * self.orders[None] ** tilt  # [batch, 20, 1], of unit power:
        amplitudes = amplitudes / amplitudes.square().sum(1, keepdim=True).sqrt()
        waves = torch.sin(2 * math.pi * self.orders[None] * f0 * t)  # [batch, 20, time]
        y = (amplitudes * waves).sum(1, keepdim=True)
        gain = 0.05 * torch.exp(level[:, 3:4] + 0.5 * mixed[:, 0:1])
        return y * gain * (1.0 + 0.0 * idle.mean())
