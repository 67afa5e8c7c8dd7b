"""What the demo's renders sound like, measured: loudness, spectral centroid, pitch and
noisiness, as changes from the unbent render, whole or over time."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from tabulate import tabulate

from ..audio.quality import loudness_lufs, spectral_distance
from ..models import FrameAnalysis

__all__ = ["Heard", "bending_table", "hear", "walk_table"]

_HOP = 512
"""Samples per analysis frame."""
_RANGE = 1.5
"""Frames that count: within 30 dB (1.5 in log10 RMS) of the loudest one."""
_VOICED = 0.4
"""A frame has a pitch when its noisiness (0 periodic, 1 noise) is below this."""
_SIZES = (2048, 512)
"""STFT sizes of the spectral distances (two of the four of the quality measure's default:
the table compares every pair of renders)."""
_PITCHED = 0.2
"""A render has a pitch when at least this share of its frames that count are voiced."""


@dataclass(frozen=True)
class Heard:
    """One render, measured."""

    lufs: float
    """Integrated loudness (:func:`~torchbend.audio.quality.loudness_lufs`)."""
    frames: torch.Tensor
    """``[4, frames]``: pitch (octaves re 440 Hz), loudness (log10 RMS), brightness (spectral
    centroid in octaves re 1 kHz) and noisiness (0 to 1) of each frame (YIN pitch and all, by
    the analysis of :class:`~torchbend.models.FrameAnalysis`)."""

    def counted(self) -> torch.Tensor:
        """Which frames count: those within 30 dB of the loudest."""
        loudness = self.frames[1]
        return loudness > float(loudness.max()) - _RANGE

    def voiced(self) -> torch.Tensor:
        return self.counted() & (self.frames[3] < _VOICED)

    def brightness(self) -> float:
        """Median centroid of the frames that count, in octaves re 1 kHz."""
        return float(self.frames[2][self.counted()].median())

    def pitch(self) -> float | None:
        """Median pitch of the voiced frames, in octaves re 440 Hz; ``None`` for a render with
        too few of them (a drum loop)."""
        voiced = self.voiced()
        if int(voiced.sum()) < _PITCHED * int(self.counted().sum()) or not bool(voiced.any()):
            return None
        return float(self.frames[0][voiced].median())

    def noisiness(self) -> float:
        return float(self.frames[3][self.counted()].median())


def hear(audio: torch.Tensor, rate: int) -> Heard:
    """Measure ``audio`` (mono, ``[1, time]`` or ``[time]``) at ``rate`` Hz."""
    x = audio.detach().reshape(1, 1, -1).float()
    x = torch.nn.functional.pad(x, (0, -x.shape[-1] % _HOP))
    with torch.inference_mode():
        frames = FrameAnalysis(_HOP, 2048, rate)(x)[0, :4]
    return Heard(loudness_lufs(audio, rate), frames)


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _fmt(value: float | None, form: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, form)


def bending_table(
    heard: Mapping[str, Mapping[str, Heard]],
    renders: Mapping[str, Mapping[str, torch.Tensor]],
    bendings: Sequence[str],
    rate: int,
) -> str:
    """Per bending, the mean over the sounds of how it moves each measure from the unbent
    render (``"reconstruction"``), its spectral distance to it, and to the nearest other
    bending (:func:`~torchbend.audio.quality.spectral_distance`)."""
    known: dict[tuple[str, str, str], float] = {}

    def distance(sound: str, a: str, b: str) -> float:
        key = (sound, min(a, b), max(a, b))
        if key not in known:
            known[key] = spectral_distance(renders[sound][a], renders[sound][b], _SIZES)
        return known[key]

    rows = []
    for label in bendings:
        loudness, centroid, pitch, noise, apart, nearest = [], [], [], [], [], []
        for sound, by in heard.items():
            a, b = by["reconstruction"], by[label]
            loudness.append(b.lufs - a.lufs)
            centroid.append(b.brightness() - a.brightness())
            pa, pb = a.pitch(), b.pitch()
            pitch.append(None if pa is None or pb is None else 12 * (pb - pa))
            noise.append(b.noisiness() - a.noisiness())
            apart.append(distance(sound, label, "reconstruction"))
            others = [distance(sound, label, o) for o in bendings if o != label]
            nearest.append(min(others, default=math.nan))
        octaves = _mean(centroid)
        rows.append(
            [
                label,
                _fmt(_mean(loudness), "+.1f"),
                _fmt(None if octaves is None else 100 * (2**octaves - 1), "+.0f"),
                _fmt(_mean(pitch), "+.1f"),
                _fmt(_mean(noise), "+.2f"),
                _fmt(_mean(apart), ".2f"),
                _fmt(_mean(nearest), ".2f"),
            ]
        )
    headers = [
        "bending",
        "loudness (LU)",
        "centroid (%)",
        "pitch (st)",
        "noisiness",
        "distance",
        "to nearest",
    ]
    return str(tabulate(rows, headers=headers, disable_numparse=True, stralign="right"))


def _trend(walk: Heard, reference: Heard) -> list[float | None]:
    """How the walk moves each measure from the reference, from the first fifth of the file
    to the last: pitch in semitones, loudness in dB, centroid in percent, noisiness."""
    both = walk.counted() & reference.counted()
    frames = both.numel()
    early = torch.zeros_like(both)
    early[: frames // 5] = True
    late = torch.zeros_like(both)
    late[frames - frames // 5 :] = True
    change = walk.frames - reference.frames

    def moved(row: int, where: torch.Tensor) -> float | None:
        first, last = where & early, where & late
        if not bool(first.any()) or not bool(last.any()):
            return None
        return float(change[row][last].median() - change[row][first].median())

    voiced = walk.voiced() & reference.voiced()
    pitch, loudness = moved(0, voiced), moved(1, both)
    bright, noise = moved(2, both), moved(3, both)
    return [
        None if pitch is None else 12 * pitch,
        None if loudness is None else 20 * loudness,
        None if bright is None else 100 * (2**bright - 1),
        noise,
    ]


def walk_table(heard: Mapping[str, Mapping[str, Heard]], walks: Sequence[str]) -> str:
    """Per walk, the mean over the sounds of how each measure moves from the start of the file
    to its end, against the unbent render."""
    rows = []
    for label in walks:
        trends = [_trend(by[label], by["reconstruction"]) for by in heard.values()]
        columns = [_mean([t[i] for t in trends]) for i in range(4)]
        forms = ["+.1f", "+.1f", "+.0f", "+.2f"]
        rows.append([label, *(_fmt(v, f) for v, f in zip(columns, forms))])
    headers = ["walk", "pitch (st)", "loudness (dB)", "centroid (%)", "noisiness"]
    return str(tabulate(rows, headers=headers, disable_numparse=True, stralign="right"))
