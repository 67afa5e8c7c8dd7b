"""Frame analysis of a waveform: pitch, loudness, brightness, noisiness and a spectral shape,
one frame every hop, causal, streamable block by block."""

# No ``from __future__ import annotations``: TorchScript reads the class annotations of the
# buffers (see cached_conv.py).

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelError
from .compiled import eager, scripted

__all__ = ["FrameAnalysis", "band_centres", "frame_features", "yin"]

SILENT_PITCH = -1.0
"""The pitch given to silent frames, in octaves re 440 Hz (220 Hz): a resting value, so that a
note that starts after silence glides from nearby, not from the top of the range."""


def band_centres(count: int, low: float, high: float) -> torch.Tensor:
    """``count`` frequencies spaced evenly in log frequency from ``low`` to ``high`` Hz."""
    return torch.logspace(math.log10(low), math.log10(high), count, dtype=torch.float64)


class FrameAnalysis(nn.Module):
    """What a frame of audio sounds like, as numbers: one column every ``hop`` samples.

    Frame ``i`` ends at sample ``(i + 1) * hop`` and reads the ``window`` samples before it
    (causal: nothing later). Its channels:

    - ``pitch``: the fundamental in octaves re 440 Hz (``log2(f0 / 440)``), by YIN (de
      Cheveigné and Kawahara, 2002) on the window decimated by four: the cumulative mean
      normalised difference, its first dip below 0.15 (else its lowest point) between the
      ``lowest`` and ``highest`` frequencies, refined by a parabola. Silent frames read
      :data:`SILENT_PITCH`.
    - ``loudness``: ``log10`` of the RMS of the frame's last 1024 samples (-1 is
      -20 dB re full scale; digital silence reads -6).
    - ``brightness``: the spectral centroid of the last 512 samples (Hann window), in octaves
      re 1 kHz (``log2(centroid / 1000)``).
    - ``noisiness``: the normalised difference at the chosen period (the lowest point of the
      parabola through it), from 0 (periodic) to 1 (noise); silent frames read 1.
    - ``bands`` more: the spectral shape, ``log10`` of the power in log-spaced bands over the
      frame's total (halved and offset by 1, so that it sits around 0), blind to the level.

    Offline, the input is padded on the left with zeros; in streaming mode with the end of
    the previous block, so consecutive blocks give one offline call's frames. A leaf of
    bended graphs (its output is one activation): a DSP stage, not a learned one.

    Args:
        hop (int): samples per frame.
        window (int): samples each frame reads (even; the pitch search needs ``window / 2``
            samples of one period and two at the lowest frequency).
        sample_rate (int): in Hz.
        bands (int): spectral-shape bands, from 60 Hz to 16 kHz.
        lowest (float): lowest pitch searched, in Hz.
        highest (float): highest pitch searched, in Hz.

    Shape:
        - Input: ``[batch, 1, time]``, ``time`` a multiple of ``hop``
        - Output: ``[batch, 4 + bands, time // hop]``

    >>> analysis = FrameAnalysis()
    >>> t = torch.arange(4096) / 44100
    >>> frames = analysis(torch.sin(2 * torch.pi * 220 * t)[None, None])
    >>> frames.shape, round(float(440 * 2 ** frames[0, 0, -1]))
    (torch.Size([1, 20, 16]), 220)
    """

    cache: torch.Tensor
    lags: torch.Tensor
    reach: torch.Tensor
    around: torch.Tensor
    rest: torch.Tensor
    hann: torch.Tensor
    sums: torch.Tensor
    eps: torch.Tensor
    mix: torch.Tensor
    bias: torch.Tensor
    torchbend_leaf = True

    def __init__(
        self,
        hop: int = 256,
        window: int = 2048,
        sample_rate: int = 44100,
        bands: int = 16,
        lowest: float = 45.0,
        highest: float = 2000.0,
    ) -> None:
        super().__init__()
        if hop < 1 or window < max(hop, 1024) or window % 2:
            raise ModelError(
                f"window must be even and at least max(hop, 1024) samples, and hop positive; "
                f"got hop={hop}, window={window}"
            )
        rate = sample_rate / 4  # the pitch search runs on the window decimated by four
        half = window // 8  # the integration length of the difference function
        self.longest = min(int(rate / lowest), half - 2)
        self.shortest = max(int(rate / highest), 2)
        if self.shortest >= self.longest:
            raise ModelError(
                f"lowest ({lowest} Hz) must be below highest ({highest} Hz) and within what a "
                f"window of {window} samples holds"
            )
        self.hop = hop
        self.window = window
        self.sample_rate = sample_rate
        self.streaming = False
        self.register_buffer("cache", torch.zeros(1, 1, window - hop), persistent=False)
        self.register_buffer("lags", torch.arange(half, dtype=torch.float32), persistent=False)
        # Twice each searched lag's offset from the shortest: see yin() (the dip's reach).
        reach = 2 * torch.arange(self.longest - self.shortest)
        self.register_buffer("reach", reach, persistent=False)
        self.register_buffer("around", torch.tensor([-1, 0, 1]) + self.shortest, False)
        self.scale = rate / 440.0
        size = 512  # the spectrum reads the last 512 samples, through a Hann window
        freqs = torch.fft.rfftfreq(size, 1 / sample_rate, dtype=torch.float64)
        hann = torch.hann_window(size, periodic=False, dtype=torch.float64)
        self.register_buffer("hann", hann.float(), persistent=False)
        # What the frame's power spectrum is summed into, in one product: the power in each
        # band (triangles in log frequency, each reaching its neighbours' centres, and at least
        # one bin wide: the lowest are narrower than a bin of 86 Hz), the power times
        # frequency (for the centroid) and the total power (twice: each with its own floor).
        centres = band_centres(bands, 60.0, 16000.0).log2()
        step = float(centres[1] - centres[0])
        distance = (freqs.clamp_min(1.0).log2()[:, None] - centres[None]).abs() / step
        weights = (1 - distance).clamp_min(0)
        nearest = (freqs[:, None] - 2 ** centres[None]).abs().argmin(0)
        weights[nearest, torch.arange(bands)] = weights[nearest, torch.arange(bands)].clamp_min(1)
        total = torch.ones_like(freqs)[:, None]
        sums = torch.cat([weights, freqs[:, None], total, total], 1)
        self.register_buffer("sums", sums.float(), persistent=False)
        # The channels are a linear map of the logarithms (log10) of those sums and of the
        # energy of the last 1024 samples, each above its floor, and of YIN's pitch and
        # noisiness: [bands | power x frequency | power | power | energy | pitch | noisiness].
        self.register_buffer(
            "eps", torch.tensor([1e-12] * bands + [1e-6, 1e-9, 1e-12, 1e-12]), persistent=False
        )
        mix = torch.zeros(4 + bands, bands + 6, dtype=torch.float64)
        mix[0, bands + 4] = 1.0  # pitch
        mix[1, bands + 3] = 0.5  # loudness: log10 of the RMS
        mix[2, bands] = math.log2(10)  # brightness: log2 of the centroid re 1 kHz
        mix[2, bands + 1] = -math.log2(10)
        mix[3, bands + 5] = 1.0  # noisiness
        mix[4:, :bands] = 0.5 * torch.eye(bands, dtype=torch.float64)  # shape, re the power
        mix[4:, bands + 2] = -0.5
        bias = torch.zeros(4 + bands, dtype=torch.float64)
        bias[2] = -math.log2(1000.0)
        bias[4:] = 1.0
        self.register_buffer("mix", mix.float(), persistent=False)
        self.register_buffer("bias", bias.float(), persistent=False)
        self.bands = bands
        self.register_buffer("rest", torch.tensor([SILENT_PITCH, 1.0]), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next streamed block starts from silence."""
        self.cache.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.window - self.hop
        if self.streaming:
            if self.cache.shape[0] != x.shape[0]:
                self.cache = x.new_zeros(x.shape[0], 1, pad)
            x = torch.cat([self.cache, x], -1)
            self.cache.copy_(x[..., x.shape[-1] - pad :])
        else:
            x = nn.functional.pad(x, (pad, 0))
        frames = x[:, 0].unfold(-1, self.window, self.hop)  # [batch, frames, window]
        search = [self.lags, self.reach, self.around, self.rest]  # see yin()
        bounds = [self.shortest, self.longest]
        spectral = [self.hann, self.sums, self.eps, self.mix, self.bias]
        if torch.jit.is_scripting() or not eager():
            return frame_features(frames, spectral, search, bounds, self.scale)
        return _scripted_frame_features(frames, spectral, search, bounds, self.scale)


def frame_features(
    frames: torch.Tensor,
    spectral: list[torch.Tensor],
    search: list[torch.Tensor],
    bounds: list[int],
    scale: float,
) -> torch.Tensor:
    """:class:`FrameAnalysis`'s channels ``[batch, 4 + bands, frames]`` of ``frames``
    ``[batch, frames, window]``, given its constant tensors (``spectral``: the Hann window,
    the sums of the power spectrum, the floors of their logarithms, the linear map from
    them to the channels and its offsets; ``search``: see :func:`yin`)."""
    hann, sums, eps, mix, bias = spectral
    window = frames.shape[-1]
    pitched = yin(frames, search, bounds, scale)
    power = torch.fft.rfft(frames[..., window - 512 :] * hann).abs().square()
    energy = frames[..., window - 1024 :].square().mean(-1, keepdim=True)
    logs = (torch.cat([power @ sums, energy], -1) + eps).log10()
    return F.linear(torch.cat([logs, pitched], -1), mix, bias).transpose(1, 2)


def yin(
    frames: torch.Tensor, search: list[torch.Tensor], bounds: list[int], scale: float
) -> torch.Tensor:
    """YIN on ``frames`` ``[batch, frames, window]`` decimated by four: pitch (octaves re 440
    Hz) and noisiness, ``[batch, frames, 2]``. ``search`` holds the lags ``0..half - 1``,
    twice the offsets of the searched lags from the shortest, the shortest lag plus ``-1, 0,
    1``, and the values of a silent frame; ``bounds`` the shortest and longest lags searched;
    ``scale`` the decimated sample rate over 440 Hz."""
    lags, reach, around, rest = search
    shortest, longest = bounds
    half = lags.shape[0]
    batch, count = frames.shape[0], frames.shape[1]
    low = frames.reshape(batch, count, 2 * half, 4).mean(-1)  # decimated by four
    # The correlation of the first half window with the window at each lag, by FFT (no wrap:
    # the lags stay below half the transform).
    correlation = torch.fft.irfft(
        torch.fft.rfft(low) * torch.fft.rfft(low[..., :half], 2 * half).conj(), 2 * half
    )[..., :half]
    energy = F.pad(low.square().cumsum(-1), (1, 0))  # the sum of x[j]^2 before each sample:
    shifted = energy[..., half:] - energy[..., : half + 1]  # over the half window at each lag
    difference = torch.sub(shifted[..., :1] + shifted[..., :half], correlation, alpha=2.0)
    normalised = difference * lags / (difference.cumsum(-1) + 1e-9)
    # YIN's rule: the first dip below 0.15, not the lowest point (which can fall on a multiple
    # of the period); none below it, the lowest point. The dip's bottom is searched up to half
    # again as far (offsets past first + first // 2 + 2 skipped: ``reach`` holds twice each
    # offset, compared with 3 * first + 4).
    middle = normalised[..., shortest:longest]
    first = (F.pad(middle, (0, 1), value=-1.0) < 0.15).to(torch.uint8).argmax(-1, keepdim=True)
    lag = middle.masked_fill(reach > 3 * first + 4, 10.0).argmin(-1, keepdim=True)
    near = normalised.gather(-1, lag + around)  # lag - 1, lag, lag + 1
    before, at, after = near.unbind(-1)
    slope = before - after
    shift = (0.5 * slope / ((before - 2 * at + after).abs() + 1e-3)).clamp(-0.5, 0.5)
    period = shift + (lag[..., 0] + shortest)
    # The noisiness: the difference at the parabola's lowest point, not at the whole lag
    # (which a period between two lags leaves above zero even for a pure tone).
    lowest = at - 0.25 * slope * shift
    named = torch.stack([torch.log2(scale / period), lowest.clamp(0.0, 1.0)], -1)
    return torch.where(shifted[..., :1] < 1e-10, rest, named)  # silent frames


@torch.jit.unused
def _scripted_frame_features(
    frames: torch.Tensor,
    spectral: list[torch.Tensor],
    search: list[torch.Tensor],
    bounds: list[int],
    scale: float,
) -> torch.Tensor:
    return scripted(frame_features)(frames, spectral, search, bounds, scale)  # type: ignore[no-any-return]
