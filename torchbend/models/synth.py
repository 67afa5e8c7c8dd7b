"""A harmonic oscillator bank and filtered noise driven one frame every hop, streamable."""

# No ``from __future__ import annotations``: TorchScript reads the class annotations of the
# buffers (see cached_conv.py).

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelError
from .analysis import band_centres
from .compiled import eager, scripted

__all__ = ["HarmonicNoiseSynth", "noise_tables", "soft_knee", "synthesize"]

NOISE_PERIOD = 131071
"""Samples of the noise tables (a prime, about 3 s at 44.1 kHz): the noise repeats at no
period a measure of lines locked to the frame clock would see, and only every 3 s."""


def noise_tables(bands: int, length: int, rate: int, seed: int = 0) -> torch.Tensor:
    """``bands`` loops of band-limited noise, ``[bands, length]``, each of unit RMS.

    One white noise (seeded) filtered in the frequency domain by Hann-shaped bands in log
    frequency, each reaching its neighbours' centres, from 60 Hz to 16 kHz; cyclic, so each
    loops without a seam. No offset: the DC bin is zero.
    """
    generator = torch.Generator().manual_seed(seed)
    white = torch.fft.rfft(torch.randn(length, generator=generator, dtype=torch.float64))
    freqs = torch.fft.rfftfreq(length, 1 / rate, dtype=torch.float64)
    centres = band_centres(bands, 60.0, 16000.0).log2()
    step = float(centres[1] - centres[0])
    distance = (freqs.clamp_min(1.0).log2()[None] - centres[:, None]) / step
    shapes = torch.where(distance.abs() < 1, torch.cos(distance * math.pi / 2) ** 2, 0.0)
    shapes[:, 0] = 0.0
    tables = torch.fft.irfft(white[None] * shapes, length)
    tables = tables / tables.pow(2).mean(-1, keepdim=True).sqrt()
    return tables.float()


