"""Measures and flags of one render of a sweep: levels, spectrum shape, distance to the unbent
render, and whether the render is broken.

:func:`measure` takes a render of a bent model (``audio``) and the unbent model's render of the
same input (``unbent``), both ``[channels, time]`` (or ``[time]``), and gives two dicts whose
values are plain Python numbers, ready for JSON. The measures, in the order of
:data:`MEASURES`, on the mono mix (the mean of the channels) unless said otherwise:

- ``loudness_lufs``: integrated loudness in LUFS (BS.1770-style, see
  :func:`torchbend.audio.quality.loudness_lufs`).
- ``peak_dbfs``: the largest ``|x|`` over all channels, in dB re 1.0 (a sample at 1.0 reads 0).
  Over the channels and not on the mix: it is the peak a file of the render would hold (two
  channels in opposite phase mix to silence and still clip).
- ``rms_dbfs``: the RMS level in dB re a full-scale sine (a full-scale sine reads 0, a DC of
  1.0 reads +3; see :func:`torchbend.audio.quality.level_dbfs`).
- ``dc``: the mean of the signal (its offset), in full-scale units.
- ``centroid_hz``: the spectral centroid in Hz (the magnitude-weighted mean frequency).
- ``flatness``: the spectral flatness, geometric over arithmetic mean of the power spectrum,
  from 0 (a pure tone) to 1 (a flat spectrum; white noise reads about ``exp(-0.5772) =
  0.56``, 0.5772 being Euler's constant).
- ``bandwidth_hz``: the spread of the spectrum in Hz, the magnitude-weighted standard
  deviation of frequency around the centroid.
- ``distance``: the multi-resolution spectral distance from ``unbent`` to ``audio``, in
  nepers: the definition of :func:`torchbend.audio.quality.spectral_distance` (mean absolute
  difference of natural-log magnitudes over STFTs of :data:`DISTANCE_SIZES` samples, floored
  80 dB below the loudest bin of ``unbent``): 0 for a copy, about 0.69 (``ln 2``) for a gain of
  -6 dB on a sound whose spectrum stands above the floor everywhere (noise), less on a sparse
  one (a tone), whose bins under the floor read no difference. It is computed here, in
  float32 on both signals at once, rather than by calling that function, which works in
  float64 one signal at a time and takes more than twice as long (a sweep measures thousands
  of renders); the two agree to about 1e-6.

The three spectral shape measures are computed per frame of a centred STFT (Hann window of
:data:`FRAME` samples, hop :data:`HOP`: the largest STFT of ``distance``) and averaged over
the frames weighted by each frame's energy, so that silent frames do not count. Every value is
finite: non-finite samples are read as 0, levels are floored at :data:`FLOOR_DB` (silence
reads -120, never -inf) and the spectral shape of silence is 0.

The flags, in the order of :data:`FLAGS` (thresholds are the module constants below;
``benchmarks/calibrate_sweep_measures.py`` shows them on known degradations, docs/sweeps.md):

- ``nonfinite``: some sample of ``audio`` is NaN or infinite.
- ``silent``: ``rms_dbfs`` below :data:`SILENT_DBFS`.
- ``clipping``: more than :data:`CLIPPING_FRACTION` of the samples (over all channels) reach
  :data:`CLIP_LEVEL` in magnitude, where a fixed-point file would clip them.
- ``dc``: ``|dc|`` above :data:`DC_LIMIT`.
- ``unchanged``: ``audio`` equals ``unbent`` within :data:`UNCHANGED_TOLERANCE` on every
  sample (the bending did nothing audible).

The first four (:data:`BROKEN`) make a render broken; ``unchanged`` does not.
"""

from __future__ import annotations

import math

import torch

from ..audio.perceptual import spectral_shape
from ..audio.quality import level_dbfs, loudness_lufs
from ..errors import AudioError

__all__ = [
    "BROKEN",
    "CLIPPING_FRACTION",
    "CLIP_LEVEL",
    "DC_LIMIT",
    "DISTANCE_SIZES",
    "FLAGS",
    "FLOOR_DB",
    "FRAME",
    "HOP",
    "MEASURES",
    "SILENT_DBFS",
    "UNCHANGED_TOLERANCE",
    "measure",
]

MEASURES: tuple[str, ...] = (
    "loudness_lufs",
    "peak_dbfs",
    "rms_dbfs",
    "dc",
    "centroid_hz",
    "flatness",
    "bandwidth_hz",
    "distance",
)
"""The names of the measures :func:`measure` gives, in its order."""

FLAGS: tuple[str, ...] = ("nonfinite", "silent", "clipping", "dc", "unchanged")
"""The names of the flags :func:`measure` gives, in its order."""

