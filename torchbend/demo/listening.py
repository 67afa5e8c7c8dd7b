"""What the demo's renders sound like, measured: loudness, spectral centroid, pitch and
harmonic-to-noise ratio, as changes from the unbent render, whole or over time."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from tabulate import tabulate

from ..audio.descriptors import frame_tracks
from ..audio.quality import loudness_lufs, spectral_distance

__all__ = ["Heard", "bending_table", "changes", "hear", "walk_table"]

_RANGE_DB = 30.0
"""Frames that count: within this many dB of the loudest one."""
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
    """``[4, frames]``: pitch (Hz, NaN where unvoiced), level (dB), spectral centroid (Hz)
    and harmonic-to-noise ratio (dB) of each frame
    (:func:`~torchbend.audio.descriptors.frame_tracks`)."""

    def counted(self) -> torch.Tensor:
        """Which frames count: those not silent and within 30 dB of the loudest."""
        level = self.frames[1]
        return ~self.frames[2].isnan() & (level > float(level.max()) - _RANGE_DB)

    def voiced(self) -> torch.Tensor:
        """Which frames that count have a pitch."""
        return self.counted() & ~self.frames[0].isnan()


def changes(bent: Heard, unbent: Heard, where: torch.Tensor | None = None) -> list[float | None]:
    """How ``bent`` differs from ``unbent``, frame by frame (the median of the differences over
    the frames that count in both, within ``where`` if given): pitch in semitones (frames
    voiced in both; ``None`` where too few are), level in dB, centroid in octaves,
    harmonic-to-noise ratio in dB. Paired frames, not a median of each render: a pitch
    measure that jumps an octave on some frames of one render does not decide the change."""
    both = bent.counted() & unbent.counted()
    voiced = bent.voiced() & unbent.voiced()
    if where is not None:
        both, voiced = both & where, voiced & where
    ratios = (bent.frames[[0, 2]] / unbent.frames[[0, 2]]).log2()
    change = torch.stack(
        [
            12 * ratios[0],
            bent.frames[1] - unbent.frames[1],
            ratios[1],
            bent.frames[3] - unbent.frames[3],
        ]
    )
    out: list[float | None] = []
    for row, frames in enumerate((voiced, both, both, both)):
        enough = (
            int(frames.sum()) >= max(1, _PITCHED * int(both.sum()))
            if row == 0
            else bool(frames.any())
        )
        out.append(float(change[row][frames].median()) if enough else None)
    return out


def hear(audio: torch.Tensor, rate: int) -> Heard:
    """Measure ``audio`` (mono, ``[1, time]`` or ``[time]``) at ``rate`` Hz."""
    return Heard(loudness_lufs(audio, rate), frame_tracks(audio.detach(), rate))


def _median(values: Sequence[float | None]) -> float | None:
    """The median of the known values (of an even count, the mean of the middle two): a
    sound the measure misreads does not decide the row."""
    known = sorted(v for v in values if v is not None and math.isfinite(v))
    if not known:
        return None
    middle = len(known) // 2
    return known[middle] if len(known) % 2 else (known[middle - 1] + known[middle]) / 2


def _fmt(value: float | None, form: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, form)


def bending_table(
    heard: Mapping[str, Mapping[str, Heard]],
    renders: Mapping[str, Mapping[str, torch.Tensor]],
    bendings: Sequence[str],
    rate: int,
) -> str:
    """Per bending, the median over the sounds of how it moves each measure from the unbent
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
        moved = [changes(by[label], by["reconstruction"]) for by in heard.values()]
        loudness = [by[label].lufs - by["reconstruction"].lufs for by in heard.values()]
        apart = [distance(sound, label, "reconstruction") for sound in heard]
        nearest = [
            min((distance(sound, label, o) for o in bendings if o != label), default=math.nan)
            for sound in heard
        ]
        octaves = _median([m[2] for m in moved])
        rows.append(
            [
                label,
                _fmt(_median(loudness), "+.1f"),
                _fmt(None if octaves is None else 100 * (2**octaves - 1), "+.0f"),
                _fmt(_median([m[0] for m in moved]), "+.1f"),
                _fmt(_median([m[3] for m in moved]), "+.1f"),
                _fmt(_median(apart), ".2f"),
                _fmt(_median(nearest), ".2f"),
            ]
        )
    headers = [
        "bending",
        "loudness (LU)",
        "centroid (%)",
        "pitch (st)",
        "HNR (dB)",
        "distance",
        "to nearest",
    ]
    return str(tabulate(rows, headers=headers, disable_numparse=True, stralign="right"))


def _trend(walk: Heard, unbent: Heard) -> list[float | None]:
    """How the walk moves each measure from the unbent render, from the first fifth of the
    file to the last: pitch in semitones, level in dB, centroid in percent, harmonic-to-noise
    ratio in dB."""
    frames = walk.frames.shape[-1]
    early = torch.arange(frames) < frames // 5
    late = torch.arange(frames) >= frames - frames // 5
    first, last = changes(walk, unbent, early), changes(walk, unbent, late)
    moved = [None if a is None or b is None else b - a for a, b in zip(first, last)]
    if moved[2] is not None:
        moved[2] = 100 * (2 ** moved[2] - 1)
    return moved


def walk_table(heard: Mapping[str, Mapping[str, Heard]], walks: Sequence[str]) -> str:
    """Per walk, the median over the sounds of how each measure moves from the start of the file
    to its end, against the unbent render."""
    rows = []
    for label in walks:
        trends = [_trend(by[label], by["reconstruction"]) for by in heard.values()]
        columns = [_median([t[i] for t in trends]) for i in range(4)]
        forms = ["+.1f", "+.1f", "+.0f", "+.1f"]
        rows.append([label, *(_fmt(v, f) for v, f in zip(columns, forms))])
    headers = ["walk", "pitch (st)", "loudness (dB)", "centroid (%)", "HNR (dB)"]
    return str(tabulate(rows, headers=headers, disable_numparse=True, stralign="right"))
