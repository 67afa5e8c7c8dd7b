"""Perceptual descriptors of mono signals: spectral centroid, pitch, harmonic ratio, onsets."""

from __future__ import annotations

import math

import torch

from .onsets import onset_rate, onset_times
from .quality import loudness_lufs

__all__ = [
    "ACTIVE_FLOOR_DBFS",
    "ACTIVE_RANGE_DB",
    "DESCRIPTORS",
    "HIGHEST_HZ",
    "LOWEST_HZ",
    "OCTAVE_CHECK",
    "SHIFT_SHARE",
    "TRACKS",
    "VOICED_SHARE",
    "YIN_THRESHOLD",
    "active_frames",
    "centroid_track",
    "character",
    "character_and_pitch",
    "describe",
    "frame_tracks",
    "hnr_db",
    "hnr_track",
    "onset_rate",
    "onset_times",
    "pitch_hz",
    "pitch_shift",
    "pitch_track",
    "spectral_centroid",
]

DESCRIPTORS: tuple[str, ...] = ("centroid_hz", "pitch_hz", "hnr_db", "onset_rate", "loudness_lufs")
"""The names :func:`describe` gives, in its order."""

TRACKS: tuple[str, ...] = ("pitch_hz", "level_db", "centroid_hz", "hnr_db")
"""The rows :func:`frame_tracks` gives, in its order."""

ACTIVE_RANGE_DB = 60.0
"""A frame is silent when its RMS is more than this many dB below the loudest frame's."""

ACTIVE_FLOOR_DBFS = -90.0
"""A frame is silent when its RMS is below this level (dB re 1.0), whatever the loudest frame:
below the 16-bit noise floor, so that a render that only holds rounding noise has no frames."""

OCTAVE_CHECK = 0.3
"""Below this, a dip of the cumulative mean normalised difference at a half, a third or a
quarter of the chosen period wins over it (see :func:`pitch_track`)."""

VOICED_SHARE = 0.5
"""The least share of the non-silent frames that must be voiced for :func:`pitch_hz` to give
a pitch: a median over a few voiced frames of a noise reads nothing a listener hears."""

SHIFT_SHARE = 0.1
"""The least share of all the frames that must be voiced in both tracks for
:func:`pitch_shift` to read a shift: two renders mostly of noise, each voiced on a handful of
frames, can read an octave apart (YIN's octave errors) where a listener hears no pitch."""

LOWEST_HZ = 50.0
"""The lowest fundamental the pitch descriptors search by default, in Hz."""

HIGHEST_HZ = 2000.0
"""The highest fundamental the pitch descriptors search by default, in Hz."""

YIN_THRESHOLD = 0.15
"""YIN's absolute threshold: the first dip of the cumulative mean normalised difference below it
gives the period (de Cheveigné and Kawahara, 2002, step 4)."""

_TINY = 1e-30


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1).float()


def _frames(x: torch.Tensor, size: int, hop: int) -> torch.Tensor:
    """``[frames, size]``: every whole frame of the signal (one zero-padded frame if shorter)."""
    y = _flat(x)
    if y.numel() < size:
        y = torch.nn.functional.pad(y, (0, size - y.numel()))
    return y.unfold(0, size, hop)


def active_frames(frames: torch.Tensor) -> torch.Tensor:
    """Which of ``frames`` (``[frames, size]``) are not silent: RMS within
    :data:`ACTIVE_RANGE_DB` of the loudest frame and above :data:`ACTIVE_FLOOR_DBFS`."""
    rms = frames.pow(2).mean(-1).sqrt()
    floor = max(float(rms.max()) * 10 ** (-ACTIVE_RANGE_DB / 20), 10 ** (ACTIVE_FLOOR_DBFS / 20))
    return rms > floor


