"""Audio models built from public libraries (tiny configurations, random weights drawn from a
fixed seed, nothing downloaded), as ``module:factory`` references a sweep specification names:
the workers import this module and call the factory, and get the same weights."""

from __future__ import annotations

import torch
from torch import nn

from tests.zoo.models import _Separator, _STFTMask


def separator() -> nn.Module:
    """asteroid-filterbanks' STFT encoder and decoder around a masker: one source out, as
    long as the mixture in (``[batch, 1, time]``)."""
    torch.manual_seed(0)
    return _Separator("stft", n_src=1, n_filters=64, kernel_size=64, stride=16).eval()


class _Mono(nn.Module):
    """nnAudio's STFT, magnitude mask and inverse STFT, on ``[batch, 1, time]``. nnAudio's
    STFT keeps the length of the last input in an attribute, which a graph cannot replay:
    as the tracer's error advises, it is made a leaf, run as its own code at every call."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _STFTMask()
        self.inner.stft.torchbend_leaf = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x[:, 0])[:, None]


def stft_mask() -> nn.Module:
    torch.manual_seed(0)
    return _Mono().eval()
