"""The command's surface: one-line errors with exit code 2, help, version, listings."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchbend as tb
from tests.sweep.sweeps import SOUNDS, small_spec, write_spec
from torchbend.audio.live import import_sounddevice
from torchbend.cli import build_parser, main

pytestmark = pytest.mark.audio


def one_line_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str, prog: str = ""
) -> str:
    """Run ``argv``, expecting exit code 2 and a one-line error naming ``needles``."""
    prog = prog or f"torchbend {argv[0]}"
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors exit
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (argv, out, err)
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def sound(tmp_path):
    path = tmp_path / "in.wav"
    tb.audio.save(
        path, torch.randn(1, 3000, generator=torch.Generator().manual_seed(0)) * 0.1, 44100
    )
    return path


def test_bad_arguments_are_one_line_errors(tmp_path, sound, capsys) -> None:
    one_line_error(capsys, ["inspect", "tiny_rave", "--input", "1xax3"], "--input", "1x1x4096")
    one_line_error(capsys, ["inspect", "tiny_rave", "--input", "1x1x-256"], "'1x1x-256'")
    one_line_error(
        capsys,
        ["inspect", "tiny_rave", "--input", "1x1x100"],
        "multiple of its ratio 16",
        "96 or 112",
    )
    one_line_error(capsys, ["inspect", "torch.nn:Linear"], "torch.nn:Linear()", "without arg")
    one_line_error(capsys, ["inspect", "no_such_model"], "no shipped model", "tiny_rave")
    one_line_error(capsys, ["inspect", "missing.ts"], "no file 'missing.ts'")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    one_line_error(
        capsys, ["inspect", "torch.nn:Identity", "--checkpoint", str(garbage)], "--checkpoint"
    )
    other = tmp_path / "other.pt"
    torch.save({"weight": torch.zeros(2, 2)}, other)
    one_line_error(
        capsys,
        ["inspect", "torchbend.models:TinyRave", "--checkpoint", str(other)],
        "does not fit TinyRave",
    )
    one_line_error(capsys, ["bend", "tiny_rave", str(sound), str(tmp_path / "a.mp3")], ".mp3")
    one_line_error(
        capsys,
        ["bend", "tiny_rave", str(tmp_path / "missing.wav"), str(tmp_path / "no" / "o.wav")],
        "does not exist; create it first",  # the output is checked before the input is read
    )
    one_line_error(capsys, ["bend", "tiny_rave", str(sound), str(tmp_path)], "is a folder")
    one_line_error(capsys, ["bend", "tiny_rave", str(sound), "o.wav", "--bend", "Mask"], "@pattern")
    one_line_error(
        capsys, ["bend", "tiny_rave", str(sound), "o.wav", "--bend", "Mask(2.0)@x"], "prob"
    )
    one_line_error(capsys, ["export", "tiny_rave", "-o", str(tmp_path / "no" / "m.ts")], "no")
    one_line_error(capsys, ["check", str(tmp_path / "nothing.ts")], "no file")
    one_line_error(capsys, ["frobnicate"], "invalid choice", "callbacks", prog="torchbend")


def test_live_without_sounddevice_is_a_one_line_error(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    one_line_error(capsys, ["live", "tiny_rave"], "torchbend[live]")


def test_live_plays_on_a_machine_without_sound_card_nor_ci(tmp_path: Path) -> None:
    """What the README's test command runs, as a new user runs it: CI unset, no ~/.asoundrc
    (HOME is an empty folder), no sound card here; the tests play to ALSA's null device."""
    try:
        import_sounddevice()
    except ImportError as e:
        pytest.skip(str(e))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    command = [sys.executable, "-m", "torchbend.cli", "live", "tiny_rave", "--duration", "0.1"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "blocks of 2048 samples" in done.stdout and "realtime" in done.stdout
    assert not (tmp_path / ".asoundrc").exists()


def test_every_argument_is_documented_with_its_default(capsys) -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(commands) >= {
        "inspect",
        "bend",
        "export",
        "check",
        "live",
        "demo",
        "callbacks",
        "sweep",
    }
    nested = [([name], sub) for name, sub in commands.items()]
    while nested:
        name, sub = nested.pop(0)
        with pytest.raises(SystemExit):
            main([*name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for action in sub._actions:
            if action.dest == "help":
                continue
            if isinstance(action, argparse._SubParsersAction):  # sweep plan, sweep run...
                assert action.help, (name, action.dest)
                nested += [([*name, step], p) for step, p in action.choices.items()]
                continue
            assert action.help, (name, action.dest)
            shown = action.option_strings[-1] if action.option_strings else action.dest
            assert shown in text, (name, shown)
            if action.default not in (None, False) and action.option_strings:
                assert "(default:" in text.split(shown, 1)[1], (name, shown)


def test_version_and_listings(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"torchbend {tb.__version__}"
    assert main(["callbacks"]) == 0
    out = capsys.readouterr().out
    for name in tb.callbacks.registry.CALLBACKS:
        assert re.search(rf"^{name}\(", out, re.M), name
    assert "Mask(prob: float | Control = 0.3, dim: int | Sequence[int] | None = None" in out
    assert "Zero each element of the target with probability" in out
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert re.match(r"tiny_ddsp: torchbend\.models\.tiny_ddsp\.TinyDDSP, weights ", out)
    assert re.search(r"^tiny_rave: torchbend\.models\.tiny_rave\.TinyRave, weights ", out, re.M)


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["live", "tiny_rave", "--duration", "-3"], ["--duration", "0 or more", "'-3'"]),
        (["live", "tiny_rave", "--duration", "nan"], ["--duration", "0 or more"]),
        (
            ["live", "tiny_rave", "--duration", "0.1", "--osc-port", "-1"],
            ["--osc-port", "0 to 65535", "'-1'"],
        ),
        (
            ["live", "tiny_rave", "--duration", "0.1", "--osc-port", "70000"],
            ["--osc-port", "0 to 65535"],
        ),
        (
            ["live", "tiny_rave", "--duration", "0.1", "--sample-rate", "0"],
            ["--sample-rate", "1000 to 768000"],
        ),
        (
            ["live", "tiny_rave", "--duration", "0.1", "--block-size", "1073741824"],
            ["--block-size", "64 to 8192"],
        ),
        (
            ["live", "tiny_rave", "--duration", "0.1", "--block-size", "100"],
            ["ratio 16", "96 and 112"],
        ),
        (
            ["live", "tiny_rave", "--duration", "0.1", "--output-device", "no such card"],
            ["'no such card'", "devices:"],
        ),
        (["bend", "tiny_rave", "in.wav", "o.wav", "--block-size", "-5"], ["64 to 8192", "'-5'"]),
        (["bend", "tiny_rave", "in.wav", "o.wav", "--block-size", "16"], ["64 to 8192", "'16'"]),
        (["bend", "tiny_rave", "in.wav", "o.wav", "--block-size", "7"], ["64 to 8192", "'7'"]),
        (["bend", "tiny_rave", "in.wav", "o.wav", "--block-size", "1048576"], ["64 to 8192"]),
        (["bend", "tiny_rave", "in.wav", "o.wav", "--block-size", "100"], ["96 and 112"]),
        (["studio", "--block-size", "1073741824"], ["--block-size", "64 to 8192"]),
        (["inspect", "tiny_rave", "--input", "1x1x99999999999"], ["--input", "16777216"]),
        (["inspect", "tiny_rave", "--input", "1x1x7"], ["multiple of its ratio 16", "give 16"]),
    ],
)
def test_limits_are_checked_before_any_work(
    tmp_path, monkeypatch, capsys, argv: list[str], needles: list[str]
) -> None:
    """Each limit is one line on stderr, exit 2, before a banner, a table or a trace at the
    size asked for; a suggestion is one the model takes."""
    monkeypatch.chdir(tmp_path)
    tb.audio.save(tmp_path / "in.wav", torch.zeros(1, 3000), 44100)
    line = one_line_error(capsys, argv, *needles)
    assert "16 or 16" not in line and "bent" not in line
    assert capsys.readouterr() == ("", "")


def test_limits_are_printed_alone(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    tb.audio.save(tmp_path / "in.wav", torch.zeros(1, 3000), 44100)
    for argv in (
        ["live", "tiny_rave", "--osc-port", "-1", "--duration", "0.1"],
        ["bend", "tiny_rave", "in.wav", "o.wav", "--block-size", "16"],
        ["inspect", "tiny_rave", "--input", "1x1x7"],
    ):
        try:
            code = main(argv)
        except SystemExit as e:
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, out, err)


def test_live_without_a_sound_card_is_one_line_before_loading_the_model(tmp_path: Path) -> None:
    try:
        import_sounddevice()
    except ImportError as e:
        pytest.skip(str(e))
    no_card = tmp_path / "no_card.conf"  # ALSA's default is a card that is not there
    no_card.write_text("pcm.!default {\n    type hw\n    card 99\n}\n")
    env = {**os.environ, "ALSA_CONFIG_PATH": str(no_card)}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    command = [sys.executable, "-m", "torchbend.cli", "live", "no_such_model", "--duration", "1"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "", done
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("torchbend live: error: cannot open the default input device"), line
    assert "--input-device" in line


def test_bend_streams_a_streaming_model_at_the_block_size_asked(tmp_path, capsys) -> None:
    """--block-size changes the blocks, not whether the state carries over."""
    sound = torch.randn(1, 5000, generator=torch.Generator().manual_seed(0)) * 0.1
    tb.audio.save(tmp_path / "in.wav", sound, 44100)
    argv = ["bend", "tiny_rave", str(tmp_path / "in.wav"), str(tmp_path / "o.wav"), "--quiet"]
    assert main([*argv, "--block-size", "1024", "--no-safety"]) == 0
    got, _ = tb.audio.load(tmp_path / "o.wav")
    heard, _ = tb.audio.load(tmp_path / "in.wav")
    with torch.no_grad():
        model = tb.models.load("tiny_rave")
        offline = model(torch.nn.functional.pad(heard, (0, 120))[None])[0, :, :5000]
    torch.testing.assert_close(got, offline, atol=2 / 32767, rtol=0)


def test_config_without_format_is_taken_and_its_errors_are_named(tmp_path, capsys) -> None:
    """--config takes a file without "format" and "version", as the studio and sweeps do;
    a wrong argument names that argument only."""
    sound = tmp_path / "in.wav"
    tb.audio.save(sound, torch.zeros(1, 3000), 44100)
    mask = {"class": "Mask", "args": {"prob": 0.3, "seed": 0}}
    config = tmp_path / "bends.json"
    config.write_text(json.dumps({"bendings": [{"callback": mask, "patterns": ["encoder_2$"]}]}))
    argv = ["bend", "tiny_rave", str(sound), str(tmp_path / "o.wav"), "--config", str(config)]
    assert main([*argv, "--quiet"]) == 0
    assert "bent 1 target(s)" in capsys.readouterr().err
    mask["args"]["bogus"] = 1  # type: ignore[index]
    config.write_text(json.dumps({"bendings": [{"callback": mask, "patterns": ["encoder_2$"]}]}))
    line = one_line_error(
        capsys, argv, "bending 0", "Mask does not take the argument 'bogus'; it takes prob"
    )
    assert "['bogus', 'prob']" not in line and "no format" not in line
    config.write_text(json.dumps({"format": "other", "bendings": []}))
    one_line_error(capsys, argv, "format 'other'", "torchbend.bending-config")


def test_no_progress_bar_goes_to_a_log(tmp_path, capsys) -> None:
    """stderr is not a terminal here (a log file, a pipe): no progress bar goes there."""
    sound = tmp_path / "in.wav"
    tb.audio.save(sound, torch.zeros(1, 9000), 44100)
    assert main(["bend", "tiny_rave", str(sound), str(tmp_path / "o.wav")]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "#" not in err and "%" not in err, err
    assert "wrote" in err
    one = small_spec(
        inputs=[str(SOUNDS / "bass.wav")], axes={"bendings.0.callback.args.std": {"values": [0.1]}}
    )
    spec = write_spec(tmp_path / "sweep.json", one)
    assert (
        main(["sweep", "run", str(spec), "--out", str(tmp_path / "sweep"), "--workers", "0"]) == 0
    )
    err = capsys.readouterr().err
    assert "renders/s" not in err and "\r" not in err, err