BROKEN: tuple[str, ...] = ("nonfinite", "silent", "clipping", "dc")
"""The flags that make a render broken (``unchanged`` only says the bending did nothing)."""

FLOOR_DB = -120.0
"""The floor of every level, in dB: below the 16-bit noise floor (about -98 dBFS) and far below
anything audible, so that silence reads a finite number that sorts below every real sound."""

SILENT_DBFS = -60.0
"""``rms_dbfs`` below which a render is silent: 60 dB under a full-scale sine, where the shipped
sounds read -17 to -8 dB and a bending that kills the sound leaves at most a faint residue.
A quiet but real sound (a fade, a sound 40 dB down) stays above it."""

CLIP_LEVEL = 1.0
"""The magnitude at or above which a sample clips in a fixed-point file."""

CLIPPING_FRACTION = 1e-3
"""The share of samples at :data:`CLIP_LEVEL` or above beyond which a render clips: 0.1 %, 44
samples a second at 44.1 kHz. A few isolated overs (a transient just touching full scale) pass;
a render pushed into the rails (a +12 dB gain on the shipped sounds clips 3 to 40 % of them)
does not."""

DC_LIMIT = 0.05
"""``|dc|`` above which a render has an offset: 0.05 of full scale (-26 dB), far above what
music holds (the shipped sounds read 0.003 at most in magnitude) and enough to eat a twentieth of
the headroom and thump when the render starts or stops."""

UNCHANGED_TOLERANCE = 1e-6
"""Largest ``|audio - unbent|`` (over all samples) for a render to count as unchanged: -120
dB re 1.0. Above float32 rounding on a full-scale signal (6e-8 a step, a few steps after a
few operations), so that a bending that only reorders arithmetic counts as unchanged; a
thirtieth of a 16-bit step (3e-5), so that no render a 16-bit file tells apart from the
unbent one is called unchanged."""

FRAME = 2048
"""STFT frame (Hann window) of the spectral shape measures, in samples."""

HOP = FRAME // 4
"""STFT hop of the spectral shape measures, in samples (512)."""

DISTANCE_SIZES = (2048, 1024, 512, 256)
"""STFT sizes of ``distance`` (hop a quarter of each): those of
:func:`torchbend.audio.quality.spectral_distance`. The largest is :data:`FRAME`, whose STFT
the spectral shape measures share."""

_LARGEST = float(torch.finfo(torch.float32).max)
"""Samples are clamped to float32's range, within which every sum and square of the measures
stays finite in float64 (a float64 render beyond it would overflow them)."""