def _magnitudes(frames: torch.Tensor, rate: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Magnitude spectra of ``frames`` ``[frames, size]`` (Hann window) and the bins'
    frequencies."""
    size = frames.shape[-1]
    window = torch.hann_window(size, dtype=torch.float32)
    freqs = torch.fft.rfftfreq(size, 1 / rate, dtype=torch.float32)
    return torch.fft.rfft(frames * window).abs(), freqs


def _spectra(
    x: torch.Tensor, rate: int, size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Magnitudes ``[frames, bins]`` (Hann window, hop a quarter), bin frequencies, active mask."""
    frames = _frames(x, size, size // 4)
    return (*_magnitudes(frames, rate), active_frames(frames))


def centroid_track(x: torch.Tensor, rate: int, size: int = 2048) -> torch.Tensor:
    """Spectral centroid of each frame, in Hz (NaN for silent frames).

    Args:
        x (Tensor): the signal, mono (flattened).
        rate (int): sample rate in Hz.
        size (int): frame in samples (Hann window, hop ``size // 4``).

    Shape:
        - Output: ``[frames]``, frame ``i`` starting at sample ``i * size // 4``.
    """
    magnitude, freqs, active = _spectra(x, rate, size)
    track = (magnitude @ freqs) / (magnitude.sum(-1) + _TINY)
    return torch.where(active, track, math.nan)


def spectral_centroid(x: torch.Tensor, rate: int, size: int = 2048) -> float:
    """Spectral centroid in Hz: the magnitude-weighted mean frequency of the non-silent frames
    (the centroid of their summed magnitude spectra, so a loud frame counts more than a quiet
    one). NaN when every frame is silent.

    Args:
        x (Tensor): the signal, mono (flattened).
        rate (int): sample rate in Hz.
        size (int): frame in samples (Hann window, hop ``size // 4``).

    >>> t = torch.arange(44100, dtype=torch.float64) / 44100  # float32 phases add a noise floor
    >>> round(spectral_centroid(torch.sin(2 * math.pi * 1000 * t), 44100))
    1000
    """
    magnitude, freqs, active = _spectra(x, rate, size)
    if not bool(active.any()):
        return math.nan
    total = magnitude[active].sum(0)
    return float((total @ freqs) / (total.sum() + _TINY))


def _yin(
    x: torch.Tensor, rate: int, lowest: float, highest: float, size: int = 2048, hop: int = 1024
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """YIN on frames of ``size`` samples: period (samples), aperiodicity (the cumulative mean
    normalised difference at the period, 0 periodic to about 1 noise), voiced and active masks,
    each ``[frames]``. The difference integrates over the first half of each frame, so the
    longest period is ``size / 2``."""
    frames = _frames(x, size, hop)
    half = size // 2
    longest = min(math.ceil(rate / lowest), half - 2)
    shortest = max(int(rate / highest), 2)
    # r(lag) = sum_{j < half} x[j] x[j + lag], for every lag at once, by FFT.
    n = 2 * size
    spectrum = torch.fft.rfft(frames, n)
    head = torch.fft.rfft(frames[:, :half], n)
    correlation = torch.fft.irfft(spectrum * head.conj(), n)[:, :half]
    energy = torch.nn.functional.pad(frames.pow(2).cumsum(-1), (1, 0))
    shifted = energy[:, half : 2 * half] - energy[:, :half]  # sum_{j < half} x[j + lag]^2
    difference = (shifted[:, :1] + shifted - 2 * correlation).clamp_min(0)
    lags = torch.arange(half, dtype=torch.float32)
    normalised = difference * lags / (difference.cumsum(-1) + _TINY)
    normalised[:, 0] = 1.0
    middle = normalised[:, shortest : longest + 1]
    index = torch.arange(middle.shape[-1])
    below = middle < YIN_THRESHOLD
    voiced = below.any(-1)
    first = torch.where(voiced, below.to(torch.int8).argmax(-1), 0)
    # From the first dip below the threshold, on to the lowest point of that dip.
    after = index >= first[:, None]
    risen = ~below & after
    end = torch.where(risen.any(-1), risen.to(torch.int8).argmax(-1), middle.shape[-1])
    dip = after & (index < end[:, None])
    search = torch.where(voiced[:, None], torch.where(dip, middle, math.inf), middle)
    lag = search.argmin(-1) + shortest
    # The octave check: the cumulative mean favours long lags in noisy frames, so a multiple
    # of the period can dip below the threshold first; a dip near lag / k below
    # OCTAVE_CHECK is taken instead (the largest such k: the shortest period).
    for k in (2, 3, 4):
        centre = torch.div(lag, k, rounding_mode="floor")
        near = (centre[:, None] + torch.arange(-2, 3)).clamp(shortest, longest)
        values = normalised.gather(-1, near)
        low, where = values.min(-1)
        take = voiced & (centre - 2 >= shortest) & (low < OCTAVE_CHECK)
        lag = torch.where(take, near.gather(-1, where[:, None])[:, 0], lag)
    lag = lag.clamp(1, half - 2)
    before, at, later = normalised.gather(-1, lag[:, None] + torch.tensor([-1, 0, 1])).unbind(-1)
    curve = before - 2 * at + later
    shift = torch.where(curve > 0, 0.5 * (before - later) / (curve + _TINY), 0.0).clamp(-0.5, 0.5)
    minimum = (at - 0.25 * (before - later) * shift).clamp(0.0, 1.0)
    active = active_frames(frames)
    return lag + shift, minimum, voiced & active, active


def pitch_track(
    x: torch.Tensor, rate: int, lowest: float = LOWEST_HZ, highest: float = HIGHEST_HZ
) -> torch.Tensor:
    """Fundamental frequency of each frame by YIN, in Hz (NaN where unvoiced or silent).

    YIN (de Cheveigné and Kawahara, 2002) on frames of 2048 samples, hop 1024: the
    cumulative mean normalised difference (integrated over the first 1024 samples of the
    frame) over lags from ``rate / highest`` to ``rate / lowest``; the
    period is the lowest point of its first dip below :data:`YIN_THRESHOLD`, refined by a
    parabola through it and its neighbours. A frame with no dip below the threshold is
    unvoiced. One check is added to YIN: where the difference also dips below
    :data:`OCTAVE_CHECK` within two lags of a half, a third or a quarter of that period, the
    shortest such period wins (in a noisy frame the normalisation by the cumulative mean
    lowers long lags, so twice or three times the period can be the first to pass the
    threshold).

    Args:
        x (Tensor): the signal, mono (flattened).
        rate (int): sample rate in Hz.
        lowest (float): lowest fundamental searched, in Hz (periods longer than 1022
            samples, below 43 Hz at 44.1 kHz, are not searched).
        highest (float): highest fundamental searched, in Hz.

    Shape:
        - Output: ``[frames]``, frame ``i`` starting at sample ``1024 * i``.
    """
    period, _, voiced, _ = _yin(x, rate, lowest, highest)
    return torch.where(voiced, rate / period, math.nan)


def pitch_hz(
    x: torch.Tensor, rate: int, lowest: float = LOWEST_HZ, highest: float = HIGHEST_HZ
) -> float:
    """Median fundamental in Hz over the voiced, non-silent frames of :func:`pitch_track`; NaN
    when fewer than :data:`VOICED_SHARE` of the non-silent frames are voiced (noise, a hit).

    >>> t = torch.arange(44100) / 44100
    >>> round(pitch_hz(torch.sin(2 * math.pi * 220 * t), 44100), 1)
    220.0
    """
    period, _, voiced, active = _yin(x, rate, lowest, highest)
    return _voiced_median(rate / period, voiced, active)


def _voiced_median(freqs: torch.Tensor, voiced: torch.Tensor, active: torch.Tensor) -> float:
    if int(voiced.sum()) < VOICED_SHARE * max(int(active.sum()), 1):
        return math.nan
    return float(freqs[voiced].median())


def pitch_shift(before: torch.Tensor, after: torch.Tensor) -> float:
    """How far a pitch moved, in semitones: the median over the frames voiced in both tracks
    (of :func:`pitch_track`, lined up) of ``12 log2(after / before)``. Frame by frame rather
    than between the medians of each, so that a melody whose voiced frames change (a note
    drowned in noise) reads no shift. NaN when fewer than :data:`VOICED_SHARE` of the frames
    voiced in ``before`` are voiced in ``after``, when fewer than :data:`SHIFT_SHARE` of all
    the frames are voiced in both, or when none is voiced in ``before``.

    >>> t = torch.arange(44100) / 44100
    >>> low, high = (pitch_track(torch.sin(2 * math.pi * f * t), 44100) for f in (220, 440))
    >>> round(pitch_shift(low, high), 2)
    12.0
    """
    n = min(before.numel(), after.numel())
    a, b = before[:n], after[:n]
    both = ~(a.isnan() | b.isnan())
    voiced = int((~a.isnan()).sum())
    shared = int(both.sum())
    if voiced == 0 or shared < VOICED_SHARE * voiced or shared < SHIFT_SHARE * n:
        return math.nan
    return float((12 * torch.log2(b[both] / a[both])).median())


def hnr_track(
    x: torch.Tensor, rate: int, lowest: float = LOWEST_HZ, highest: float = HIGHEST_HZ
) -> torch.Tensor:
    """Harmonic-to-noise ratio of each frame, in dB (NaN for silent frames).

    From YIN's aperiodicity ``a`` (the cumulative mean normalised difference at the period
    :func:`pitch_track` chooses, or at its lowest point in an unvoiced frame): for a periodic
    signal of power ``H`` plus noise of power ``N``, the difference at the period is about
    ``2N`` and its mean over the lags about ``2(H + N)``, so ``a ≈ N / (H + N)`` and the ratio
    is ``10 log10((1 - a) / a)``. ``a`` is kept within 1e-6 of 0 and 1 (±60 dB).

    Args:
        x (Tensor): the signal, mono (flattened).
        rate (int): sample rate in Hz.
        lowest (float): lowest fundamental searched, in Hz.
        highest (float): highest fundamental searched, in Hz.

    Shape:
        - Output: ``[frames]``, as :func:`pitch_track`.
    """
    _, aperiodicity, _, active = _yin(x, rate, lowest, highest)
    return _hnr(aperiodicity, active)


def frame_tracks(
    x: torch.Tensor, rate: int, lowest: float = LOWEST_HZ, highest: float = HIGHEST_HZ
) -> torch.Tensor:
    """Each frame of ``x`` described, one row per name of :data:`TRACKS`: the fundamental in
    Hz (:func:`pitch_track`: NaN where unvoiced or silent), the RMS level in dB re full scale,
    the spectral centroid in Hz (Hann window; NaN where silent) and the harmonic-to-noise
    ratio in dB (:func:`hnr_track`), from one run of YIN, so that two renders can be compared
    frame by frame. The arguments are :func:`hnr_track`'s.

    Shape:
        - Output: ``[4, frames]``, frame ``i`` the 2048 samples from sample ``1024 * i``.

    >>> t = torch.arange(44100, dtype=torch.float64) / 44100
    >>> tracks = frame_tracks(0.1 * torch.sin(2 * math.pi * 440 * t), 44100)
    >>> [round(float(row.nanmedian())) for row in tracks[:3]]
    [440, -23, 440]
    """
    period, aperiodicity, voiced, active = _yin(x, rate, lowest, highest)
    frames = _frames(x, 2048, 1024)  # the frames _yin reads
    magnitude, freqs = _magnitudes(frames, rate)
    level = 10 * torch.log10(frames.pow(2).mean(-1) + _TINY)
    centroid = (magnitude @ freqs) / (magnitude.sum(-1) + _TINY)
    pitch = torch.where(voiced, rate / period, math.nan)
    return torch.stack(
        [pitch, level, torch.where(active, centroid, math.nan), _hnr(aperiodicity, active)]
    )


def _hnr(aperiodicity: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    a = aperiodicity.clamp(1e-6, 1 - 1e-6)
    return torch.where(active, 10 * torch.log10((1 - a) / a), math.nan)


def _median(track: torch.Tensor) -> float:
    """The median of the values of ``track`` that are not NaN (NaN if none)."""
    kept = track[~track.isnan()]
    return float(kept.median()) if kept.numel() else math.nan


def hnr_db(
    x: torch.Tensor, rate: int, lowest: float = LOWEST_HZ, highest: float = HIGHEST_HZ
) -> float:
    """Median harmonic-to-noise ratio in dB over the non-silent frames of :func:`hnr_track`
    (voiced or not: noise reads about -5 to -10 dB, a steady tone 30 dB and more); NaN when
    every frame is silent."""
    return _median(hnr_track(x, rate, lowest, highest))


def describe(x: torch.Tensor, rate: int) -> dict[str, float]:
    """Every descriptor of ``x``, by the names of :data:`DESCRIPTORS`: ``centroid_hz``
    (:func:`spectral_centroid`), ``pitch_hz`` (:func:`pitch_hz`), ``hnr_db``
    (:func:`hnr_db`), ``onset_rate`` (onsets per second, :func:`onset_rate`) and
    ``loudness_lufs`` (:func:`torchbend.audio.quality.loudness_lufs`). Undefined values
    (silence, no voiced frame) are NaN, or -inf for the loudness of silence."""
    return {**character(x, rate), "loudness_lufs": loudness_lufs(x, rate)}


def character(x: torch.Tensor, rate: int) -> dict[str, float]:
    """The descriptors of :func:`describe` but the loudness (what a bending may move while the
    level stays), in the same order."""
    return character_and_pitch(x, rate)[0]


def character_and_pitch(x: torch.Tensor, rate: int) -> tuple[dict[str, float], torch.Tensor]:
    """:func:`character` and :func:`pitch_track` of ``x``, from one run of YIN."""
    period, aperiodicity, voiced, active = _yin(x, rate, LOWEST_HZ, HIGHEST_HZ)
    values = {
        "centroid_hz": spectral_centroid(x, rate),
        "pitch_hz": _voiced_median(rate / period, voiced, active),
        "hnr_db": _median(_hnr(aperiodicity, active)),
        "onset_rate": onset_rate(x, rate),
    }
    return values, torch.where(voiced, rate / period, math.nan)
