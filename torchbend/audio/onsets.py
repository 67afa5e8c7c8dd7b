"""Onsets of mono signals: where a spectral flux over log-spaced bands peaks, and how often."""

from __future__ import annotations

import math

import torch

__all__ = [
    "ONSET_BANDS",
    "ONSET_FRAME",
    "ONSET_GAP",
    "ONSET_HOP",
    "ONSET_RISE_DB",
    "onset_rate",
    "onset_times",
]

_TINY = 1e-30


ONSET_FRAME = 1024
"""STFT frame of the onset detector in samples (Hann window)."""

ONSET_HOP = 256
"""STFT hop of the onset detector in samples (5.8 ms at 44.1 kHz)."""

ONSET_BANDS = 24
"""Bands of the onset detector, log-spaced from 60 Hz to 16 kHz."""

ONSET_RISE_DB = 8.0
"""Mean rise over the bands, in dB over two hops (11.6 ms), from which a peak is an onset: a
click or a note after a gap rises 20 to 50 dB; white noise's band levels fluctuate by less than
5 dB and a pad's slow swells and beating by less than 4."""

ONSET_GAP = 0.05
"""Shortest time between two onsets, in seconds: at most 20 onsets a second."""


def _band_rise(x: torch.Tensor, rate: int) -> torch.Tensor:
    """Per frame, the mean over :data:`ONSET_BANDS` bands of the rise of their level (dB,
    floored 80 dB below the loudest band of the signal, so that silence never rises) from two
    frames before. Bands rather than bins: a band's level sums many bins, so noise barely
    moves it, while a note or a hit lifts whole bands at once."""
    signal = x.detach().reshape(-1).float()
    signal = torch.nn.functional.pad(signal, (0, max(ONSET_FRAME - signal.numel(), 0)))
    frames = signal.unfold(0, ONSET_FRAME, ONSET_HOP)
    window = torch.hann_window(ONSET_FRAME, dtype=torch.float32)
    power = torch.fft.rfft(frames * window).abs().pow(2)
    freqs = torch.fft.rfftfreq(ONSET_FRAME, 1 / rate, dtype=torch.float32)
    edges = torch.logspace(math.log10(60.0), math.log10(16000.0), ONSET_BANDS + 1)
    band = torch.bucketize(freqs, edges) - 1
    weights = torch.nn.functional.one_hot(band.clamp(0, ONSET_BANDS), ONSET_BANDS + 1)
    weights = weights[:, :ONSET_BANDS].float()
    # A band narrower than a bin takes the bin nearest its centre.
    centres = (edges[:-1] * edges[1:]).sqrt()
    empty = weights.sum(0) == 0
    nearest = (freqs[:, None] - centres[None]).abs().argmin(0)
    weights[nearest[empty], torch.nonzero(empty)[:, 0]] = 1.0
    level = 10 * torch.log10(power @ weights + _TINY)
    level = level.clamp_min(float(level.max()) - 80.0)
    rise = (level[2:] - level[:-2]).clamp_min(0).mean(-1)
    return torch.nn.functional.pad(rise, (2, 0))


def onset_times(x: torch.Tensor, rate: int) -> torch.Tensor:
    """Times of the onsets in seconds, from peaks of a spectral flux.

    The flux is the mean rise of the levels of :data:`ONSET_BANDS` log-spaced bands (STFT of
    :data:`ONSET_FRAME` samples, hop :data:`ONSET_HOP`) over two hops, in dB. A frame is an
    onset when its flux is the largest within ±:data:`ONSET_GAP` and at least
    :data:`ONSET_RISE_DB`; the onset's time is the frame's end, where the rise is first seen.
    Levels in dB make it blind to the signal's level.

    Args:
        x (Tensor): the signal, mono (flattened).
        rate (int): sample rate in Hz.

    Shape:
        - Output: ``[onsets]``, in seconds, ascending.
    """
    flux = _band_rise(x, rate)
    gap = max(round(ONSET_GAP * rate / ONSET_HOP), 1)
    padded = torch.nn.functional.pad(flux[None, None], (gap, gap), value=-1.0)[0, 0]
    peak = flux >= padded.unfold(0, 2 * gap + 1, 1).max(-1).values
    frames = torch.nonzero(peak & (flux >= ONSET_RISE_DB))[:, 0]
    # Two equal neighbours are both local maxima: keep the first of any closer than the gap.
    kept: list[int] = []
    for frame in frames.tolist():
        if not kept or frame - kept[-1] > gap:
            kept.append(frame)
    return (torch.tensor(kept, dtype=torch.float32) * ONSET_HOP + ONSET_FRAME) / rate


def onset_rate(x: torch.Tensor, rate: int) -> float:
    """Onsets per second (:func:`onset_times` over the signal's duration).

    >>> clicks = torch.zeros(88200)
    >>> clicks[2205::11025] = 1.0  # four clicks a second, for two seconds
    >>> onset_rate(clicks, 44100)
    4.0
    """
    return onset_times(x, rate).numel() / (x.numel() / rate)
