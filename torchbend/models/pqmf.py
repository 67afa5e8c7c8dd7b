"""A pseudo-QMF filter bank: a waveform split into critically sampled bands, and merged back.

No ``from __future__ import annotations``: TorchScript reads the annotations of this module.
"""

import functools
import math

import torch
from torch import nn

from ..errors import ModelError
from .cached_conv import CachedConv1d

__all__ = ["PQMF", "prototype_filter"]


def prototype_filter(bands: int, taps_per_band: int, attenuation: float = 100.0) -> torch.Tensor:
    """The low-pass prototype of a ``bands``-band pseudo-QMF bank, ``bands * taps_per_band`` taps.

    A Kaiser-windowed sinc whose window gives ``attenuation`` dB of stop band. Its cut-off is
    chosen so that the prototype convolved with its own reverse is close to zero at every
    nonzero multiple of ``2 * bands`` samples: then the aliasing between neighbouring bands
    cancels and analysis followed by synthesis is close to a pure delay.
    """
    # The search takes some 50 ms; every model built (each load) would repeat it.
    return _prototype(bands, taps_per_band, attenuation).clone()


@functools.lru_cache(maxsize=8)
def _prototype(bands: int, taps_per_band: int, attenuation: float) -> torch.Tensor:
    length = bands * taps_per_band
    beta = 0.1102 * (attenuation - 8.7)
    n = torch.arange(length, dtype=torch.float64) - (length - 1) / 2
    window = torch.kaiser_window(length, periodic=False, beta=beta, dtype=torch.float64)

    def make(cutoff: float) -> torch.Tensor:
        h = cutoff * torch.sinc(cutoff * n) * window
        return h / h.sum()

    def leak(cutoff: float) -> float:
        h = make(cutoff)
        g = torch.nn.functional.conv1d(h[None, None], h.flip(0)[None, None], padding=length - 1)
        g = g.reshape(-1)
        centre = length - 1
        lags = torch.arange(centre % (2 * bands), g.numel(), 2 * bands)
        lags = lags[lags != centre]
        return float(g[lags].pow(2).sum() / g[centre] ** 2)

    # Golden-section search of the cut-off (in cycles per sample) between 0.3 and 0.8 / bands.
    low, high = 0.3 / bands, 0.8 / bands
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = high - golden * (high - low), low + golden * (high - low)
        if leak(a) < leak(b):
            high = b
        else:
            low = a
    return make((low + high) / 2)


class PQMF(nn.Module):
    """Split mono audio into ``bands`` critically sampled bands and merge them back.

    Band ``k`` covers ``k * sr / (2 * bands)`` to ``(k + 1) * sr / (2 * bands)``, at one sample
    every ``bands`` input samples. Both directions are causal polyphase convolutions over
    ``taps_per_band`` frames, cached for streaming like the rest of the model: merging the
    split of a signal gives it back delayed by :attr:`delay` samples, with an error about 60
    dB below it at 16 taps per band (aliasing between bands about 100 dB below). The filters
    are fixed (their weights do not train) but can be bent like any weight.

    Args:
        bands (int): number of bands (also the hop between band samples).
        taps_per_band (int): filter length in band samples; the filters have
            ``bands * taps_per_band`` taps.

    Shape:
        - ``analysis``: ``[batch, 1, time]`` to ``[batch, bands, time // bands]``
        - ``synthesis``: ``[batch, bands, frames]`` to ``[batch, 1, frames * bands]``

    >>> pqmf = PQMF(16)
    >>> x = torch.randn(1, 1, 4096)
    >>> y = pqmf.synthesis(pqmf.analysis(x))
    >>> error = y[..., pqmf.delay :] - x[..., : -pqmf.delay]
    >>> bool(error.pow(2).mean() < 1e-5 * x.pow(2).mean())
    True
    """

    def __init__(self, bands: int = 16, taps_per_band: int = 16) -> None:
        super().__init__()
        if bands < 2 or taps_per_band < 2:
            raise ModelError(
                f"a PQMF needs at least 2 bands and 2 taps per band, got {bands} and "
                f"{taps_per_band}"
            )
        self.bands = bands
        self.delay = bands * taps_per_band - bands
        h = prototype_filter(bands, taps_per_band)
        length = h.numel()
        n = torch.arange(length, dtype=torch.float64) - (length - 1) / 2
        k = torch.arange(bands, dtype=torch.float64)[:, None]
        phase = torch.where(k % 2 == 0, math.pi / 4, -math.pi / 4)
        carrier = (2 * k + 1) * math.pi / (2 * bands) * n
        analysis = 2 * h * torch.cos(carrier + phase)  # [bands, length]
        synthesis = 2 * h * torch.cos(carrier - phase) * bands
        # Polyphase form on [batch, bands, frames] where channel r holds samples i * bands + r:
        # band k at frame i = sum over frames j back and phases r of the input at
        # (i - j) * bands + r times analysis[k, j * bands + bands - 1 - r], and output phase r
        # at frame i = sum over bands k and frames j of band k at i - j times
        # synthesis[k, j * bands + r]. conv1d correlates, so tap j sits at index taps - 1 - j.
        a = analysis.reshape(bands, taps_per_band, bands).flip(1, 2)  # [k, tap, r]
        s = synthesis.reshape(bands, taps_per_band, bands).flip(1)  # [k, tap, r]
        self.split = CachedConv1d(bands, bands, taps_per_band, bias=False)
        self.merge = CachedConv1d(bands, bands, taps_per_band, bias=False)
        with torch.no_grad():
            self.split.weight.copy_(a.permute(0, 2, 1))  # [out k, in r, tap]
            self.merge.weight.copy_(s.permute(2, 0, 1))  # [out r, in k, tap]
        for weight in (self.split.weight, self.merge.weight):
            weight.requires_grad_(False)

    @torch.jit.export
    def analysis(self, x: torch.Tensor) -> torch.Tensor:
        """Waveform ``[batch, 1, time]`` to bands ``[batch, bands, time // bands]``."""
        phases = x.reshape(x.shape[0], -1, self.bands).transpose(1, 2)
        return self.split(phases)

    @torch.jit.export
    def synthesis(self, bands: torch.Tensor) -> torch.Tensor:
        """Bands ``[batch, bands, frames]`` to waveform ``[batch, 1, frames * bands]``."""
        phases = self.merge(bands)
        return phases.transpose(1, 2).reshape(phases.shape[0], 1, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.synthesis(self.analysis(x))
