"""The studio's sounds: the shipped ones, the files named on the command line, uploads (checked
for type, size and length), and the pictures the page draws of them (waveform, spectrogram)."""

from __future__ import annotations

import base64
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import AudioError, StudioError, did_you_mean

__all__ = ["TYPES", "Limits", "Sound", "SoundLibrary", "spectrogram", "waveform"]

TYPES = (".wav", ".flac", ".ogg")
"""The audio files the studio reads (those :func:`torchbend.audio.load` reads)."""


@dataclass(frozen=True)
class Limits:
    """What an upload may be."""

    bytes: int = 50 * 1024 * 1024
    """Largest file, in bytes."""
    seconds: float = 120.0
    """Longest sound, in seconds."""

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "seconds": self.seconds, "types": list(TYPES)}


@dataclass
class Sound:
    """A sound the studio can render: mono, at the model's sample rate."""

    id: str
    name: str
    source: str
    """``"shipped"``, ``"argument"`` (named on the command line) or ``"upload"``."""
    audio: torch.Tensor
    """``[1, time]`` float32."""
    sample_rate: int
    channels: int
    """Channels of the file (the studio renders their mono mix)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "source": self.source,
            "seconds": round(self.audio.shape[-1] / self.sample_rate, 3),
            "sample_rate": self.sample_rate,
            "channels": self.channels,
        }


class SoundLibrary:
    """The sounds of one studio, by id.

    Uploads are written to ``uploads`` under a name the library makes (never the client's),
    after their size and extension are checked and before they are decoded; a file that does
    not decode, or is empty or too long, is deleted again.
    """

    def __init__(self, sample_rate: int, uploads: Path, limits: Limits | None = None) -> None:
        self.sample_rate = sample_rate
        self.uploads = uploads
        self.limits = limits or Limits()
        self.sounds: dict[str, Sound] = {}

    def add_file(self, path: Path, source: str) -> Sound:
        """Read the audio file at ``path`` (a shipped sound, or a file the user named: no
        limit on its length)."""
        audio, channels = self._read(path, path.name, limited=False)
        sound_id = self._new_id(path.stem)
        self.sounds[sound_id] = Sound(
            sound_id, path.name, source, audio, self.sample_rate, channels
        )
        return self.sounds[sound_id]

    def upload(self, name: str, data: bytes) -> Sound:
        """Check and keep an uploaded file called ``name`` (the client's name, used only for
        its extension and as a label)."""
        if any(unicodedata.category(c) == "Cc" for c in name):
            raise StudioError(
                f"a file's name holds no control characters (NUL, newline, ...), got {name!r}; "
                "rename the file"
            )
        label = Path(name).name.strip()
        suffix = Path(label).suffix.lower()
        if not label or suffix not in TYPES:
            raise StudioError(f"uploads are audio files ending in {', '.join(TYPES)}, got {name!r}")
        if len(data) > self.limits.bytes:
            raise StudioError(
                f"{label} is {len(data)} bytes; uploads are at most {self.limits.bytes} bytes",
                413,
            )
        if not data:
            raise StudioError(f"{label} is empty; upload an audio file")
        self.uploads.mkdir(parents=True, exist_ok=True)
        sound_id = self._new_id(Path(label).stem)
        path = self.uploads / f"{sound_id}{suffix}"
        path.write_bytes(data)
        try:
            audio, channels = self._read(path, label, limited=True)
        except StudioError:
            path.unlink(missing_ok=True)
            raise
        self.sounds[sound_id] = Sound(sound_id, label, "upload", audio, self.sample_rate, channels)
        return self.sounds[sound_id]

    def get(self, sound_id: str) -> Sound:
        sound = self.sounds.get(sound_id)
        if sound is None:
            raise StudioError(
                f"no sound {sound_id!r}{did_you_mean(sound_id, self.sounds)}; the sounds are "
                f"{sorted(self.sounds)}",
                404,
            )
        return sound

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.sounds.values()]

    def _read(self, path: Path, label: str, limited: bool) -> tuple[torch.Tensor, int]:
        import soundfile

        try:
            info = soundfile.info(str(path))
        except Exception as e:  # soundfile raises its own error types, or RuntimeError
            raise StudioError(f"{label} is not an audio file the studio reads ({e})") from None
        seconds = info.frames / info.samplerate if info.samplerate else 0.0
        if info.frames <= 0:
            raise StudioError(f"{label} holds no samples; give a sound at least one sample long")
        if limited and seconds > self.limits.seconds:
            raise StudioError(
                f"{label} lasts {seconds:.1f} s; sounds are at most {self.limits.seconds:g} s "
                "long (cut it, or start the studio with a larger --max-seconds)"
            )
        from ..audio import load

        try:
            audio, _ = load(path, sample_rate=self.sample_rate, mono=True)
        except AudioError as e:
            raise StudioError(f"{label}: {e}") from None
        return audio, info.channels

    def _new_id(self, stem: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-")[:40] or "sound"
        sound_id, n = base, 2
        # never an id of this session, nor a file an earlier session uploaded
        while sound_id in self.sounds or any(
            (self.uploads / f"{sound_id}{t}").exists() for t in TYPES
        ):
            sound_id, n = f"{base}-{n}", n + 1
        return sound_id


def waveform(audio: torch.Tensor, columns: int = 400) -> dict[str, list[float]]:
    """The min and max of ``audio`` (``[channels, time]``, mixed to mono) over ``columns``
    equal spans of time: what the page draws as a waveform."""
    x = torch.nan_to_num(audio.float().mean(0), nan=0.0, posinf=1.0, neginf=-1.0)
    columns = max(1, min(columns, x.shape[-1]))
    span = math.ceil(x.shape[-1] / columns)
    x = torch.nn.functional.pad(x, (0, span * columns - x.shape[-1]))
    spans = x.reshape(columns, span)
    return {
        "min": [round(v, 4) for v in spans.min(1).values.tolist()],
        "max": [round(v, 4) for v in spans.max(1).values.tolist()],
    }


def spectrogram(
    audio: torch.Tensor, sample_rate: int, rows: int = 96, columns: int = 256
) -> dict[str, Any]:
    """A picture of ``audio``'s spectrum over time: ``rows`` bands spaced evenly in log
    frequency from 30 Hz to Nyquist (row 0 the lowest), ``columns`` spans of time, levels from
    -90 to 0 dB full scale as bytes 0 to 255, base64-coded. The same scale for every sound, so
    that renders compare side by side."""
    x = torch.nan_to_num(audio.float().mean(0), nan=0.0, posinf=0.0, neginf=0.0)
    n_fft = 1024
    x = torch.nn.functional.pad(x, (0, max(0, n_fft - x.shape[-1])))
    hop = max(64, x.shape[-1] // columns)
    window = torch.hann_window(n_fft)
    spec = torch.stft(x, n_fft, hop, window=window, return_complex=True).abs()
    power = spec / (window.sum() / 2)  # a full-scale sine reads 1.0
    freqs = torch.linspace(0, sample_rate / 2, power.shape[0])
    edges = torch.logspace(math.log10(30.0), math.log10(sample_rate / 2), rows + 1)
    bands = []
    for i in range(rows):
        inside = (freqs >= edges[i]) & (freqs < edges[i + 1])
        if not bool(inside.any()):  # a band narrower than a bin reads the nearest bin
            inside = torch.zeros_like(inside)
            inside[int(torch.argmin((freqs - edges[i]).abs()))] = True
        bands.append(power[inside].max(0).values)
    grid = torch.stack(bands)  # [rows, frames]
    grid = torch.nn.functional.adaptive_max_pool1d(grid[None], min(columns, grid.shape[-1]))[0]
    db = 20 * torch.log10(grid.clamp_min(1e-9))
    levels = ((db + 90.0) / 90.0 * 255.0).clamp(0, 255).round().to(torch.uint8)
    return {
        "rows": levels.shape[0],
        "cols": levels.shape[1],
        "low_db": -90.0,
        "high_db": 0.0,
        "data": base64.b64encode(levels.contiguous().numpy().tobytes()).decode("ascii"),
    }
