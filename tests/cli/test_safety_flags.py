"""The safety stage on the command line: ``bend`` and ``demo`` (on unless ``--no-safety``) and
``live --no-safety``."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest
import soundfile as sf
import torch

import torchbend as tb
from torchbend.audio.safety import FILE_CEILING, Safety
from torchbend.audio.stream import StreamStats
from torchbend.cli import main, parse_bend

pytestmark = pytest.mark.audio

BLOW_UP = "Scale(1e6)@decoder_1$"


def sound(path: Any, length: int = 20000, offset: float = 0.0) -> torch.Tensor:
    audio = torch.randn(1, length, generator=torch.Generator().manual_seed(0)) * 0.1 + offset
    tb.audio.save(path, audio, 44100)
    return tb.audio.load(path)[0]


def full_scale(path: Any) -> int:
    """Samples of a 16-bit file at full scale (32767 or -32768): what clipped."""
    data = torch.from_numpy(sf.read(str(path), dtype="int16")[0]).int()
    return int((data.abs() >= 32767).sum())


def test_bend_limits_by_default_writes_what_a_safe_stream_gives_and_says_so(
    tmp_path, capsys
) -> None:
    audio = sound(tmp_path / "in.wav")
    out, raw = tmp_path / "out.wav", tmp_path / "raw.wav"
    args = ["bend", "tiny_rave", str(tmp_path / "in.wav")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing clipped, nothing to warn about
        assert main([*args, str(out), "--quiet", "--bend", BLOW_UP]) == 0
    err = capsys.readouterr().err
    assert "by blocks of 8192" in err and "; safety: limited 3 blocks (" in err
    assert "ms above the threshold" in err and "peak in +" in err
    assert err.rstrip().endswith("; peak -0.3 dBFS)")
    assert full_scale(out) == 0
    model = tb.models.load("tiny_rave")
    model.set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, 8192))
    bended.bend(*parse_bend(BLOW_UP))
    stage = Safety(44100, ceiling=FILE_CEILING)  # a file's: within -0.3 dBFS
    stream = tb.audio.Stream(bended, block_size=8192, sample_rate=44100, safety=stage)
    stream.reset()
    with torch.no_grad():
        expected = stream.process(audio)
    assert expected.abs().max() <= FILE_CEILING
    tb.audio.save(tmp_path / "python.wav", expected, 44100)
    got = tb.audio.load(out)[0]
    assert torch.equal(got, tb.audio.load(tmp_path / "python.wav")[0])
    with pytest.warns(UserWarning, match="beyond"):  # without it: beyond full scale
        assert main([*args, str(raw), "--quiet", "--bend", BLOW_UP, "--no-safety"]) == 0
    assert not torch.equal(tb.audio.load(raw)[0], got)
    assert full_scale(raw) > 1000


def test_bend_in_one_pass_with_safety_runs_it_after_the_model(tmp_path, capsys) -> None:
    audio = sound(tmp_path / "in.wav", 5000, offset=0.3)
    out = tmp_path / "out.wav"
    assert main(["bend", "torch.nn:Identity", str(tmp_path / "in.wav"), str(out), "--safety"]) == 0
    assert "in one pass; safety: nothing guarded or limited, DC offset" in capsys.readouterr().err
    with torch.no_grad():
        expected = tb.audio.Safety(44100, ceiling=FILE_CEILING)(audio[None])[0]
    tb.audio.save(tmp_path / "python.wav", expected, 44100)
    got = tb.audio.load(out)[0]
    assert torch.equal(got, tb.audio.load(tmp_path / "python.wav")[0])
    assert abs(float(got[:, -1000:].mean())) < 0.1  # the offset is going


class FakeDevices:
    """sounddevice, as far as ``torchbend live`` asks it before playing."""

    def query_devices(self, device: Any = None, kind: str = "output") -> dict[str, str]:
        return {"name": f"fake {kind}"}

    def check_input_settings(self, **settings: Any) -> None:
        pass

    def check_output_settings(self, **settings: Any) -> None:
        pass


@pytest.mark.parametrize(("flags", "safety"), [([], True), (["--no-safety"], False)])
def test_live_plays_safe_unless_told_not_to(monkeypatch, capsys, flags, safety) -> None:
    live_module = importlib.import_module("torchbend.audio.live")  # not the function
    calls: list[dict[str, Any]] = []

    def fake_live(bended: Any, **kwargs: Any) -> StreamStats:
        calls.append(kwargs)
        return StreamStats(2048, 44100, 2048, 0, 0, 0.0, 0.0, 0.0, 0.0)

    monkeypatch.setattr(live_module, "import_sounddevice", FakeDevices)
    monkeypatch.setattr(live_module, "live", fake_live)
    assert main(["live", "tiny_rave", "--duration", "0", *flags]) == 0
    assert [c["safety"] for c in calls] == [safety]
    out = capsys.readouterr().out
    assert ("no safety stage" in out) is not safety
