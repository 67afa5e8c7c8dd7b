"""A small RAVE-style TorchScript file, built the way ``rave export --streaming`` builds one.

What it shares with a real export (RAVE v2's ``scripts/export.py``, nn~ 1.6): an
``nn_tilde.Module`` whose rate is its ``sr`` attribute, streaming convolutions from
``cached_conv`` (RAVE's own library: padding caches in buffers, updated in place at every
call), a variational encoder whose latent is sampled (``randn_like``), centred by a
``latent_mean`` buffer and rotated by a ``latent_pca`` buffer, then cropped to
``latent_size`` of its ``full_latent_size`` channels; a decoder that fills the cropped
channels with noise, rotates back and synthesizes; ``decode(z, from_forward=False)``; a
signal split into bands and reshaped by its leading sizes (``x.shape[:-2]``), as RAVE's PQMF
input is; a ``stereo_mode`` flag with its setter; the four nn~ attributes RAVE registers
(``learn_target``...); the methods registered for nn~ with their ratios
(``encode_params`` = ``[1, 1, latent_size, ratio]``...). The bottleneck is real: 4 channels at
one frame per 2048 samples (a ratio of 2048, as RAVE v2's), against 44100 samples a second.
Its weights are random (seeded, zero biases): it is a stand-in for a trained file, built in a
second, with nothing downloaded. ``cached_conv`` and ``nn_tilde`` are test-only dependencies
(``scripts/test-nodeps.txt``).
"""

from __future__ import annotations

from pathlib import Path

import cached_conv as cc
import nn_tilde
import torch
from torch import nn

__all__ = ["LATENT_SIZE", "RATIO", "SAMPLE_RATE", "RaveStyle", "write_rave_style"]

LATENT_SIZE = 4
"""Latent channels the file's ``encode`` gives and its ``decode`` takes."""
FULL_LATENT_SIZE = 8
"""Latent channels of the decoder: the cropped ones are filled with noise, as RAVE does."""
RATIO = 2048
"""Samples per latent frame: a band split of 16, then strides 8, 4 and 4."""
SAMPLE_RATE = 44100
STRIDES = (8, 4, 4)
BANDS = 16
WIDTH = 16
GAIN = 0.85
"""Gain of each layer's initial weights (over a unit-variance draw): the shipped sounds come
out loud, and below the level where the safety stage's limiter starts."""


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Module:
    """A causal streaming convolution, as RAVE's blocks make them."""
    padding = cc.get_padding(kernel, stride, mode="causal")
    return cc.Conv1d(cin, cout, kernel, stride=stride, padding=padding)


