"""The torchbend command: model resolution, --bend parsing, inspect, bend, export, check, demo."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchbend as tb
from torchbend.cli import load_model, main, parse_bend
from torchbend.errors import TorchbendError

pytestmark = pytest.mark.audio


def test_parse_bend():
    cb, pattern = parse_bend("Mask(prob=0.3, dim=-2, seed=1)@encoder.*conv$")
    assert isinstance(cb, tb.Mask) and cb.prob == 0.3 and pattern == "encoder.*conv$"
    cb, _ = parse_bend("Scale(2.0)@x")
    assert cb.scale == 2.0
    with pytest.raises(TorchbendError, match="Callback\\(args\\)@pattern"):
        parse_bend("Mask(prob=0.3)")
    with pytest.raises(TorchbendError, match="must be literals"):
        parse_bend("Mask(prob=__import__('os'))@x")
    with pytest.raises(TorchbendError, match="NoSuch"):
        parse_bend("NoSuch()@x")


def test_model_resolution_errors_name_the_forms():
    with pytest.raises(TorchbendError, match="shipped model name"):
        load_model("not_a_model")
    with pytest.raises(TorchbendError, match="cannot import"):
        load_model("no.such.module:factory")
    assert isinstance(load_model("torch.nn:Identity"), torch.nn.Identity)


def test_inspect_bend_export_check(tmp_path, capsys):
    assert main(["inspect", "tiny_rave", "--input", "1x1x2048"]) == 0
    out = capsys.readouterr().out
    assert "encoder.0.weight" in out and "encoder_2" in out
    sound = tmp_path / "in.wav"
    tb.audio.save(sound, torch.randn(1, 5000) * 0.1, 44100)
    args = [
        "bend",
        "tiny_rave",
        str(sound),
        str(tmp_path / "out.wav"),
        "--quiet",
        "--bend",
        "Mask(prob=0.5, dim=-2, seed=0)@encoder_2$",
        "--bend",
        "Scale(0.5)@decoder.0.weight",
    ]
    assert main(args) == 0
    audio, rate = tb.audio.load(tmp_path / "out.wav")
    assert audio.shape == (1, 5000) and rate == 44100
    ts = tmp_path / "model.ts"
    assert (
        main(
            [
                "export",
                "tiny_rave",
                "--format",
                "nntilde",
                "--input",
                "1x1x2048",
                "--bend",
                "Scale(0.5)@encoder_2$",
                "-o",
                str(ts),
            ]
        )
        == 0
    )
    assert main(["check", str(ts)]) == 0
    assert "forward" in capsys.readouterr().out
    assert main(["bend", "tiny_rave", str(tmp_path / "missing.wav"), str(tmp_path / "o.wav")]) == 2
    assert "missing.wav" in capsys.readouterr().err


def test_an_nntilde_export_streams_as_nn_tilde_runs_it(tmp_path, capsys):
    """The file, run buffer by buffer from a fresh load as nn~ runs it, gives the offline
    render of the bent model (no click at any buffer)."""
    ts = tmp_path / "bent.ts"
    bend = "Scale(0.5)@encoder_2$"
    assert main(["export", "tiny_rave", "--bend", bend, "-o", str(ts)]) == 0
    offline = tb.BendedModule(tb.models.load("tiny_rave"))
    offline.trace(x=torch.zeros(1, 1, 4096))
    offline.bend(*parse_bend(bend))
    signal = torch.randn(1, 1, 3 * 4096, generator=torch.Generator().manual_seed(1)) * 0.1
    for buffer in (256, 2048, 4096):
        exported = torch.jit.load(str(ts))
        with torch.no_grad():
            blocks = torch.cat([exported(b) for b in signal.split(buffer, -1)], -1)
            torch.testing.assert_close(blocks, offline(x=signal), atol=1e-6, rtol=0)


def test_a_torchscript_file_bends_activations_and_weights_as_from_python(tmp_path, capsys):
    torch.manual_seed(0)
    path = tmp_path / "tiny_rave.ts"
    torch.jit.save(torch.jit.script(tb.models.load("tiny_rave")), str(path))
    sound = tmp_path / "in.wav"
    tb.audio.save(sound, torch.randn(1, 6000) * 0.1, 44100)
    assert main(["inspect", str(path), "--input", "1x1x2048"]) == 0
    assert "encoder_2" in capsys.readouterr().out  # activations of the converted graph
    bends = ["Scale(0.0)@encoder_2$", "Scale(0.5)@decoder.0.weight"]
    out = tmp_path / "out.wav"
    args = ["bend", str(path), str(sound), str(out), "--quiet"]
    assert main([*args, *(a for b in bends for a in ("--bend", b))]) == 0
    assert "2 target(s)" in capsys.readouterr().err

    bended = tb.BendedModule(torch.jit.load(str(path)))
    audio, rate = tb.audio.load(sound)
    bended.trace(x=audio[None, :, :4096])
    for spec in bends:
        bended.bend(*parse_bend(spec))
    expected = tb.audio.Stream(bended, block_size=8192, sample_rate=rate).process(audio)
    got, _ = tb.audio.load(out)
    assert got.shape == expected.shape == (1, 6000)
    assert torch.allclose(got, expected.clamp(-1, 1), atol=1e-4)
    unbent = tb.audio.Stream(tb.BendedModule(torch.jit.load(str(path))), block_size=8192)
    assert not torch.allclose(got, unbent.process(audio).clamp(-1, 1), atol=1e-2)


@pytest.mark.slow
def test_demo_renders_files_to_listen_to_and_a_picture_with_a_log_frequency_axis(
    tmp_path, capsys, monkeypatch
):
    """The whole demo, on the first 1.5 s of each sound: tiny_ddsp bent every way the demo
    lists and walked over each named latent channel, on every shipped sound; no file clips
    (the safety stage says what it did); what each bending does is printed, measured; the
    picture shows every render on a logarithmic frequency axis."""
    import matplotlib.figure
    import soundfile as sf

    from torchbend.audio.safety import FILE_CEILING
    from torchbend.demo import BENDINGS, SOUNDS, WALKS, run_demo

    figures = []
    savefig = matplotlib.figure.Figure.savefig

    def keep(figure, *args, **kwargs):
        figures.append(figure)
        return savefig(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    renders = run_demo(tmp_path, seconds=1.5)
    shipped = {path.stem for path in SOUNDS.glob("*.wav")}
    assert set(renders) == shipped and {"bass", "drums", "pad", "voice"} <= shipped
    variants = ["input", *BENDINGS, *(f"walk_{w.channel}" for w in WALKS)]
    assert all(list(by) == variants for by in renders.values())
    assert (tmp_path / "spectrograms.png").stat().st_size > 0
    written = sorted(tmp_path.glob("*.wav"))
    assert len(written) == len(shipped) * len(variants)
    for path in written:
        data = torch.from_numpy(sf.read(str(path), dtype="int16")[0]).int()
        assert int((data.abs() >= 32767).sum()) == 0, f"{path.name} clips"
    assert all(float(y.abs().max()) <= FILE_CEILING for by in renders.values() for y in by.values())
    out = capsys.readouterr().out
    assert "Safety stage (a limiter within -0.3 dBFS" in out and "no file clips" in out
    assert "#latent  pitch, loudness, brightness, noisiness" in out  # the table names them
    table = out[out.index("What each bending does") : out.index("What the walk does")]
    assert all(label in table for label in BENDINGS if label != "reconstruction")
    walks = out[out.index("What the walk does") : out.index("Safety stage")]
    assert all(f"walk_{w.channel}" in walks for w in WALKS)
    (figure,) = figures
    spectrograms = [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]
    assert len(spectrograms) == len(written)
    assert all(ax.get_yscale() == "log" and ax.get_ylim()[0] <= 50 for ax in spectrograms)
    check_the_demo_does_what_it_says(renders)


def check_the_demo_does_what_it_says(renders: dict[str, dict[str, torch.Tensor]]) -> None:
    """The claims of the demo's descriptions (BENDINGS, WALKS), measured as its tables measure
    them (medians over the sounds): every bending within 6 LU of the reconstruction and away
    from it; a fifth up is a fifth up; brighter is brighter; each walk moves its channel's
    measure the way it goes."""
    from torchbend.audio.quality import spectral_distance
    from torchbend.demo import BENDINGS
    from torchbend.demo.listening import changes, hear

    def median(values: list[float | None]) -> float:
        known = [v for v in values if v is not None]
        assert known, "no sound gave this measure"
        return statistics.median(known)

    heard = {s: {k: hear(y, 44100) for k, y in by.items()} for s, by in renders.items()}
    moved = {
        label: [changes(by[label], by["reconstruction"]) for by in heard.values()]
        for label in BENDINGS
    }
    for label in BENDINGS:
        for sound, by in heard.items():
            assert abs(by[label].lufs - by["reconstruction"].lufs) <= 6.0, (sound, label)
        # Away from the reconstruction on most sounds: a sound can be where a bending goes
        # already (a chord the encoder hears as noise, whispered).
        apart = [spectral_distance(by[label], by["reconstruction"]) for by in renders.values()]
        assert label == "reconstruction" or median(apart) > 0.05, (label, apart)
    assert abs(median([m[0] for m in moved["fifth_up"]]) - 7.0) < 1.0  # semitones
    assert median([m[2] for m in moved["brighter"]]) > 0.15  # octaves of centroid
    assert median([m[3] for m in moved["whisper"]]) < -3.0  # dB of harmonic-to-noise ratio

    def trend(label: str, row: int) -> float:
        """Median over the sounds of the change of measure ``row`` from the first fifth of
        the file to the last, against the reconstruction."""
        found = []
        for by in heard.values():
            frames = by[label].frames.shape[-1]
            early = torch.arange(frames) < frames // 5
            late = torch.arange(frames) >= frames - frames // 5
            first = changes(by[label], by["reconstruction"], early)[row]
            last = changes(by[label], by["reconstruction"], late)[row]
            found.append(None if first is None or last is None else last - first)
        return median(found)

    assert trend("walk_pitch", 0) > 12.0  # semitones, of the 2 octaves walked
    assert trend("walk_loudness", 1) > 10.0  # dB, of the 20 walked
    assert trend("walk_brightness", 2) > 0.5  # octaves of centroid
    assert trend("walk_noisiness", 3) < -3.0  # dB of harmonic-to-noise ratio


@pytest.mark.parametrize("length", [1, 100, 478, 5000])
def test_bend_gives_any_length_back_as_one_offline_pass_gives_it(tmp_path, length):
    audio = torch.randn(1, length, generator=torch.Generator().manual_seed(length)) * 0.3
    sound, out = tmp_path / "in.wav", tmp_path / "out.wav"
    tb.audio.save(sound, audio, 44100)
    audio, _ = tb.audio.load(sound)
    bend = "Mask(prob=0.5, dim=-2, seed=0)@decoder_1$"
    args = ["bend", "tiny_rave", str(sound), str(out), "--quiet", "--bend", bend, "--no-safety"]
    assert main(args) == 0
    got, _ = tb.audio.load(out)
    assert got.shape == (1, length)
    # The model streams by blocks of 8192 with its state carried over: the same as one pass
    # of the model over the whole sound (padded to its ratio), to float rounding.
    bended = tb.BendedModule(tb.models.load("tiny_rave"))
    x = torch.nn.functional.pad(audio, (0, -length % 16))[None]
    bended.trace(x=x)
    bended.bend(*parse_bend(bend))
    with torch.no_grad():
        tb.audio.save(tmp_path / "offline.wav", bended(x)[0, :, :length], 44100)
    expected, _ = tb.audio.load(tmp_path / "offline.wav")
    assert torch.allclose(got, expected, atol=1.5 / 32768, rtol=0)


def test_a_model_that_does_not_stream_renders_in_one_pass(tmp_path, capsys):
    sound, out = tmp_path / "in.wav", tmp_path / "out.wav"
    tb.audio.save(
        sound, torch.randn(1, 20000, generator=torch.Generator().manual_seed(0)) * 0.1, 44100
    )
    assert main(["bend", "torch.nn:Identity", str(sound), str(out), "--quiet", "--no-safety"]) == 0
    assert "in one pass" in capsys.readouterr().err
    assert torch.equal(tb.audio.load(out)[0], tb.audio.load(sound)[0])


def test_inspect_takes_a_sound_of_any_length(tmp_path, capsys):
    sound = tmp_path / "in.wav"
    tb.audio.save(sound, torch.randn(1, 478) * 0.1, 44100)
    assert main(["inspect", "tiny_rave", "--audio", str(sound)]) == 0
    assert "[1, 1, 480]" in capsys.readouterr().out  # padded to the ratio


def test_marked_aliases_stand_for_their_targets_in_bend_flags(tmp_path, capsys):
    sound = tmp_path / "in.wav"
    tb.audio.save(sound, torch.randn(1, 4096) * 0.1, 44100)
    common = ["bend", "tiny_rave", str(sound), "--quiet"]
    aliased = [*common, str(tmp_path / "a.wav"), "--mark", "latent=encoder_2"]
    assert main([*aliased, "--bend", "Scale(0.0)@#latent"]) == 0
    assert main([*common, str(tmp_path / "b.wav"), "--bend", "Scale(0.0)@encoder_2$"]) == 0
    a, _ = tb.audio.load(tmp_path / "a.wav")
    b, _ = tb.audio.load(tmp_path / "b.wav")
    assert torch.equal(a, b)
    assert main([*common, str(tmp_path / "c.wav"), "--mark", "latent"]) == 2
    assert "--mark takes NAME=TARGET" in capsys.readouterr().err
    assert main([*common, str(tmp_path / "c.wav"), "--bend", "Scale(0.0)@#nope"]) == 2
    assert "no alias '#nope'" in capsys.readouterr().err


def stereo(path, length: int = 20000):
    """Two different channels, saved and read back (as the command reads them)."""
    audio = torch.randn(2, length, generator=torch.Generator().manual_seed(1)) * 0.1
    audio[1] = torch.sin(torch.arange(length) / 20) * 0.3
    tb.audio.save(path, audio, 44100)
    return tb.audio.load(path)[0]


def test_bend_renders_every_channel_as_the_python_api_does(tmp_path):
    from torchbend.audio.safety import FILE_CEILING, Safety

    audio = stereo(tmp_path / "in.wav")
    bend = "Scale(0.5)@encoder_2$"
    out = tmp_path / "out.wav"
    common = ["bend", "tiny_rave", str(tmp_path / "in.wav")]
    assert main([*common, str(out), "--quiet", "--bend", bend, "--channels", "all"]) == 0
    model = tb.models.load("tiny_rave")
    model.set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, 8192))
    bended.bend(*parse_bend(bend))
    stage = Safety(44100, ceiling=FILE_CEILING)
    stream = tb.audio.Stream(bended, block_size=8192, channels=1, safety=stage)
    stream.reset()
    with torch.no_grad():
        tb.audio.save(tmp_path / "python.wav", stream.process(audio), 44100)
    got, expected = tb.audio.load(out)[0], tb.audio.load(tmp_path / "python.wav")[0]
    assert got.shape == (2, 20000)
    assert torch.allclose(got, expected, atol=1.5 / 32768, rtol=0)
    assert not torch.allclose(got[0], got[1], atol=0.05)  # each its own channel
    # One channel by its index: the right one alone gives the right channel of all.
    assert (
        main([*common, str(tmp_path / "r.wav"), "--quiet", "--bend", bend, "--channels", "1"]) == 0
    )
    right = tb.audio.load(tmp_path / "r.wav")[0]
    assert right.shape == (1, 20000) and torch.allclose(right[0], got[1], atol=1.5 / 32768)
    # In one pass (a model that does not stream), each channel as an item of the batch.
    one_pass = ["bend", "torch.nn:Identity", str(tmp_path / "in.wav"), str(tmp_path / "i.wav")]
    assert main([*one_pass, "--channels", "all", "--no-safety"]) == 0
    assert torch.equal(tb.audio.load(tmp_path / "i.wav")[0], audio)


def test_bend_refuses_a_bad_channels_choice_in_one_line(tmp_path, capsys):
    stereo(tmp_path / "in.wav", 1000)
    args = ["bend", "torch.nn:Identity", str(tmp_path / "in.wav"), str(tmp_path / "o.wav")]
    assert main([*args, "--channels", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in.wav has 2 channel(s), give 0 to 1, 'mix' or 'all'" in err
    with pytest.raises(SystemExit):
        main([*args, "--channels", "left"])
    assert "expected 'mix', 'all' or a channel's index" in capsys.readouterr().err


def test_bend_warns_in_one_line_when_the_mix_cancels_and_the_input_is_cut_short(tmp_path):
    """Warnings of the command read as its errors do: one line each, no source line."""
    import subprocess
    import sys

    x = torch.sin(torch.arange(88200) / 30) * 0.5
    path = tmp_path / "in.wav"
    tb.audio.save(path, torch.stack([x, -x]), 44100)
    path.write_bytes(path.read_bytes()[: 44 + 29400 * 4])  # a copy stopped after 0.67 s
    command = [sys.executable, "-m", "torchbend.cli", "bend", "torch.nn:Identity"]
    result = subprocess.run(
        [*command, str(path), str(tmp_path / "out.wav"), "--no-safety"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "torchbend bend: warning: load: in.wav is cut short: its header says 2.00 s (88200 "
        "frames), the file holds 0.67 s (29400); going on with what is there (copy or export "
        "it again for the rest)"
    )
    assert lines[1].startswith(
        "torchbend bend: warning: mixing the 2 channels of in.wav to mono loses "
    )
    assert "UserWarning" not in result.stderr and "warnings.warn" not in result.stderr


def test_bend_refuses_an_implausible_sample_rate_in_one_line(tmp_path, capsys):
    import soundfile as sf

    sf.write(str(tmp_path / "in.wav"), torch.full((10, 1), 0.1).numpy(), 1)
    args = ["bend", "tiny_rave", str(tmp_path / "in.wav"), str(tmp_path / "o.wav"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "says its sample rate is 1 Hz; torchbend takes 1000 to 768000 Hz" in err
    assert not (tmp_path / "o.wav").exists()


def test_a_module_factory_next_to_the_users_script_is_found(tmp_path: Path) -> None:
    """MODEL module:factory finds a module of the current folder, as ``python -m`` would,
    from the installed ``torchbend`` script too (run here with -P: no folder prepended)."""
    (tmp_path / "my_models.py").write_text(
        "from torch import nn\n\n\ndef make():\n    return nn.Conv1d(1, 1, 3, padding=1)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-P", "-m", "torchbend.cli", "inspect", "my_models:make"]
    done = subprocess.run(
        [*command, "--input", "1x1x64"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "weight" in done.stdout and "bias" in done.stdout


def test_a_module_found_nowhere_names_where_it_was_looked_for(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TorchbendError, match=r"current folder .* PYTHONPATH"):
        load_model("no_module_here_at_all:make")


def test_check_latency_prints_the_table_the_python_api_gives(tmp_path):
    """``torchbend check FILE --latency``, run as a user runs it, prints the check's report
    and the latency table of ``tb.export.latency`` (here a file with a FIFO of 16 samples)."""
    bended = tb.BendedModule(torch.nn.Conv1d(1, 1, 1))
    bended.trace(input=torch.randn(2, 1, 64))
    path = tmp_path / "blocks.ts"
    report = tb.export.nntilde(bended, path, min_buffer_size=16)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-m", "torchbend.cli", "check", str(path), "--latency"]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{report}\n{tb.export.latency(path)}\n"
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[6:20]}
    assert rows["8"] == ["8", "-", "16", "0", "-", "-", "-", "-"]
    assert rows["64"] == ["64", "64", "0", "0", "64", "1.45", "1.33", "0.67"]
