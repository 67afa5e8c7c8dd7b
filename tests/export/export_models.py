"""Small models the export tests share."""

from __future__ import annotations

import torch
from torch import nn


class Blowing(nn.Module):
    """Audio to audio, [B, 1, T] -> [B, 1, T], without state."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 1)
        self.act = nn.Tanh()
        self.out = nn.Conv1d(4, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.conv(x)))
