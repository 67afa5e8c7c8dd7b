"""A sweep's folder: which audio files a resume trusts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from torchbend.sweep.manifest import intact


@pytest.mark.parametrize("fmt", ["WAV", "FLAC"])
def test_an_audio_file_is_intact_only_whole_and_of_its_length(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"render.{fmt.lower()}"
    noise = np.random.default_rng(0).uniform(-0.5, 0.5, 44100).astype(np.float32)
    soundfile.write(path, noise, 44100, format=fmt, subtype="PCM_16")
    assert intact(path, 44100)
    assert not intact(path, 44101) and not intact(path, 22050)  # another length
    assert not intact(tmp_path / "missing.wav", 44100)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) * 2 // 3])  # cut short: a FLAC's header still says 44100
    assert not intact(path, 44100)
    path.write_bytes(b"RIFF" + bytes(100))
    assert not intact(path, 44100)
