"""TinyRave: a small causal waveform autoencoder in the style of RAVE, streamable block by block."""

from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ModelError
from .cached_conv import CachedConv1d
from .pqmf import PQMF
from .streaming import Streamable

__all__ = ["TinyRave"]


class TinyRave(Streamable):
    """A small causal waveform autoencoder: ``encode(x) -> z``, ``decode(z) -> y``.

    The waveform is split into ``bands`` bands by a pseudo-QMF filter bank (:class:`PQMF`, as
    RAVE does); the encoder maps the bands to ``latent_size`` channels at the band rate (one
    frame every ``bands`` samples) through a causal 3-frame convolution, a ``tanh`` and a
    1-frame convolution; the decoder mirrors it back to bands, which the filter bank merges.
    No layer has a bias and ``tanh`` is odd, so silence gives exact silence and the model
    adds no offset nor any even-order distortion. The latent channels are ordered by the
    variance they carry on the training sounds (the first ones carry most of the sound).

    Every convolution is causal and cached, so after :meth:`set_streaming` the model runs on
    consecutive blocks (multiples of ``ratio`` samples) and gives the same output as one
    offline call on the whole signal. The output is the input delayed by :attr:`latency`
    samples (the filter bank's delay), up to the model's reconstruction error.

    Args:
        latent_size (int): latent channels.
        hidden (Sequence[int]): channels of the hidden layer of the encoder and the decoder.
        bands (int): bands of the filter bank, also the compression ratio, in samples.
        taps_per_band (int): length of the filter bank's filters, in band samples.
        sample_rate (int): sample rate the model was trained at, in Hz (informative).

    Shape:
        - ``encode``: ``[batch, 1, time]`` to ``[batch, latent_size, time // ratio]``
        - ``decode``: ``[batch, latent_size, frames]`` to ``[batch, 1, frames * ratio]``
        - ``forward``: ``[batch, 1, time]`` to ``[batch, 1, time]``

    ``time`` must be a multiple of ``ratio`` (``encode`` raises a
    :class:`~torchbend.errors.ModelError`, a ``ValueError``, otherwise).

    >>> model = TinyRave()
    >>> model.ratio, model.latent_size, model.latency
    (16, 16, 240)
    >>> z = model.encode(torch.randn(2, 1, 2048))
    >>> z.shape, model.decode(z).shape
    (torch.Size([2, 16, 128]), torch.Size([2, 1, 2048]))
    """

    def __init__(
        self,
        latent_size: int = 16,
        hidden: Sequence[int] = (64, 64),
        bands: int = 16,
        taps_per_band: int = 16,
        sample_rate: int = 44100,
    ) -> None:
        super().__init__()
        if len(hidden) != 2 or any(c < 1 for c in hidden):
            raise ModelError(
                f"hidden takes the positive channel counts of the encoder's and the decoder's "
                f"hidden layers (two entries), got {list(hidden)}"
            )
        if latent_size < 1:
            raise ModelError(f"latent_size must be positive, got {latent_size}")
        self.pqmf = PQMF(bands, taps_per_band)
        self.latent_size = latent_size
        self.bands = bands
        self.ratio = bands
        self.latency = self.pqmf.delay
        self.sample_rate = sample_rate
        self.config = {
            "latent_size": latent_size,
            "hidden": list(hidden),
            "bands": bands,
            "taps_per_band": taps_per_band,
            "sample_rate": sample_rate,
        }
        self.encoder = nn.Sequential(
            CachedConv1d(bands, hidden[0], 3, bias=False),
            nn.Tanh(),
            CachedConv1d(hidden[0], latent_size, 1, bias=False),
        )
        self.decoder = nn.Sequential(
            CachedConv1d(latent_size, hidden[1], 3, bias=False),
            nn.Tanh(),
            CachedConv1d(hidden[1], bands, 1, bias=False),
        )

    @torch.jit.export
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Waveform ``[batch, 1, time]`` to latent ``[batch, latent_size, time // ratio]``."""
        if x.dim() != 3 or x.shape[1] != 1:
            raise ModelError(f"TinyRave takes mono audio [batch, 1, time], got {list(x.shape)}")
        if x.shape[-1] % self.ratio != 0:
            raise ModelError(
                f"TinyRave takes a time length that is a multiple of its ratio {self.ratio}, "
                f"got {x.shape[-1]}"
            )
        return self.encoder(self.pqmf.analysis(x))

    @torch.jit.export
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latent ``[batch, latent_size, frames]`` to waveform ``[batch, 1, frames * ratio]``."""
        return self.pqmf.synthesis(self.decoder(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))