def _as_channels(x: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise AudioError(f"{name} must be a tensor [channels, time] or [time], got {type(x)}")
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise AudioError(f"{name} must be [channels, time] or [time], got shape {list(x.shape)}")
    if not x.is_floating_point():
        raise AudioError(f"{name} must hold real floating-point samples, got {x.dtype}")
    return x.detach().to("cpu", torch.float64)


def _db(value: float) -> float:
    """``20 log10(value)``, floored at :data:`FLOOR_DB`."""
    if not value > 10 ** (FLOOR_DB / 20):
        return FLOOR_DB
    return 20 * math.log10(value)


def _padded(x: torch.Tensor) -> torch.Tensor:
    """``x`` with zeros after it (along its last axis) up to one frame and a sample, so that a
    short render still makes frames (a centred STFT reflects half a frame at each end)."""
    if x.shape[-1] > FRAME:
        return x
    return torch.nn.functional.pad(x, (0, FRAME + 1 - x.shape[-1]))


def _magnitude(spectrum: torch.Tensor) -> torch.Tensor:
    """``spectrum.abs()``, about twice as fast (complex ``abs`` takes the careful ``hypot``
    path, not needed here: :func:`_spectra` keeps the FFT output far from overflow)."""
    parts = torch.view_as_real(spectrum)
    real, imag = parts[..., 0], parts[..., 1]
    return (real * real).addcmul_(imag, imag).sqrt_()


def _spectra(y: torch.Tensor, x: torch.Tensor) -> dict[int, torch.Tensor]:
    """Magnitude STFTs of ``x`` and ``y`` (stacked in that order, ``[2, bins, frames]``) at
    each size of :data:`DISTANCE_SIZES`: centred, Hann window, hop a quarter, float32.

    Signals louder than full scale are first divided by their peak (both by the same), so
    that squares of float32 bins cannot overflow, however loud a bending got. The measures
    taken from these spectra are ratios, which this leaves as they are (the distance's floor
    but for its 1e-12, which matters only for signals far quieter than full scale)."""
    both = torch.stack([x, y])
    peak = float(both.abs().max())
    if peak > 1.0:
        both = both / peak
    both = _padded(both).float()
    return {
        size: _magnitude(
            torch.stft(both, size, size // 4, window=torch.hann_window(size), return_complex=True)
        )
        for size in DISTANCE_SIZES
    }


def _distance(spectra: dict[int, torch.Tensor]) -> float:
    """:func:`torchbend.audio.quality.spectral_distance` of the spectra of :func:`_spectra`:
    mean absolute difference of log magnitudes with a floor 80 dB below the loudest bin of
    the reference, averaged over the sizes."""
    total = 0.0
    for magnitude in spectra.values():
        floor = float(magnitude[0].max()) * 1e-4 + 1e-12
        logs = (magnitude + floor).log_()
        total += float((logs[0] - logs[1]).abs().mean())
    return total / len(spectra)


def measure(
    audio: torch.Tensor, sample_rate: int, unbent: torch.Tensor
) -> tuple[dict[str, float], dict[str, bool]]:
    """Measure a render against the unbent render, and flag what is wrong with it.

    Args:
        audio (Tensor): the render of a bent model, ``[channels, time]`` or ``[time]``,
            full scale at 1.0.
        sample_rate (int): its sample rate, in Hz.
        unbent (Tensor): the unbent model's render of the same input, as long as ``audio``
            (its channels may differ: the distance compares the mono mixes).

    Returns:
        ``(measures, flags)``: ``measures`` maps each name of :data:`MEASURES` to a finite
        float, ``flags`` each name of :data:`FLAGS` to a bool (see the module docstring).

    Raises:
        TypeError: ``audio`` or ``unbent`` is not a tensor.
        ValueError: ``audio`` and ``unbent`` differ in length, are empty, are not 1-D or 2-D
            or hold no floating-point samples, or ``sample_rate`` is not a positive whole
            number.

    >>> from torchbend.audio.quality import sine
    >>> tone = sine(1000, 1.0, 44100, dbfs=-6.0)
    >>> values, flags = measure(tone, 44100, unbent=tone)
    >>> round(values["peak_dbfs"], 1), round(values["centroid_hz"]), values["distance"]
    (-6.0, 1016, 0.0)
    >>> [name for name, raised in flags.items() if raised]
    ['unchanged']
    """
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
        raise AudioError(f"sample_rate must be a positive whole number of Hz, got {sample_rate!r}")
    raw = _as_channels(audio, "audio")
    reference = _as_channels(unbent, "unbent")
    if raw.shape[-1] != reference.shape[-1]:
        raise AudioError(
            f"audio and unbent must have the same length (time, the last axis): audio has "
            f"shape {list(audio.shape)}, unbent {list(unbent.shape)}"
        )
    if raw.shape[-1] == 0:
        raise AudioError(f"audio is empty: shape {list(audio.shape)}")

    finite = torch.isfinite(raw)
    nonfinite = not bool(finite.all())
    clean = torch.where(finite, raw, 0.0).clamp(-_LARGEST, _LARGEST)
    reference = torch.nan_to_num(reference, nan=0.0, posinf=0.0, neginf=0.0)
    reference = reference.clamp(-_LARGEST, _LARGEST)
    mono = clean.mean(0)
    reference_mono = reference.mean(0)

    if nonfinite:
        unchanged = False
    elif raw.shape == reference.shape:
        unchanged = float((raw - reference).abs().max()) <= UNCHANGED_TOLERANCE
    else:
        unchanged = float((mono - reference_mono).abs().max()) <= UNCHANGED_TOLERANCE

    magnitude = clean.abs()
    loudness = loudness_lufs(mono, sample_rate)
    rms = level_dbfs(mono)
    offset = float(mono.mean())
    spectra = _spectra(mono, reference_mono)
    freqs = torch.fft.rfftfreq(FRAME, 1 / sample_rate, dtype=torch.float64)
    centroid, flatness, bandwidth = spectral_shape(spectra[FRAME][1], freqs)
    measures = {
        "loudness_lufs": max(loudness, FLOOR_DB) if math.isfinite(loudness) else FLOOR_DB,
        "peak_dbfs": _db(float(magnitude.max())),
        "rms_dbfs": max(rms, FLOOR_DB),
        "dc": offset,
        "centroid_hz": centroid,
        "flatness": flatness,
        "bandwidth_hz": bandwidth,
        "distance": _distance(spectra),
    }
    clipped = float((magnitude >= CLIP_LEVEL).double().mean())
    flags = {
        "nonfinite": nonfinite,
        "silent": measures["rms_dbfs"] < SILENT_DBFS,
        "clipping": clipped > CLIPPING_FRACTION,
        "dc": abs(offset) > DC_LIMIT,
        "unchanged": unchanged,
    }
    return measures, flags
