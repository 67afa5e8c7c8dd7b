"""Models of a user's own that the studio's tests open, named ``module:factory`` as a user names
them (``tests.studio.models:dict_output``)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["dict_output"]


class DictOutput(nn.Module):
    """Audio in, a dict out: the audio under ``"audio"`` and its envelope under ``"envelope"``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = self.conv(x)
        return {"audio": y, "envelope": y.abs()}


def dict_output() -> nn.Module:
    torch.manual_seed(0)
    return DictOutput().eval()
