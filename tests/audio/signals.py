"""Test signals whose descriptors are known: tones, saws and white noise at 44.1 kHz."""

from __future__ import annotations

import math

import torch

RATE = 44100


def seconds_of_time(seconds: float) -> torch.Tensor:
    """The time of each sample, in seconds (float64: float32 phases add a noise floor)."""
    return torch.arange(int(seconds * RATE), dtype=torch.float64) / RATE


def noise(seconds: float, seed: int = 0) -> torch.Tensor:
    """White Gaussian noise of unit standard deviation."""
    return torch.randn(int(seconds * RATE), generator=torch.Generator().manual_seed(seed))


def tone(freq: float, seconds: float = 2.0) -> torch.Tensor:
    """A full-scale sine of ``freq`` Hz."""
    return torch.sin(2 * math.pi * freq * seconds_of_time(seconds)).float()


def saw(freq: float, seconds: float = 2.0) -> torch.Tensor:
    """A full-scale rising saw of ``freq`` Hz."""
    return (2 * ((freq * seconds_of_time(seconds)) % 1.0) - 1).float()
