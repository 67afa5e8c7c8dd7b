"""The command's surface: one-line errors with exit code 2, help, version, listings."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchbend as tb
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
    assert re.match(
        r"tiny_rave: torchbend\.models\.tiny_rave\.TinyRave, weights ", capsys.readouterr().out
    )
