"""Tests for torchbend.audio.io: load and save round trips, resampling, clear errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import soundfile as sf
import torch

from torchbend import audio
from torchbend.audio.io import downmix
from torchbend.errors import AudioError, TorchbendError

pytestmark = pytest.mark.audio


def sine(channels: int = 2, seconds: float = 0.25, rate: int = 44100) -> torch.Tensor:
    t = torch.arange(int(seconds * rate)) / rate
    return torch.stack([0.5 * torch.sin(2 * torch.pi * 440 * (c + 1) * t) for c in range(channels)])


@pytest.mark.parametrize(("ext", "atol"), [(".wav", 1e-4), (".flac", 1e-4), (".ogg", 0.1)])
def test_round_trip(tmp_path: Path, ext: str, atol: float) -> None:
    x = sine()
    path = audio.save(tmp_path / f"a{ext}", x, 44100)
    y, rate = audio.load(path)
    assert rate == 44100 and y.dtype == torch.float32
    assert y.shape == x.shape
    torch.testing.assert_close(y, x, atol=atol, rtol=0)


def test_mono_and_one_dimensional(tmp_path: Path) -> None:
    x = sine()
    audio.save(tmp_path / "a.wav", x, 44100)
    y, _ = audio.load(tmp_path / "a.wav", mono=True)
    torch.testing.assert_close(y, x.mean(0, keepdim=True), atol=1e-4, rtol=0)
    audio.save(tmp_path / "b.wav", x[0], 44100)
    assert audio.load(tmp_path / "b.wav")[0].shape == (1, x.shape[1])


def test_resampling_on_load_and_save(tmp_path: Path) -> None:
    x = sine(1, 0.5)
    audio.save(tmp_path / "a.wav", x, 44100)
    y, rate = audio.load(tmp_path / "a.wav", sample_rate=16000)
    assert rate == 16000 and y.shape == (1, 8000)
    audio.save(tmp_path / "b.wav", x, 44100, file_sample_rate=22050)
    assert sf.info(str(tmp_path / "b.wav")).samplerate == 22050
    back, _ = audio.load(tmp_path / "b.wav", sample_rate=44100)
    # Away from the edges, a 440 Hz sine survives 44.1 -> 22.05 -> 44.1 kHz.
    torch.testing.assert_close(back[:, 2000:-2000], x[:, 2000:-2000], atol=2e-3, rtol=0)


def test_clipping_warns(tmp_path: Path) -> None:
    x = torch.zeros(1, 100)
    x[0, :10] = 3.0
    with pytest.warns(UserWarning, match=r"10 of 100 samples are beyond \[-1, 1\] \(peak 3\)"):
        audio.save(tmp_path / "a.wav", x, 44100)
    assert audio.load(tmp_path / "a.wav")[0].max() <= 1.0


@pytest.mark.parametrize("ext", [".wav", ".flac", ".ogg"])
def test_nan_and_inf_are_written_as_silence_with_a_warning(tmp_path: Path, ext: str) -> None:
    x = sine(1, 0.1)
    x[0, 100] = float("nan")
    x[0, 200:203] = float("inf")
    x[0, 300] = -float("inf")
    with pytest.warns(UserWarning, match=r"5 of 4410 samples are NaN or infinite; writing them"):
        audio.save(tmp_path / f"a{ext}", x, 44100)
    y, _ = audio.load(tmp_path / f"a{ext}")
    assert torch.isfinite(y).all() and y.abs().max() <= 1.0
    if ext != ".ogg":  # lossless: the bad samples are silent, the others as they were
        assert y[0, 100] == 0 and (y[0, 200:203] == 0).all() and y[0, 300] == 0
        keep = torch.isfinite(x)
        torch.testing.assert_close(y[keep], x[keep], atol=1e-4, rtol=0)


def test_nan_does_not_spread_through_resampling(tmp_path: Path) -> None:
    x = sine(1, 0.1)
    x[0, 100] = float("nan")
    with pytest.warns(UserWarning, match="NaN or infinite"):
        audio.save(tmp_path / "a.wav", x, 44100, file_sample_rate=22050)
    assert torch.isfinite(audio.load(tmp_path / "a.wav")[0]).all()


def test_audio_in_range_saves_without_a_warning(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        audio.save(tmp_path / "a.flac", sine(), 44100)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match=r"nope.wav' not found"):
        audio.load(tmp_path / "nope.wav")


def test_unsupported_extension(tmp_path: Path) -> None:
    path = tmp_path / "a.mp3"
    path.write_bytes(b"ID3")
    with pytest.raises(AudioError, match=r"unsupported extension '.mp3'.*WAV, FLAC, OGG"):
        audio.load(path)
    with pytest.raises(AudioError, match=r"unsupported extension '.aiff'"):
        audio.save(tmp_path / "a.aiff", torch.zeros(1, 10), 44100)


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    path.write_bytes(b"this is not a wav file at all" * 10)
    with pytest.raises(AudioError, match=r"cannot read audio file .*a.wav.*WAV, FLAC, OGG"):
        audio.load(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.wav"
    sf.write(str(path), torch.zeros(0, 1).numpy(), 44100)
    with pytest.raises(AudioError, match=r"empty.wav' is empty"):
        audio.load(path)


@pytest.mark.parametrize("shape", [(1, 1, 10), ()])
def test_save_wrong_rank(tmp_path: Path, shape: tuple[int, ...]) -> None:
    with pytest.raises(AudioError, match=r"save takes audio \[channels, time\]"):
        audio.save(tmp_path / "a.wav", torch.zeros(shape), 44100)


def test_save_bad_tensors(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match=r"cannot save empty audio"):
        audio.save(tmp_path / "a.wav", torch.zeros(2, 0), 44100)
    with pytest.raises(AudioError, match=r"2 samples; pass audio.T if it is \[time, channels\]"):
        audio.save(tmp_path / "a.wav", torch.zeros(100, 2), 44100)
    with pytest.raises(AudioError, match=r"save takes a tensor"):
        audio.save(tmp_path / "a.wav", [0.0, 0.1], 44100)  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [0, -44100, 44100.5, float("nan"), "44100", True])
def test_bad_sample_rates(tmp_path: Path, rate: object) -> None:
    audio.save(tmp_path / "a.wav", torch.zeros(1, 10), 44100)
    with pytest.raises(AudioError, match=r"sample_rate must be a positive"):
        audio.save(tmp_path / "b.wav", torch.zeros(1, 10), rate)  # type: ignore[arg-type]
    with pytest.raises(AudioError, match=r"sample_rate must be a positive"):
        audio.load(tmp_path / "a.wav", sample_rate=rate)  # type: ignore[arg-type]
    with pytest.raises(AudioError, match=r"file_sample_rate must be a positive"):
        audio.save(tmp_path / "c.wav", torch.zeros(1, 10), 44100, file_sample_rate=rate)  # type: ignore[arg-type]


def test_errors_share_the_root() -> None:
    assert issubclass(AudioError, TorchbendError)


def test_shipped_sounds() -> None:
    root = Path(__file__).resolve().parents[2] / "assets/sounds"
    for name in ("drums", "bass", "pad"):
        x, rate = audio.load(root / f"{name}.wav")
        assert rate == 44100 and x.shape == (1, 4 * 44100)
        assert 0.5 < float(x.abs().max()) <= 0.81


def test_unwritable_path(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match=r"cannot write audio file .*no/such/folder/a\.wav"):
        audio.save(tmp_path / "no/such/folder/a.wav", torch.zeros(1, 10), 44100)


def test_a_downmix_whose_channels_cancel_warns_with_the_loss(tmp_path: Path) -> None:
    x = sine(1, 0.5)
    audio.save(tmp_path / "anti.wav", torch.cat([x, -x]), 44100)
    # (-x in 16 bits is x inverted to within a step: the mix is at -96 dBFS, not silent)
    message = r"mixing the 2 channels of anti.wav to mono loses 8\d\.\d dB \(RMS -9.0 dBFS to -9"
    with pytest.warns(UserWarning, match=message):
        mix, _ = audio.load(tmp_path / "anti.wav", mono=True)
    assert mix.abs().max() <= 1 / 32768  # what the warning is about
    with pytest.warns(UserWarning, match=r"mixing the 2 channels of the audio to mono loses all"):
        downmix(torch.cat([x, -x]))
    with pytest.warns(UserWarning, match=r"loses 25.6 dB \(RMS -9.5 dBFS to -35.1 dBFS\)"):
        downmix(torch.cat([x, -0.9 * x]))
    with warnings.catch_warnings():  # unrelated or alike channels lose 3 dB or less
        warnings.simplefilter("error")
        audio.load(tmp_path / "anti.wav")
        downmix(sine(2, 0.5))
        downmix(torch.cat([x, x]))
        downmix(torch.zeros(2, 100))


def test_a_wav_cut_short_loads_what_it_holds_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    audio.save(path, sine(1, 2.0), 44100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert audio.load(path)[0].shape == (1, 88200)
    data = path.read_bytes()
    path.write_bytes(data[: 44 + 29400 * 2])  # a copy stopped after 0.67 s
    with pytest.warns(
        UserWarning,
        match=r"a.wav is cut short: its header says 2.00 s \(88200 frames\), the file holds "
        r"0.67 s \(29400\)",
    ):
        y, _ = audio.load(path)
    assert y.shape == (1, 29400)


@pytest.mark.parametrize("rate", [1, 999, 768001])
def test_implausible_sample_rates_are_refused_naming_the_bounds(tmp_path: Path, rate: int) -> None:
    path = tmp_path / "a.wav"
    sf.write(str(path), torch.full((10, 1), 0.1).numpy(), rate)
    with pytest.raises(
        AudioError, match=rf"says its sample rate is {rate} Hz; torchbend takes 1000 to 768000 Hz"
    ):
        audio.load(path, sample_rate=44100)
    with pytest.raises(
        AudioError, match=rf"sample_rate must be from 1000 to 768000 Hz, got {rate}"
    ):
        audio.save(tmp_path / "b.wav", torch.zeros(1, 10), rate)
