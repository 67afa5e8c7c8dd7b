"""Audio files in and out: load and save WAV, FLAC and OGG as float32 tensors, resampling."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import AudioError

__all__ = ["FORMATS", "MAX_SAMPLE_RATE", "MIN_SAMPLE_RATE", "downmix", "load", "resample", "save"]

FORMATS = {".wav": "WAV", ".flac": "FLAC", ".ogg": "OGG"}
"""The file extensions :func:`load` and :func:`save` take, and their soundfile formats."""

MIN_SAMPLE_RATE = 1000
"""The lowest sample rate torchbend.audio takes, in Hz: below it, a file is damaged or not audio."""
MAX_SAMPLE_RATE = 768000
"""The highest sample rate torchbend.audio takes, in Hz (that of the fastest converters)."""

CANCELLATION_DB = 6.0
"""A downmix this much quieter than its channels (RMS) warns: the channels cancel out. Channels
that do not correlate lose 3 dB, identical ones none, a channel and its inverse everything."""

_SUBTYPES = {"WAV": "PCM_16", "FLAC": "PCM_16", "OGG": "VORBIS"}
_FLOAT_SUBTYPES = {"FLOAT", "DOUBLE"}
"""Subtypes that store samples beyond ``[-1, 1]``; the others clip them."""


def _soundfile() -> Any:
    try:
        import soundfile
    except ImportError as e:
        raise ImportError(
            "torchbend.audio needs soundfile and soxr: pip install 'torchbend[audio]'"
        ) from e
    return soundfile


def _check_rate(sample_rate: Any, what: str) -> int:
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)):
        raise AudioError(f"{what} must be a positive number of Hz, got {sample_rate!r}")
    if not math.isfinite(sample_rate) or sample_rate <= 0 or sample_rate != int(sample_rate):
        raise AudioError(f"{what} must be a positive whole number of Hz, got {sample_rate}")
    if not MIN_SAMPLE_RATE <= sample_rate <= MAX_SAMPLE_RATE:
        raise AudioError(
            f"{what} must be from {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz, got {int(sample_rate)}"
        )
    return int(sample_rate)


def _format_of(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise AudioError(
            f"cannot handle {str(path)!r}: unsupported extension {path.suffix!r}; "
            f"the supported formats are {', '.join(FORMATS.values())} "
            f"({', '.join(FORMATS)})"
        )
    return fmt


def resample(audio: torch.Tensor, sample_rate: int, new_sample_rate: int) -> torch.Tensor:
    """Resample audio with soxr (high quality), on the CPU, keeping dtype and device.

    Args:
        audio (Tensor): audio, ``[channels, time]``.
        sample_rate (int): its sample rate, in Hz.
        new_sample_rate (int): the sample rate wanted, in Hz.

    Shape:
        - Input: ``[channels, time]``
        - Output: ``[channels, round(time * new_sample_rate / sample_rate)]``

    >>> resample(torch.zeros(2, 44100), 44100, 22050).shape
    torch.Size([2, 22050])
    """
    sample_rate = _check_rate(sample_rate, "sample_rate")
    new_sample_rate = _check_rate(new_sample_rate, "new_sample_rate")
    if audio.dim() != 2:
        raise AudioError(f"resample takes audio [channels, time], got shape {list(audio.shape)}")
    if sample_rate == new_sample_rate:
        return audio
    import soxr

    data = audio.detach().to("cpu", torch.float32).T.contiguous().numpy()
    out = soxr.resample(data, sample_rate, new_sample_rate)
    return torch.from_numpy(np.ascontiguousarray(out.T)).to(audio.device, audio.dtype)


def load(
    path: str | Path, sample_rate: int | None = None, mono: bool = False
) -> tuple[torch.Tensor, int]:
    """Read an audio file (WAV, FLAC or OGG) into a float32 tensor in ``[-1, 1]``.

    Args:
        path (str | Path): the file.
        sample_rate (int | None): resample to this rate, in Hz (with soxr); ``None`` keeps
            the file's rate.
        mono (bool): average the channels into one (with :func:`downmix`, which warns if
            they cancel out).

    Returns:
        ``(audio, sample_rate)``: audio ``[channels, time]`` float32 and its rate in Hz.

    Raises:
        AudioError: the file is missing, unreadable, of an unsupported format, or empty, or
            its sample rate is not from :data:`MIN_SAMPLE_RATE` to :data:`MAX_SAMPLE_RATE`;
            or ``sample_rate`` is not.

    A WAV file whose header promises more samples than it holds (a copy cut short) loads what
    it holds, with a warning.

    >>> import tempfile, os
    >>> path = save(os.path.join(tempfile.mkdtemp(), "a.flac"), torch.zeros(2, 441), 44100)
    >>> audio, sr = load(path, sample_rate=16000, mono=True)
    >>> audio.shape, audio.dtype, sr
    (torch.Size([1, 160]), torch.float32, 16000)
    """
    path = Path(path)
    if sample_rate is not None:
        sample_rate = _check_rate(sample_rate, "sample_rate")
    if not path.is_file():
        raise AudioError(f"audio file {str(path)!r} not found")
    _format_of(path)
    sf = _soundfile()
    try:
        data, file_rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, TypeError, ValueError) as e:  # LibsndfileError is a RuntimeError
        raise AudioError(
            f"cannot read audio file {str(path)!r} ({e}); the supported formats are "
            f"{', '.join(FORMATS.values())}"
        ) from e
    if data.shape[0] == 0:
        raise AudioError(f"audio file {str(path)!r} is empty (no samples)")
    if not MIN_SAMPLE_RATE <= file_rate <= MAX_SAMPLE_RATE:
        raise AudioError(
            f"audio file {str(path)!r} says its sample rate is {file_rate} Hz; torchbend takes "
            f"{MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz (a damaged header, or not audio?)"
        )
    declared = _declared_frames(path)
    if declared is not None and declared > data.shape[0]:
        warnings.warn(
            f"load: {path.name} is cut short: its header says {declared / file_rate:.2f} s "
            f"({declared} frames), the file holds {data.shape[0] / file_rate:.2f} s "
            f"({data.shape[0]}); going on with what is there (copy or export it again for "
            "the rest)",
            stacklevel=2,
        )
    audio = torch.from_numpy(np.ascontiguousarray(data.T))
    if mono:
        audio = _downmix(audio, path.name)
    if sample_rate is not None and sample_rate != file_rate:
        audio = resample(audio, file_rate, sample_rate)
        file_rate = sample_rate
    return audio, int(file_rate)


def downmix(audio: torch.Tensor, what: str = "the audio") -> torch.Tensor:
    """The channels of ``[channels, time]`` audio averaged into one, ``[1, time]``; with a
    warning, naming ``what`` and the loss, when the mix is :data:`CANCELLATION_DB` or more
    quieter than the channels (RMS): they cancel out, as a channel and its inverse do.

    >>> x = torch.randn(1, 1000)
    >>> downmix(torch.cat([x, 0.5 * x])).shape
    torch.Size([1, 1000])
    """
    return _downmix(audio, what)


def _downmix(audio: torch.Tensor, what: str) -> torch.Tensor:
    """:func:`downmix`, warning the caller of the public function that called it."""
    mix = audio.mean(0, keepdim=True)
    if audio.shape[0] < 2:
        return mix
    channels = float(audio.double().square().mean())
    mixed = float(mix.double().square().mean())
    if channels > 0.0 and mixed < channels * 10 ** (-CANCELLATION_DB / 10):
        rms, mixed_rms = math.sqrt(channels), math.sqrt(mixed)
        loss = "all of it" if mixed == 0.0 else f"{10 * math.log10(channels / mixed):.1f} dB"
        warnings.warn(
            f"mixing the {audio.shape[0]} channels of {what} to mono loses {loss} (RMS "
            f"{_dbfs(rms)} to {_dbfs(mixed_rms)}): they cancel out (one is the other inverted?). "
            "Keep them (load(..., mono=False); `torchbend bend --channels all`) or take one "
            "(audio[:1]; `--channels 0`)",
            stacklevel=3,
        )
    return mix


def _dbfs(level: float) -> str:
    return f"{20 * math.log10(level):.1f} dBFS" if level > 0 else "silence"


def _declared_frames(path: Path) -> int | None:
    """The frames a WAV file's header says its data holds (``None``: not a RIFF WAV, or one
    that leaves the length open, as a recorder streaming it does). libsndfile reads what the
    file holds and says nothing when the header promised more."""
    try:
        with path.open("rb") as f:
            if f.read(4) != b"RIFF" or (f.read(4), f.read(4))[1] != b"WAVE":
                return None
            block_align = 0
            while True:
                header = f.read(8)
                if len(header) < 8:
                    return None
                chunk, size = header[:4], int.from_bytes(header[4:], "little")
                if chunk == b"fmt ":
                    fmt = f.read(size + size % 2)
                    block_align = int.from_bytes(fmt[12:14], "little") if len(fmt) >= 14 else 0
                elif chunk == b"data":
                    if block_align == 0 or size in (0, 0xFFFFFFFF):
                        return None
                    return size // block_align
                else:
                    f.seek(size + size % 2, 1)
    except OSError:
        return None


def save(
    path: str | Path,
    audio: torch.Tensor,
    sample_rate: int,
    file_sample_rate: int | None = None,
) -> Path:
    """Write a ``[channels, time]`` tensor to an audio file; the extension picks the format.

    WAV and FLAC are written as 16-bit PCM, OGG as Vorbis. Samples outside ``[-1, 1]`` are
    clipped, with a warning saying how many; NaN and infinite samples are written as 0 (they
    would otherwise become full-scale clicks or DC), with a warning too.

    Args:
        path (str | Path): the file, ending in ``.wav``, ``.flac`` or ``.ogg``; its folder
            must exist.
        audio (Tensor): audio, ``[channels, time]`` (a ``[time]`` tensor is taken as mono).
        sample_rate (int): the sample rate of ``audio``, in Hz.
        file_sample_rate (int | None): write the file at this rate, in Hz, resampling with
            soxr; ``None`` writes it at ``sample_rate``.

    Returns:
        The path written.

    Raises:
        AudioError: the tensor is not ``[channels, time]``, is empty, the rates are not
            positive whole numbers, the format is unsupported, or the file cannot be written.

    >>> import tempfile, os
    >>> path = save(os.path.join(tempfile.mkdtemp(), "a.wav"), torch.zeros(2, 100), 44100)
    >>> load(path)[0].shape
    torch.Size([2, 100])
    """
    path = Path(path)
    sample_rate = _check_rate(sample_rate, "sample_rate")
    rate = sample_rate
    if file_sample_rate is not None:
        rate = _check_rate(file_sample_rate, "file_sample_rate")
    if not isinstance(audio, torch.Tensor):
        raise AudioError(f"save takes a tensor [channels, time], got {type(audio).__name__}")
    if audio.dim() == 1:
        audio = audio[None]
    if audio.dim() != 2:
        raise AudioError(
            f"save takes audio [channels, time] (or [time]), got shape {list(audio.shape)}; "
            f"for a batch, save each item"
        )
    channels, length = audio.shape
    if channels == 0 or length == 0:
        raise AudioError(f"cannot save empty audio of shape {list(audio.shape)}")
    if channels > length:
        raise AudioError(
            f"save takes audio [channels, time], got {channels} channels of {length} samples; "
            f"pass audio.T if it is [time, channels]"
        )
    fmt = _format_of(path)
    sf = _soundfile()
    audio = audio.detach().to("cpu", torch.float32)
    finite = torch.isfinite(audio)
    if not bool(finite.all()):
        bad = int(audio.numel() - finite.sum())
        warnings.warn(
            f"save: {bad} of {audio.numel()} samples are NaN or infinite; writing them as 0 "
            f"(silence) to {path.name}",
            stacklevel=2,
        )
        audio = torch.where(finite, audio, torch.zeros(()))
    if rate != sample_rate:
        audio = resample(audio, sample_rate, rate)
    subtype = _SUBTYPES[fmt]
    if subtype not in _FLOAT_SUBTYPES:
        over = audio.abs() > 1.0
        if bool(over.any()):
            warnings.warn(
                f"save: {int(over.sum())} of {audio.numel()} samples are beyond [-1, 1] (peak "
                f"{float(audio.abs().max()):.3g}); {fmt} {subtype} clips them in {path.name}. "
                "Scale the audio down (audio / audio.abs().max()) to keep them.",
                stacklevel=2,
            )
        audio = audio.clamp(-1.0, 1.0)
    data = audio.T.contiguous().numpy()
    try:
        sf.write(str(path), data, rate, format=fmt, subtype=subtype)
    except (RuntimeError, TypeError, ValueError) as e:
        raise AudioError(f"cannot write audio file {str(path)!r} ({e})") from e
    return path