class HarmonicNoiseSynth(nn.Module):
    """Sound from frame-rate controls: harmonics of a fundamental plus band-filtered noise.

    Each frame gives a fundamental, a level, a brightness, a noisiness and learned shapes
    (logits of how the power spreads over the ``harmonics`` and over the noise ``bands``, and
    a logit that moves the noise/harmonic balance). From them:

    - the harmonic spread ``softmax(harmonic logits + tilt * log2(k))`` over harmonics
      ``k = 1..harmonics`` below 20 kHz, and the noise spread ``softmax(noise logits + tilt
      * log2(centre / 1 kHz))``, where ``tilt = ln 4 * brightness``: one unit of brightness
      gives each octave 6 dB more power;
    - the noise share ``sigmoid(balance logit + logit(noisiness))``;
    - the level: the frame's power is ``10 ** (2 * loudness)`` (``loudness`` is ``log10`` of
      an RMS), split between the harmonics and the noise by the noise share.

    The fundamental and every amplitude glide linearly from the previous frame's value to the
    frame's across its ``hop`` samples; the oscillators' phase and the noise tables' position
    carry on. Offline a call starts from silence (a previous frame of zeros); in streaming
    mode from where the last block ended, so consecutive blocks give one offline call's
    output. The output goes through a soft knee: unchanged below 0.9 in magnitude, bent
    smoothly towards 0.999 above, so that no bending makes it clip. A leaf of bended graphs.

    Args:
        hop (int): samples per frame.
        sample_rate (int): in Hz.
        harmonics (int): oscillators, at the fundamental and its multiples.
        bands (int): noise bands, from 60 Hz to 16 kHz.

    Shape:
        - ``controls``: ``[batch, 4, frames]``: pitch (octaves re 440 Hz), loudness,
          brightness (octaves re 1 kHz), noisiness (0 to 1)
        - ``shapes``: ``[batch, harmonics + bands + 1, frames]``: harmonic logits, noise
          logits, the balance logit
        - Output: ``[batch, 1, frames * hop]``

    >>> synth = HarmonicNoiseSynth()
    >>> controls = torch.tensor([[[0.0], [-1.0], [0.0], [0.0]]]).repeat(1, 1, 8)
    >>> synth(controls, torch.zeros(1, 49, 8)).shape
    torch.Size([1, 1, 2048])
    """

    phase: torch.Tensor
    position: torch.Tensor
    last: torch.Tensor
    tables: torch.Tensor
    orders: torch.Tensor
    offsets: torch.Tensor
    harmonic_octaves: torch.Tensor
    band_octaves: torch.Tensor
    ramp: torch.Tensor
    torchbend_leaf = True

    def __init__(
        self, hop: int = 256, sample_rate: int = 44100, harmonics: int = 32, bands: int = 16
    ) -> None:
        super().__init__()
        if hop < 1 or harmonics < 1 or bands < 2:
            raise ModelError(
                f"hop and harmonics must be positive and bands at least 2, got hop={hop}, "
                f"harmonics={harmonics}, bands={bands}"
            )
        self.hop = hop
        self.sample_rate = sample_rate
        self.harmonics = harmonics
        self.bands = bands
        self.streaming = False
        tables = noise_tables(bands, NOISE_PERIOD, sample_rate).T.contiguous()
        self.register_buffer("tables", tables, persistent=False)  # [time, bands]
        orders = torch.arange(1, harmonics + 1, dtype=torch.float32)
        self.register_buffer("orders", orders[:, None], persistent=False)
        self.register_buffer("offsets", math.pi * orders**2 / harmonics, persistent=False)
        self.register_buffer("harmonic_octaves", orders.log2()[:, None], persistent=False)
        octaves = (band_centres(bands, 60.0, 16000.0) / 1000.0).log2().float()
        self.register_buffer("band_octaves", octaves[:, None], persistent=False)
        ramp = torch.arange(1, hop + 1, dtype=torch.float32) / hop
        self.register_buffer("ramp", ramp, persistent=False)
        # The state a stream carries: the oscillators' phase (float64: it is summed over
        # every sample), the noise tables' position, and the last frame's fundamental,
        # harmonic amplitudes and noise gains.
        self.register_buffer("phase", torch.zeros(1, 1, dtype=torch.float64), persistent=False)
        self.register_buffer("position", torch.zeros((), dtype=torch.long), persistent=False)
        self.register_buffer("last", torch.zeros(1, 1 + harmonics + bands, 1), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next streamed block starts from silence."""
        self.phase.zero_()
        self.position.zero_()
        self.last.zero_()

    def forward(self, controls: torch.Tensor, shapes: torch.Tensor) -> torch.Tensor:
        batch, frames = controls.shape[0], controls.shape[-1]
        if self.streaming:
            if self.last.shape[0] != batch:
                self.last = controls.new_zeros(batch, self.last.shape[1], 1)
                self.phase = torch.zeros(batch, 1, dtype=torch.float64, device=controls.device)
            last, phase, position = self.last, self.phase, self.position
        else:
            last = controls.new_zeros(batch, self.last.shape[1], 1)
            phase = torch.zeros(batch, 1, dtype=torch.float64, device=controls.device)
            position = torch.zeros((), dtype=torch.long, device=controls.device)
        traced = not torch.jit.is_scripting() and not eager()  # torch.export, torch.compile
        noise = self.noise(position, frames * self.hop, traced)
        constants = [self.orders, self.offsets, self.harmonic_octaves, self.band_octaves, self.ramp]
        rate = float(self.sample_rate)
        if torch.jit.is_scripting() or traced:
            y, now, phases = synthesize(
                controls, shapes, last, phase, noise, constants, rate, traced
            )
        else:
            y, now, phases = _scripted_synthesize(
                controls, shapes, last, phase, noise, constants, rate
            )
        if self.streaming:
            self.last.copy_(now[..., -1:])
            self.phase.copy_(phases[:, -1:])
            self.position.copy_((position + frames * self.hop) % self.tables.shape[0])
        return y

    def noise(self, position: torch.Tensor, length: int, traced: bool = False) -> torch.Tensor:
        """``length`` samples of the noise tables from ``position`` on, ``[length, bands]``
        (by indexing when ``traced``: a graph cannot read the position as a number)."""
        period = self.tables.shape[0]
        if not traced:
            first = int(position)
            if first + length <= period:
                return self.tables[first : first + length]
        index = (position + torch.arange(length, device=self.tables.device)) % period
        return self.tables[index]


def synthesize(
    controls: torch.Tensor,
    shapes: torch.Tensor,
    last: torch.Tensor,
    phase: torch.Tensor,
    noise: torch.Tensor,
    constants: list[torch.Tensor],
    rate: float,
    traced: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:class:`HarmonicNoiseSynth`'s sound ``[batch, 1, frames * hop]`` from its ``controls``
    and ``shapes``, the ``last`` frame played ``[batch, 1 + harmonics + bands, 1]``, the
    oscillators' ``phase`` ``[batch, 1]`` (float64) and the ``noise`` tables' next samples
    ``[frames * hop, bands]``; ``constants`` holds the harmonic orders ``[harmonics, 1]``,
    their phase offsets ``[harmonics]``, their octaves, the bands' octaves re 1 kHz, the
    glide ramp ``[hop]``; ``rate`` the sample rate in Hz; ``traced``: whether a graph is being
    recorded (``torch.export``). Also returns the frames played and the phase of every
    sample, for a stream to carry on from."""
    orders, offsets, harmonic_octaves, band_octaves, ramp = constants
    batch, frames = controls.shape[0], controls.shape[-1]
    h, b = orders.shape[0], band_octaves.shape[0]
    pitch, loudness, brightness, noisiness = controls.unbind(1)  # each [batch, frames]
    f0 = (440.0 * torch.exp2(pitch)).clamp(1.0, 20000.0)[:, None]
    tilt = 1.3862943611198906 * brightness[:, None]  # ln(4): 6 dB more power an octave
    # In logarithms, so that a harmonic or a band given no power has a finite gradient.
    spread = torch.log_softmax(shapes[:, :h] + tilt * harmonic_octaves, 1)
    # The noise takes the colour of the harmonics (their power, untilted, gathered into the
    # noise bands) times what the decoder gives it: where training never shaped the noise of
    # a sound, more noise does not make it brighter or darker, only noisier.
    places = (pitch[:, None] - 1.1844245711374275) + harmonic_octaves  # octaves re 1 kHz
    width = band_octaves[1, 0] - band_octaves[0, 0]
    distance = (
        places[:, :, None] - band_octaves.reshape(1, 1, b, 1)
    ) / width  # [batch, h, b, frames]
    colour = torch.einsum(
        "bkf,bkgf->bgf", torch.softmax(shapes[:, :h], 1), (1 - distance.abs()).clamp_min(0)
    )
    noise_spread = torch.log_softmax(
        shapes[:, h : h + b] + tilt * band_octaves + torch.log(colour + 1e-3), 1
    )
    share = noisiness.clamp(1e-3, 1 - 1e-3)[:, None]
    balance = shapes[:, h + b :] + torch.log(share / (1 - share))
    level = 2.302585092994046 * loudness.clamp(max=2.0)[:, None]  # ln(10): the log of the RMS
    amplitudes = torch.exp(level + 0.5 * (0.6931471805599453 + F.logsigmoid(-balance) + spread))
    gains = torch.exp(level + 0.5 * (F.logsigmoid(balance) + noise_spread))
    now = torch.cat([f0, amplitudes, gains], 1)  # [batch, 1 + h + b, frames]
    start = torch.cat([last, now[..., :-1]], -1)  # each frame glides from the one before
    f0s = torch.lerp(start[:, 0, :, None], now[:, 0, :, None], ramp)
    step = f0s.reshape(batch, -1).double() * (2 * math.pi / rate)
    phases = (phase + step.cumsum(-1)).remainder(2 * math.pi)
    # One matrix product plays every oscillator and noise band at both ends of each frame's
    # glide: the sound is [sines | noise] @ [amplitudes at start | at end].
    # Schroeder's phases (pi k^2 / h for harmonic k) keep the crest factor of a bright tone
    # low: harmonics that all start in sine phase pile up into peaks.
    waves = torch.sin(phases.float()[..., None] * orders[:, 0] + offsets)  # [batch, time, h]
    basis = torch.cat([waves, noise.expand(batch, -1, -1)], -1)
    ends = torch.stack([start, now], -1)[:, 1:]  # [batch, h + b, frames, 2]
    # A harmonic sounds only while it stays below 20 kHz at both ends of its glide.
    top = torch.maximum(start[:, :1], now[:, :1]) * orders
    ends[:, :h] *= (top < 20000.0)[..., None]
    both = basis.reshape(batch, frames, -1, h + b) @ ends.permute(0, 2, 1, 3)
    y = torch.lerp(both[..., 0], both[..., 1], ramp).reshape(batch, 1, -1)
    # Rarely needed (only what a bending made loud): skipped when nothing passes the knee,
    # except in a graph (``traced``), which cannot branch on values.
    if traced or bool(y.abs().amax() > 0.9):
        y = soft_knee(y, 0.9)
    return y, now, phases


@torch.jit.unused
def _scripted_synthesize(
    controls: torch.Tensor,
    shapes: torch.Tensor,
    last: torch.Tensor,
    phase: torch.Tensor,
    noise: torch.Tensor,
    constants: list[torch.Tensor],
    rate: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return scripted(synthesize)(controls, shapes, last, phase, noise, constants, rate)  # type: ignore[no-any-return]


def soft_knee(y: torch.Tensor, knee: float = 0.9, ceiling: float = 0.999) -> torch.Tensor:
    """``y`` below ``knee`` in magnitude, above it bent smoothly (``tanh``, slope 1 at the
    knee) towards ``ceiling``, which it never passes."""
    room = ceiling - knee
    over = (y.abs() - knee).clamp_min(0.0)
    bent = knee + room * torch.tanh(over / room)
    return torch.where(over > 0, torch.sign(y) * bent, y)
