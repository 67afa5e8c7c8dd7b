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

__all__ = ["MODULATION_HZ", "HarmonicNoiseSynth", "noise_tables", "soft_knee", "synthesize"]

NOISE_PERIOD = 131071
"""Samples of the noise tables (a prime, about 3 s at 44.1 kHz): the noise repeats at no
period a measure of lines locked to the frame clock would see, and only every 3 s."""


MODULATION_HZ = 300.0
"""Bandwidth of the noise that modulates the harmonics (see :class:`HarmonicNoiseSynth`'s
noisiness): each harmonic it multiplies spreads into a band this wide on either side, so its
period is lost (the harmonic-to-noise ratio falls) while its place in the spectrum stays."""


def noise_tables(bands: int, length: int, rate: int, seed: int = 0) -> torch.Tensor:
    """``bands`` loops of band-limited noise and a modulator, ``[bands + 1, length]``, each of
    unit RMS.

    The bands: one white noise (seeded) filtered in the frequency domain by Hann-shaped bands
    in log frequency, each reaching its neighbours' centres, from 60 Hz to 16 kHz. The
    modulator: another white noise (seed + 1) low-passed below :data:`MODULATION_HZ` (a
    half Hann). Cyclic, so each loops without a seam; no offset: the DC bin is zero.
    """
    whites = [
        torch.fft.rfft(
            torch.randn(length, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
        )
        for s in (seed, seed + 1)
    ]
    freqs = torch.fft.rfftfreq(length, 1 / rate, dtype=torch.float64)
    centres = band_centres(bands, 60.0, 16000.0).log2()
    step = float(centres[1] - centres[0])
    distance = (freqs.clamp_min(1.0).log2()[None] - centres[:, None]) / step
    shapes = torch.where(distance.abs() < 1, torch.cos(distance * math.pi / 2) ** 2, 0.0)
    low = freqs / MODULATION_HZ
    lowpass = torch.where(low < 1, torch.cos(low * math.pi / 2) ** 2, 0.0)
    spectra = torch.cat([whites[0][None] * shapes, (whites[1] * lowpass)[None]])
    spectra[:, 0] = 0.0
    tables = torch.fft.irfft(spectra, length)
    tables = tables / tables.pow(2).mean(-1, keepdim=True).sqrt()
    return tables.float()


class HarmonicNoiseSynth(nn.Module):
    """Sound from frame-rate controls: harmonics of a fundamental plus band-filtered noise.

    Each frame gives a fundamental, a level, a brightness, a noisiness and learned shapes
    (logits of how the power spreads over the ``harmonics`` and over the noise ``bands``, and
    a logit that sets the share of the noise bands). From them:

    - the harmonic spread ``softmax(harmonic logits + tilt * log2(k))`` over harmonics
      ``k = 1..harmonics`` below 20 kHz, and the noise spread ``softmax(noise logits + tilt
      * log2(centre / 1 kHz) + log(colour))``, where ``tilt = ln 4 * brightness`` (one unit
      of brightness gives each octave 6 dB more power) and ``colour`` is the harmonics' own
      spread gathered into the bands: where training never shaped the noise of a sound, the
      noise follows the harmonics;
    - the noise bands' share ``sigmoid(balance logit)``;
    - the noisiness ``s``: the share of each harmonic's power that is multiplied by a slow
      noise (below :data:`MODULATION_HZ`), which spreads it into a band around its place: the
      period is lost but the spectrum keeps its shape, so the harmonic-to-noise ratio falls
      (about ``10 log10((1 - s) / s)``, as YIN's aperiodicity ``s`` reads it) and the
      brightness stays;
    - the level: the frame's power is ``10 ** (2 * loudness)`` (``loudness`` is ``log10`` of
      an RMS).

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
    octaves: torch.Tensor
    grid: torch.Tensor
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
        self.register_buffer("tables", tables, persistent=False)  # [time, bands + 1]
        orders = torch.arange(1, harmonics + 1, dtype=torch.float64)
        self.register_buffer("orders", orders.float(), persistent=False)
        self.register_buffer("offsets", (math.pi * orders**2 / harmonics).float(), False)
        # Each harmonic's and each band's octave (re 1 kHz for the bands), what the tilt
        # multiplies, and where harmonic k of a pitch p (octaves re 440 Hz) falls on the band
        # grid, in band steps: grid[k, g] + p / width.
        band_octaves = (band_centres(bands, 60.0, 16000.0) / 1000.0).log2()
        octaves = torch.cat([orders.log2(), band_octaves])[:, None]
        self.register_buffer("octaves", octaves.float(), persistent=False)
        width = float(band_octaves[1] - band_octaves[0])
        grid = (orders.log2()[:, None] + math.log2(440 / 1000) - band_octaves[None]) / width
        self.register_buffer("grid", grid[None, :, :, None].float(), persistent=False)
        self.width = width
        ramp = torch.arange(1, hop + 1, dtype=torch.float32) / hop
        self.register_buffer("ramp", ramp, persistent=False)
        # The state a stream carries: the oscillators' phase (float64: it is summed over
        # every sample), the noise tables' position, and the last frame's fundamental,
        # noisiness, harmonic amplitudes and noise gains.
        self.register_buffer("phase", torch.zeros(1, 1, dtype=torch.float64), persistent=False)
        self.register_buffer("position", torch.zeros((), dtype=torch.long), persistent=False)
        self.register_buffer("last", torch.zeros(1, 2 + harmonics + bands, 1), persistent=False)

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
        constants = [self.orders, self.offsets, self.octaves, self.grid, self.ramp]
        scales = [float(self.sample_rate), 1.0 / self.width]
        if torch.jit.is_scripting() or traced:
            y, now, phases = synthesize(
                controls, shapes, last, phase, noise, constants, scales, traced
            )
        else:
            y, now, phases = _scripted_synthesize(
                controls, shapes, last, phase, noise, constants, scales
            )
        if self.streaming:
            self.last.copy_(now[..., -1:])
            self.phase.copy_(phases[:, -1:])
            self.position.copy_((position + frames * self.hop) % self.tables.shape[0])
        return y

    def noise(self, position: torch.Tensor, length: int, traced: bool = False) -> torch.Tensor:
        """``length`` samples of the noise tables from ``position`` on, ``[length, bands +
        1]`` (by indexing when ``traced``: a graph cannot read the position as a number)."""
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
    scales: list[float],
    traced: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:class:`HarmonicNoiseSynth`'s sound ``[batch, 1, frames * hop]`` from its ``controls``
    and ``shapes``, the ``last`` frame played ``[batch, 2 + harmonics + bands, 1]``, the
    oscillators' ``phase`` ``[batch, 1]`` (float64) and the ``noise`` tables' next samples
    ``[frames * hop, bands + 1]``; ``constants`` holds the harmonic orders ``[harmonics]``,
    their phase offsets, the octaves the tilt multiplies ``[harmonics + bands, 1]``, the
    harmonics' places on the band grid ``[1, harmonics, bands, 1]`` and the glide ramp
    ``[hop]``; ``scales`` the sample rate in Hz and the bands per octave; ``traced``: whether
    a graph is being recorded (``torch.export``). Also returns the frames played and the
    phase of every sample, for a stream to carry on from."""
    orders, offsets, octaves, grid, ramp = constants
    rate, per_octave = scales
    batch, frames = controls.shape[0], controls.shape[-1]
    h = orders.shape[0]
    pitch = controls[:, :1]
    f0 = (440.0 * torch.exp2(pitch)).clamp(1.0, 20000.0)
    # Logits tilted by the brightness: ln(4), 6 dB more power an octave.
    logits = torch.addcmul(shapes[:, :-1], controls[:, 2:3], octaves, value=1.3862943611198906)
    # The noise takes the colour of the harmonics (their power, untilted, gathered into the
    # bands by triangles one band wide) times what the decoder gives it.
    places = torch.add(grid, pitch[:, :, None], alpha=per_octave)  # [batch, h, bands, frames]
    triangles = (1.0 - places.abs()).clamp_min(0.0)
    colour = (torch.softmax(shapes[:, :h], 1)[:, :, None] * triangles).sum(1)
    # In logarithms, so that a harmonic or a band given no power has a finite gradient.
    spread = torch.log_softmax(logits[:, :h], 1)
    noise_spread = torch.log_softmax(logits[:, h:] + torch.log(colour + 1e-3), 1)
    balance = shapes[:, -1:]
    level = 2.302585092994046 * controls[:, 1:2].clamp(max=2.0)  # ln(10): the log of the RMS
    amplitudes = torch.exp(level + 0.5 * (0.6931471805599453 + F.logsigmoid(-balance) + spread))
    gains = torch.exp(level + 0.5 * (F.logsigmoid(balance) + noise_spread))
    noisiness = controls[:, 3:4].clamp(0.0, 1.0)
    now = torch.cat([f0, noisiness, amplitudes, gains], 1)  # [batch, 2 + h + b, frames]
    start = torch.cat([last, now[..., :-1]], -1)  # each frame glides from the one before
    ends = torch.stack([start, now], -1)  # [batch, 2 + h + b, frames, 2]
    f0s = torch.lerp(start[:, 0, :, None], now[:, 0, :, None], ramp)
    step = f0s.reshape(batch, -1).double() * (2 * math.pi / rate)
    phases = (phase + step.cumsum(-1)).remainder(2 * math.pi)
    # A harmonic sounds only while it stays below 20 kHz at both ends of its glide; its power
    # splits into a steady part and a part the slow noise modulates, by the noisiness.
    harmonic = ends[:, 2 : 2 + h] * (
        ends[:, :1].amax(-1, keepdim=True) * orders[:, None, None] < 20000.0
    )
    split = ends[:, 1:2]
    weights = torch.cat([harmonic * (1.0 - split).sqrt(), harmonic * split.sqrt()], -1)
    # Matrix products play every oscillator and noise band at both ends of each frame's glide
    # ([sines] @ [steady and modulated weights at start | at end], [noise] @ [gains at start |
    # at end]), and each frame glides from one end to the other.
    # Schroeder's phases (pi k^2 / h for harmonic k) keep the crest factor of a bright tone
    # low: harmonics that all start in sine phase pile up into peaks.
    waves = torch.sin(phases.float()[..., None] * orders + offsets)  # [batch, time, h]
    played = waves.reshape(batch, frames, -1, h) @ weights.permute(0, 2, 1, 3)
    bands = noise[:, :-1].reshape(frames, -1, noise.shape[1] - 1)
    noises = bands @ ends[:, 2 + h :].permute(0, 2, 1, 3)  # [batch, frames, hop, 2]
    steady = torch.lerp(played[..., 0] + noises[..., 0], played[..., 1] + noises[..., 1], ramp)
    modulated = torch.lerp(played[..., 2], played[..., 3], ramp)
    y = torch.addcmul(steady, modulated, noise[:, -1].reshape(frames, -1))
    y = y.reshape(batch, 1, -1)
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
    scales: list[float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return scripted(synthesize)(controls, shapes, last, phase, noise, constants, scales)  # type: ignore[no-any-return]


def soft_knee(y: torch.Tensor, knee: float = 0.9, ceiling: float = 0.999) -> torch.Tensor:
    """``y`` below ``knee`` in magnitude, above it bent smoothly (``tanh``, slope 1 at the
    knee) towards ``ceiling``, which it never passes."""
    room = ceiling - knee
    over = (y.abs() - knee).clamp_min(0.0)
    bent = knee + room * torch.tanh(over / room)
    return torch.where(over > 0, torch.sign(y) * bent, y)
