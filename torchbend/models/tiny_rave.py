"""TinyRave: a small causal waveform autoencoder in the style of RAVE, streamable block by block."""

from collections.abc import Sequence

import torch
from torch import nn

from .cached_conv import CachedConv1d, CachedConvTranspose1d

__all__ = ["TinyRave"]


class ResidualBlock(nn.Module):
    """``x + conv1x1(act(conv3(act(x))))`` with a causal, dilated 3-tap convolution."""

    def __init__(self, channels: int, dilation: int = 1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.LeakyReLU(0.2),
            CachedConv1d(channels, channels, 3, dilation=dilation),
            nn.LeakyReLU(0.2),
            CachedConv1d(channels, channels, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class TinyRave(nn.Module):
    """A small causal waveform autoencoder: ``encode(x) -> z``, ``decode(z) -> y``.

    The waveform is first split into ``bands`` polyphase components (sample ``n`` goes to
    component ``n % bands``, a lossless reshape standing in for RAVE's PQMF filter bank), then
    strided causal convolutions with residual blocks bring it down to ``latent_size`` channels
    at one frame every ``ratio`` samples. The decoder mirrors it with causal transposed
    convolutions and a ``tanh`` output. Every convolution is causal and cached, so after
    :meth:`set_streaming` the model runs on consecutive blocks (multiples of ``ratio``
    samples) and gives the same output as one offline call on the whole signal.

    Args:
        latent_size (int): latent channels.
        channels (Sequence[int]): channels after the input convolution and after each
            downsampling stage; one more entry than ``ratios``.
        ratios (Sequence[int]): downsampling factor of each stage, in frames.
        bands (int): polyphase components the waveform is split into, in samples.
        sample_rate (int): sample rate the model was trained at, in Hz (informative).

    Shape:
        - ``encode``: ``[batch, 1, time]`` to ``[batch, latent_size, time // ratio]``
        - ``decode``: ``[batch, latent_size, frames]`` to ``[batch, 1, frames * ratio]``
        - ``forward``: ``[batch, 1, time]`` to ``[batch, 1, time]``

    ``time`` must be a multiple of ``ratio`` (``encode`` raises a ``ValueError`` otherwise).

    >>> model = TinyRave()
    >>> model.ratio, model.latent_size
    (256, 16)
    >>> z = model.encode(torch.randn(2, 1, 2048))
    >>> z.shape, model.decode(z).shape
    (torch.Size([2, 16, 8]), torch.Size([2, 1, 2048]))
    """

    def __init__(
        self,
        latent_size: int = 16,
        channels: Sequence[int] = (32, 64, 128, 128),
        ratios: Sequence[int] = (4, 4, 2),
        bands: int = 8,
        sample_rate: int = 44100,
    ) -> None:
        super().__init__()
        if len(channels) != len(ratios) + 1:
            raise ValueError(
                f"channels needs one more entry than ratios ({len(ratios) + 1}), "
                f"got {len(channels)}"
            )
        for name, values in [("channels", channels), ("ratios", ratios)]:
            if any(v < 1 for v in values):
                raise ValueError(f"{name} must all be positive, got {list(values)}")
        if latent_size < 1 or bands < 1:
            raise ValueError(
                f"latent_size and bands must be positive, got {latent_size} and {bands}"
            )
        self.latent_size = latent_size
        self.bands = bands
        self.sample_rate = sample_rate
        self.ratio = bands
        for r in ratios:
            self.ratio *= r
        self.config = {
            "latent_size": latent_size,
            "channels": list(channels),
            "ratios": list(ratios),
            "bands": bands,
            "sample_rate": sample_rate,
        }

        encoder: list[nn.Module] = [CachedConv1d(bands, channels[0], 7)]
        for r, c_in, c_out in zip(ratios, channels[:-1], channels[1:]):
            encoder += [
                ResidualBlock(c_in, 3),
                nn.LeakyReLU(0.2),
                CachedConv1d(c_in, c_out, 2 * r, stride=r),
            ]
        encoder += [nn.LeakyReLU(0.2), CachedConv1d(channels[-1], latent_size, 3)]
        self.encoder = nn.Sequential(*encoder)

        decoder: list[nn.Module] = [CachedConv1d(latent_size, channels[-1], 3)]
        for r, c_in, c_out in zip(
            reversed(ratios), reversed(channels[1:]), reversed(channels[:-1])
        ):
            decoder += [
                nn.LeakyReLU(0.2),
                CachedConvTranspose1d(c_in, c_out, 2 * r, stride=r),
                ResidualBlock(c_out, 3),
            ]
        decoder += [nn.LeakyReLU(0.2), CachedConv1d(channels[0], bands, 7), nn.Tanh()]
        self.decoder = nn.Sequential(*decoder)

    @torch.jit.export
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Waveform ``[batch, 1, time]`` to latent ``[batch, latent_size, time // ratio]``."""
        if x.dim() != 3 or x.shape[1] != 1:
            raise ValueError(f"TinyRave takes mono audio [batch, 1, time], got {list(x.shape)}")
        if x.shape[-1] % self.ratio != 0:
            raise ValueError(
                f"TinyRave takes a time length that is a multiple of its ratio {self.ratio}, "
                f"got {x.shape[-1]}"
            )
        # [batch, 1, time] -> [batch, bands, time // bands]; band k holds samples n % bands == k.
        x = x.reshape(x.shape[0], -1, self.bands).transpose(1, 2)
        return self.encoder(x)

    @torch.jit.export
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latent ``[batch, latent_size, frames]`` to waveform ``[batch, 1, frames * ratio]``."""
        y = self.decoder(z)
        return y.transpose(1, 2).reshape(y.shape[0], 1, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    def set_streaming(self, streaming: bool = True) -> "TinyRave":
        """Run block by block (``True``), carrying state across calls, or offline (``False``).

        Switching either way clears the caches. A :class:`~torchbend.BendedModule` bakes the
        mode into its graphs: trace after switching.
        """
        for module in self.modules():
            if isinstance(module, (CachedConv1d, CachedConvTranspose1d)):
                module.streaming = streaming
                module.reset_cache()
        return self

    def reset_cache(self) -> None:
        """Forget the past of a stream: the next block starts from silence."""
        for module in self.modules():
            if isinstance(module, (CachedConv1d, CachedConvTranspose1d)):
                module.reset_cache()
