"""The named descriptors discovery measures: each one's value, its unit and the change a
listener hears, from the functions of descriptors.py, quality.py and onsets.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..errors import AudioError
from .descriptors import character
from .quality import loudness_lufs, spectral_distance

__all__ = [
    "NAMES",
    "PERCEPTIBLE",
    "PRIMARY",
    "Descriptor",
    "change",
    "check_descriptor",
    "descriptor_changes",
    "distance",
    "perceive",
    "shortest_sound",
    "spectral_shape",
]


@dataclass(frozen=True)
class Descriptor:
    """One perceptual descriptor: ``name``, what ``value`` reads (``unit``), how a change is
    measured (``kind``: ``"difference"`` of values, ``"ratio"`` in ``log`` of after / before,
    ``"semitones"``), the change a listener just hears (``step``, in the kind's terms: 1 LU,
    a centroid 15 % away...) and ``sign``: +1 when a larger value means more of the name
    (the noisiness reads the harmonic-to-noise ratio, which falls when the noise grows)."""

    name: str
    value: str
    unit: str
    kind: str
    step: float
    sign: float = 1.0
    bounds: tuple[float, float] = (-math.inf, math.inf)
    """Values are compared within these bounds: past them a listener hears no difference
    (a harmonic-to-noise ratio of 40 dB or 60 dB both sound clean)."""
    family: str = ""
    """The quality it measures (default: its name): the flatness measures the noisiness, the
    bandwidth the brightness, so a change of one is no collateral change of the other."""

    @property
    def quality(self) -> str:
        return self.family or self.name


PERCEPTIBLE: dict[str, Descriptor] = {
    d.name: d
    for d in (
        Descriptor("loudness", "loudness_lufs", "LUFS", "difference", 1.0),
        Descriptor("brightness", "centroid_hz", "Hz (spectral centroid)", "ratio", 0.15),
        Descriptor("pitch", "pitch_hz", "Hz (YIN, voiced frames)", "semitones", 1.0),
        Descriptor(
            "noisiness", "hnr_db", "dB (harmonic-to-noise ratio)", "difference", 3.0, -1, (-10, 30)
        ),
        Descriptor(
            "flatness",
            "flatness",
            "0 (a tone) to 1 (flat)",
            "ratio",
            0.41,
            1,
            (1e-3, 1),
            "noisiness",
        ),
        Descriptor(
            "bandwidth", "bandwidth_hz", "Hz (spectral spread)", "ratio", 0.15, family="brightness"
        ),
        Descriptor(
            "onset_rate", "onset_rate", "onsets per second", "ratio", 0.20, 1, (0.5, math.inf)
        ),
    )
}
"""The descriptors by name. Steps: loudness 1 LU, brightness and bandwidth 15 %, pitch a
semitone, noisiness 3 dB of harmonic-to-noise ratio, flatness 3 dB (x1.41), onset rate 20 %:
the thresholds of the richness sweep (``torchbend.sweep.richness.THRESHOLDS``). A
harmonic-to-noise ratio is compared between -10 and 30 dB, a flatness above 0.001 (30 dB
under white noise's), an onset rate above one every two seconds: beyond, the values differ in
ways nobody hears (and no onset at all is no rate to take a ratio of)."""

NAMES: tuple[str, ...] = tuple(PERCEPTIBLE)
"""The names :func:`perceive` gives, in its order."""

PRIMARY: tuple[str, ...] = ("loudness", "brightness", "pitch", "noisiness")
"""The qualities a collateral change is counted on. The flatness, the bandwidth and the onset
rate are measured and reported but not counted: in a harmonic sound the flatness and the
bandwidth follow the brightness (a brighter spectrum is flatter and wider), and an onset rate
read on a short sound moves by a whole onset per excerpt."""

SHORTEST_SECONDS = 0.1
"""The shortest sound the descriptors read: a few frames of YIN (2048 samples) and of the
loudness's 400 ms blocks are needed for a value that means something."""

_TINY = 1e-30


def check_descriptor(name: str) -> Descriptor:
    """The descriptor called ``name``; a clear error naming the known ones if none is."""
    if name not in PERCEPTIBLE:
        raise AudioError(f"unknown descriptor {name!r}: choose one of {', '.join(NAMES)}")
    return PERCEPTIBLE[name]


def shortest_sound(rate: int) -> int:
    """The fewest samples :func:`perceive` reads at ``rate``."""
    return max(2048, math.ceil(SHORTEST_SECONDS * rate))


def spectral_shape(magnitude: torch.Tensor, freqs: torch.Tensor) -> tuple[float, float, float]:
    """Centroid (Hz), flatness and bandwidth (Hz) of a magnitude STFT ``[bins, frames]`` whose
    bins sit at ``freqs``, each per frame then averaged over the frames weighted by their
    energy (silent frames do not count; silence reads 0, 0, 0).

    The centroid is the magnitude-weighted mean frequency, the bandwidth the
    magnitude-weighted standard deviation around it, the flatness the geometric over the
    arithmetic mean of the power (0 for a pure tone, about 0.56 for white noise)."""
    magnitude = magnitude.double()
    power = magnitude.square()
    energy = power.sum(0)
    total = float(energy.sum())
    if not total > 0:
        return 0.0, 0.0, 0.0
    weights = energy / total
    freqs = freqs.double().unsqueeze(1)
    mass = magnitude.sum(0).clamp(min=_TINY)
    centroid = (freqs * magnitude).sum(0) / mass
    spread = ((freqs - centroid).square() * magnitude).sum(0) / mass
    geometric = power.clamp(min=_TINY).log().mean(0).exp()
    flatness = geometric / power.mean(0).clamp(min=_TINY)
    return (
        float((weights * centroid).sum()),
        float((weights * flatness.clamp(max=1.0)).sum()),
        float((weights * spread.sqrt()).sum()),
    )


def perceive(x: torch.Tensor, rate: int) -> dict[str, float]:
    """Every descriptor of the mono signal ``x``, by the names of :data:`NAMES`, in their
    units (:data:`PERCEPTIBLE`): loudness in LUFS, the spectral centroid (as the brightness),
    the pitch (NaN when no frame is voiced), the harmonic-to-noise ratio (as the noisiness),
    flatness, bandwidth and onset rate. Silence reads NaN for what it has not (a centroid, a
    pitch) and -inf LUFS.

    >>> t = torch.arange(22050, dtype=torch.float64) / 44100
    >>> values = perceive(0.1 * torch.sin(2 * math.pi * 440 * t), 44100)
    >>> round(values["pitch"]), round(values["brightness"]), values["onset_rate"]
    (440, 440, 0.0)
    """
    y = x.detach().reshape(-1)
    if y.numel() < shortest_sound(rate):
        raise AudioError(
            f"a sound of {y.numel()} samples is too short to describe: the descriptors need "
            f"at least {shortest_sound(rate)} samples ({SHORTEST_SECONDS} s and a YIN frame) "
            f"at {rate} Hz"
        )
    values = character(y, rate)
    window = torch.hann_window(2048, dtype=torch.float64)
    spectrum = torch.stft(y.double(), 2048, 512, window=window, return_complex=True).abs()
    freqs = torch.fft.rfftfreq(2048, 1 / rate, dtype=torch.float64)
    _, flatness, bandwidth = spectral_shape(spectrum, freqs)
    silent = not bool(spectrum.any())
    return {
        "loudness": loudness_lufs(y, rate),
        "brightness": values["centroid_hz"],
        "pitch": values["pitch_hz"],
        "noisiness": values["hnr_db"],
        "flatness": math.nan if silent else flatness,
        "bandwidth": math.nan if silent else bandwidth,
        "onset_rate": values["onset_rate"],
    }


def change(name: str, before: float, after: float) -> float:
    """The signed change of descriptor ``name`` from value ``before`` to value ``after`` (in
    its unit, as :func:`perceive` gives them), in perceptible steps: +1 is one step more of
    the name (louder, brighter, a semitone higher, noisier...). NaN where either value is
    undefined, 0 where both are the same (an onset rate of 0 that stays 0)."""
    d = PERCEPTIBLE[name]
    low, high = d.bounds
    a, b = min(max(before, low), high), min(max(after, low), high)
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.nan
    if d.kind == "difference":
        return d.sign * (b - a) / d.step
    if d.kind == "semitones":
        return 12 * math.log2(max(b, 1e-9) / max(a, 1e-9)) / d.step
    return d.sign * math.log(max(b, 1e-12) / max(a, 1e-12)) / math.log(1 + d.step)


def distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """How far render ``b`` is from render ``a``, whatever changed: the multi-resolution
    spectral distance of :func:`torchbend.audio.quality.spectral_distance` (mean absolute
    difference of log magnitudes, in nepers: 0 for a copy, about 0.69 for -6 dB on noise),
    the one the sweeps' ``distance`` measure computes too."""
    return spectral_distance(b, a)


def descriptor_changes(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """:func:`change` of every descriptor from ``before`` to ``after`` (dicts of
    :func:`perceive`)."""
    return {name: change(name, before[name], after[name]) for name in NAMES}