def _up(cin: int, cout: int, stride: int) -> nn.Module:
    """A streaming transposed convolution that multiplies the rate by ``stride``."""
    return cc.ConvTranspose1d(cin, cout, 2 * stride, stride, padding=stride // 2)


class Bands(nn.Module):
    """Stands for RAVE's PQMF: a streaming split of the signal into ``BANDS`` bands at
    ``1 / BANDS`` of its rate (``forward``), and its inverse."""

    def __init__(self) -> None:
        super().__init__()
        self.analysis = _conv(1, BANDS, BANDS, BANDS)
        self.synthesis = _up(BANDS, 1, BANDS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.analysis(x)

    @torch.jit.export
    def inverse(self, x: torch.Tensor) -> torch.Tensor:
        return self.synthesis(x)


class RaveStyle(nn_tilde.Module):
    """A RAVE-style autoencoder exported for nn~: ``encode`` (audio to 4 latent channels at
    one frame per 2048 samples), ``decode`` and ``forward``, streaming."""

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        super().__init__(sr=sample_rate)
        self.n_channels = 1
        self.target_channels = 1
        self.stereo_mode = False
        self.full_latent_size = FULL_LATENT_SIZE
        self.latent_size = LATENT_SIZE
        self.pqmf = Bands()
        layers: list[nn.Module] = []
        width = BANDS
        for stride in STRIDES:
            layers += [_conv(width, WIDTH, 2 * stride, stride), nn.LeakyReLU(0.2)]
            width = WIDTH
        layers.append(_conv(WIDTH, 2 * FULL_LATENT_SIZE, 3))  # a mean and a scale
        self.encoder = cc.CachedSequential(*layers)
        blocks: list[nn.Module] = [_conv(FULL_LATENT_SIZE, WIDTH, 3)]
        for stride in reversed(STRIDES):
            blocks += [nn.LeakyReLU(0.2), _up(WIDTH, WIDTH, stride)]
        blocks += [nn.LeakyReLU(0.2), _conv(WIDTH, BANDS, 7)]
        self.decoder = cc.CachedSequential(*blocks)
        rotation, _ = torch.linalg.qr(torch.randn(FULL_LATENT_SIZE, FULL_LATENT_SIZE))
        self.register_buffer("latent_pca", rotation)
        self.register_buffer("latent_mean", 0.1 * torch.randn(FULL_LATENT_SIZE))
        self.register_buffer("fidelity", torch.linspace(0.5, 1.0, FULL_LATENT_SIZE))
        for module in self.modules():  # weights that keep a signal's level from layer to layer
            if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
                cin = module.weight.shape[1 if isinstance(module, nn.Conv1d) else 0]
                taps = module.kernel_size[0] // (module.stride[0] if module.transposed else 1)
                nn.init.normal_(module.weight, std=GAIN / (cin * taps) ** 0.5)
                nn.init.zeros_(module.bias)
        for name in ("learn_target", "reset_target", "learn_source", "reset_source"):
            self.register_attribute(name, False)  # RAVE's style-transfer switches, for nn~
        labels = [f"(signal) latent {i + 1}" for i in range(LATENT_SIZE)]
        self.register_method("encode", 1, 1, LATENT_SIZE, RATIO, output_labels=labels)
        self.register_method("decode", LATENT_SIZE, RATIO, 1, 1, input_labels=labels)
        self.register_method("forward", 1, 1, 1, 1)

    @torch.jit.export
    def set_stereo_mode(self, stereo: bool) -> None:
        self.stereo_mode = bool(stereo)

    @torch.jit.export
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        if self.stereo_mode and self.n_channels == 1:
            x = x[:, 0].unsqueeze(0)
        batch_size = x.shape[:-2]  # each channel split into bands, as RAVE's "pqmf" input
        x = self.pqmf(x.reshape(-1, 1, x.shape[-1]))
        x = x.reshape(batch_size + (-1, x.shape[-1]))  # noqa: RUF005 (RAVE's own form)
        mean, scale = self.encoder(x).chunk(2, 1)
        std = nn.functional.softplus(scale) + 1e-4
        z = torch.randn_like(mean) * std + mean  # sampled, as RAVE's encoder does
        z = z - self.latent_mean.unsqueeze(-1)
        z = nn.functional.conv1d(z, self.latent_pca.unsqueeze(-1))
        return z[:, : self.latent_size]

    @torch.jit.export
    def decode(self, z: torch.Tensor, from_forward: bool = False) -> torch.Tensor:
        noise = torch.randn(z.shape[0], self.full_latent_size - z.shape[1], z.shape[-1]).type_as(z)
        z = torch.cat([z, noise], 1)
        z = nn.functional.conv1d(z, self.latent_pca.T.unsqueeze(-1))
        z = z + self.latent_mean.unsqueeze(-1)
        y = self.decoder(z)
        batch_size = z.shape[:-2]
        y = self.pqmf.inverse(y.reshape(y.shape[0] * self.n_channels, -1, y.shape[-1]))
        y = torch.tanh(y.reshape(batch_size + (self.n_channels, -1)))  # noqa: RUF005 (RAVE's)
        if y.shape[-1] > z.shape[-1] * self.decode_params[1]:
            y = y[..., : z.shape[-1] * self.decode_params[1]]
        return y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x), from_forward=True)


def write_rave_style(path: str | Path, seed: int = 0, sample_rate: int = SAMPLE_RATE) -> Path:
    """Build the file at ``path`` as RAVE's export does (streaming convolutions on, gradients
    off, methods checked at registration, scripted, saved) and return ``path``."""
    path = Path(path)
    cc.use_cached_conv(True)
    try:
        torch.manual_seed(seed)
        with torch.no_grad():
            RaveStyle(sample_rate).eval().export_to_ts(str(path))
    finally:
        cc.use_cached_conv(False)
    return path
