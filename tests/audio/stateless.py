"""Models that keep no state between calls (they click when streamed), built with random weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class WaveNet(nn.Module):
    """Causal dilated convolutions (an explicit F.pad on the left), gated, with residual adds."""

    def __init__(self, channels: int = 8, layers: int = 4) -> None:
        super().__init__()
        self.first = nn.Conv1d(1, channels, 1)
        self.dilated = nn.ModuleList(
            nn.Conv1d(channels, 2 * channels, 2, dilation=2**i) for i in range(layers)
        )
        self.mix = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in range(layers))
        self.last = nn.Conv1d(channels, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        for i, (conv, mix) in enumerate(zip(self.dilated, self.mix)):
            a, b = conv(F.pad(h, (2**i, 0))).chunk(2, 1)
            h = h + mix(torch.tanh(a) * torch.sigmoid(b))
        return self.last(h)


class Centred(nn.Module):
    """Convolutions padded on both sides (delays 2, 2 and 1 when streamed), with residuals
    around them of different delays."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, channels, 5, padding=2)
        self.b = nn.Conv1d(channels, channels, 3, padding=2, dilation=2)
        self.c = nn.Conv1d(channels, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        h = h + torch.sigmoid(self.b(h))
        return self.c(h) + x


class Recurrent(nn.Module):
    """A GRU called without a state, between a 1x1 convolution and a linear layer."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.first = nn.Conv1d(1, channels, 1)
        self.gru = nn.GRU(channels, channels, batch_first=True)
        self.last = nn.Linear(channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(self.first(x).transpose(1, 2))
        return self.last(y).transpose(1, 2)


def built(kind: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return kind().eval()


class Remembering(nn.Module):
    """A centred convolution (delay 1 once converted) before an LSTM, which then starts one
    frame after its block: the frame before the signal must not reach its state."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.first = nn.Conv1d(1, channels, 3, padding=1)
        self.lstm = nn.LSTM(channels, channels, batch_first=True)
        self.last = nn.Linear(channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, (_, _) = self.lstm(self.first(x).transpose(1, 2))
        return self.last(y).transpose(1, 2)


def converted_error(model: nn.Module, streaming: nn.Module, block: int, blocks: int) -> float:
    """Largest difference between ``streaming`` (``make_streaming(model)``) block by block,
    from a reset, and ``model`` in one pass delayed by the latency it reports, on noise."""
    x = torch.randn(1, 1, blocks * block, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = model(x)
        streaming.reset_cache()  # type: ignore[operator]
        parts = torch.cat([streaming(b) for b in x.split(block, -1)], -1)
    latency = int(streaming.latency)  # type: ignore[arg-type]
    return float((parts[..., latency:] - whole[..., : whole.shape[-1] - latency]).abs().max())


class Upsampler(nn.Module):
    """A centred convolution, a transposed one upsampling by 2 (kernel 4, padding 1) and
    another convolution: latency (1 * 2 + 1) + 1 = 4 output samples once converted."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.first = nn.Conv1d(1, channels, 3, padding=1)
        self.up = nn.ConvTranspose1d(channels, channels, 4, stride=2, padding=1)
        self.last = nn.Conv1d(channels, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(self.up(torch.tanh(self.first(x))))
