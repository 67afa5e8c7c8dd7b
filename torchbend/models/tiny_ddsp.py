"""TinyDDSP: a small causal resynthesis model (an analysis, a learned decoder and a harmonic plus
noise synthesizer) whose latent names what it does, streamable block by block."""

import torch
from torch import nn

from ..errors import ModelError
from .analysis import FrameAnalysis
from .cached_conv import CachedConv1d
from .streaming import Streamable
from .synth import HarmonicNoiseSynth

__all__ = ["LATENT_NAMES", "LATENT_RANGES", "TinyDDSP"]

LATENT_NAMES = ("pitch", "loudness", "brightness", "noisiness")
"""The named channels of TinyDDSP's latent, first in its order; the learned ones follow."""

LATENT_RANGES = {
    "pitch": (-2.0, 1.0),
    "loudness": (-2.5, -0.5),
    "brightness": (-2.0, 2.0),
    "noisiness": (0.0, 1.0),
}
"""The range worth walking each named channel over, in its units: pitch in octaves re 440 Hz
(110 to 880 Hz), loudness as ``log10`` of an RMS (-50 to -10 dB), brightness in octaves re
1 kHz (a centroid of 250 Hz to 4 kHz), noisiness from 0 (periodic) to 1 (noise). The timbre
channels are ``tanh`` outputs, from -1 to 1."""


class TinyDDSP(Streamable):
    """A causal DDSP-style model: ``encode(x) -> z``, ``decode(z) -> y``, one frame per ``hop``.

    The encoder measures each frame (:class:`FrameAnalysis`): its pitch, loudness,
    brightness and noisiness are the first four latent channels, as measured; a small
    learned convolution turns the frame's spectral shape into ``timbres`` more channels
    (``tanh``, so between -1 and 1). The decoder never sees the input: from the pitch, the
    loudness and the timbre channels, three causal convolutions over frames give how the
    power spreads over the harmonics and the noise bands, and the synthesizer
    (:class:`HarmonicNoiseSynth`) plays them at the latent's pitch and level, tilted by its
    brightness, made noisy by its noisiness. So the output is a new sound, not a filtered copy:
    bending a layer changes what is synthesized (timbre, noise, pitch, level) rather than
    how the input is filtered, and moving a named latent channel moves its descriptor.

    Every stage is causal and carries its state, so after :meth:`set_streaming` consecutive
    blocks (multiples of ``hop`` samples) give one offline call's output.

    Args:
        timbres (int): learned latent channels.
        hidden (int): channels of the decoder's hidden layers.
        harmonics (int): oscillators of the synthesizer.
        bands (int): noise bands of the synthesizer, and spectral-shape bands of the analysis.
        hop (int): samples per frame, also the compression ratio.
        sample_rate (int): in Hz.

    Shape:
        - ``encode``: ``[batch, 1, time]`` to ``[batch, 4 + timbres, time // hop]``
        - ``decode``: ``[batch, 4 + timbres, frames]`` to ``[batch, 1, frames * hop]``
        - ``forward``: ``[batch, 1, time]`` to ``[batch, 1, time]``

    >>> model = TinyDDSP()
    >>> model.ratio, model.latent_size, model.latent_names[:4]
    (256, 8, ['pitch', 'loudness', 'brightness', 'noisiness'])
    >>> z = model.encode(torch.randn(1, 1, 2048) * 0.1)
    >>> z.shape, model.decode(z).shape
    (torch.Size([1, 8, 8]), torch.Size([1, 1, 2048]))
    """

    def __init__(
        self,
        timbres: int = 4,
        hidden: int = 64,
        harmonics: int = 32,
        bands: int = 16,
        hop: int = 256,
        sample_rate: int = 44100,
    ) -> None:
        super().__init__()
        if timbres < 1 or hidden < 1:
            raise ModelError(f"timbres and hidden must be positive, got {timbres} and {hidden}")
        self.config = {
            "timbres": timbres,
            "hidden": hidden,
            "harmonics": harmonics,
            "bands": bands,
            "hop": hop,
            "sample_rate": sample_rate,
        }
        self.ratio = hop
        self.hop = hop
        self.sample_rate = sample_rate
        self.latent_size = len(LATENT_NAMES) + timbres
        self.latent_names = list(LATENT_NAMES) + [f"timbre {i + 1}" for i in range(timbres)]
        self.latent_ranges = dict(LATENT_RANGES)
        self.latent_ranges.update({f"timbre {i + 1}": (-1.0, 1.0) for i in range(timbres)})
        self.latency = hop
        self.analysis = FrameAnalysis(hop, 2048, sample_rate, bands)
        self.encoder = nn.Sequential(
            CachedConv1d(bands, 32, 3),
            nn.Tanh(),
            CachedConv1d(32, timbres, 1),
            nn.Tanh(),
        )
        self.decoder = nn.Sequential(
            CachedConv1d(2 + timbres, hidden, 3),
            nn.LeakyReLU(0.2),
            CachedConv1d(hidden, hidden, 3),
            nn.LeakyReLU(0.2),
            CachedConv1d(hidden, hidden, 3),
            nn.LeakyReLU(0.2),
            CachedConv1d(hidden, harmonics + bands + 1, 1),
        )
        self.synth = HarmonicNoiseSynth(hop, sample_rate, harmonics, bands)

    @torch.jit.export
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Waveform ``[batch, 1, time]`` to latent ``[batch, latent_size, time // hop]``."""
        if x.dim() != 3 or x.shape[1] != 1:
            raise ModelError(f"TinyDDSP takes mono audio [batch, 1, time], got {list(x.shape)}")
        if x.shape[-1] % self.hop != 0:
            raise ModelError(
                f"TinyDDSP takes a time length that is a multiple of its hop {self.hop}, "
                f"got {x.shape[-1]}"
            )
        frames = self.analysis(x)
        return torch.cat([frames[:, :4], self.encoder(frames[:, 4:])], 1)

    @torch.jit.export
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latent ``[batch, latent_size, frames]`` to waveform ``[batch, 1, frames * hop]``."""
        shapes = self.decoder(torch.cat([z[:, :2], z[:, 4:]], 1))
        return self.synth(z[:, :4], shapes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))
