"""``torchbend studio`` run as a user runs it (a process of its own), against the Python API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import torchbend as tb
from tests.command import in_process
from tests.studio.client import Client, decode_wav
from torchbend.audio.render import render
from torchbend.audio.safety import FILE_CEILING

pytestmark = pytest.mark.audio

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def studio_command(args: list[str], cwd: Path) -> Iterator[Client]:
    """``torchbend studio ARGS --no-browser --port 0`` started in ``cwd``; a client of the
    address it prints. The process is stopped (Ctrl+C) when the block ends."""
    command = [sys.executable, "-m", "torchbend.cli", *args, "--no-browser", "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"(http://\S+)", line)
        assert found, f"torchbend studio printed {line!r}{process.stderr.read()}"
        yield Client(found.group(1))
    finally:
        process.send_signal(2)  # Ctrl+C
        try:
            assert process.wait(30) in (0, 130)
        finally:
            process.kill()


def test_the_command_serves_what_python_gives(tmp_path: Path) -> None:
    config = tb.BendingConfig((tb.Mask(0.4, seed=2), "decoder_1$"))
    config.save(tmp_path / "start.json")
    with studio_command(["studio", "--config", "start.json", "--output", "session"], tmp_path) as c:
        model = c.ok("GET", "/api/model")
        assert model["model"] == "tiny_ddsp" and model["output"] == str(tmp_path / "session")
        assert model["latent_names"][:4] == ["pitch", "loudness", "brightness", "noisiness"]
        state = c.ok("GET", "/api/config")
        assert state["keys"] == [["forward:decoder_1"]]
        rendered = c.ok("POST", "/api/render", {"sound": "bass", "seconds": 1.1})
        status, data = c.get(rendered["audio"]["bended"])
        assert status == 200
        heard, _ = decode_wav(data)
        nodes = [n["name"] for n in c.ok("GET", "/api/graph")["nodes"]]
    bended = tb.BendedModule(tb.models.load("tiny_ddsp").set_streaming(True))
    bended.trace(x=torch.zeros(1, 1, 8192))
    assert nodes == [n.name for n in bended.graph().nodes]
    bended.bend(tb.BendingConfig.load(tmp_path / "start.json"))
    sound, _ = tb.audio.load(ROOT / "assets" / "sounds" / "bass.wav", sample_rate=44100, mono=True)
    files_stage = tb.audio.Safety(44100, ceiling=FILE_CEILING)  # the studio's default
    python, _ = render(
        bended, sound[:, : int(1.1 * 44100)], 44100, "forward", 8192, safety=files_stage
    )
    assert torch.allclose(heard, python.clamp(-1, 1), atol=1 / 32767)
    assert (tmp_path / "session" / "renders").is_dir()


def test_a_sound_named_on_the_command_line_is_current(tmp_path: Path) -> None:
    import soundfile

    soundfile.write(tmp_path / "odd.wav", torch.rand(12345).numpy() * 0.1, 44100)
    with studio_command(["studio", "--sound", "odd.wav", "--output", "o"], tmp_path) as c:
        sounds = c.ok("GET", "/api/sounds")
        assert sounds["current"] == "odd" and sounds["sounds"][-1]["source"] == "argument"
        rendered = c.ok("POST", "/api/render", {})
        assert rendered["seconds"] == pytest.approx(12345 / 44100, abs=1e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "add --remote"),
        (["--sound", "missing.wav"], "no sound file 'missing.wav'"),
        (["nothing_like_a_model"], "MODEL is a shipped model name"),
        (["--sweep", "."], "torchbend sweep map"),
        (["--config", "missing.json"], "no bending configuration at missing.json"),
        (["--max-seconds", "0"], "--max-seconds and --max-mb are numbers above 0"),
        (["--token", "abc"], "at least 8"),
        (["tests.studio.models:dict_output"], "gives a dict with keys ['audio', 'envelope']"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = in_process("studio", *args, "--no-browser", cwd=tmp_path)  # one started: below
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("torchbend studio: error:") and message in line, line


def test_a_bad_argument_is_one_line_from_the_command_as_a_user_runs_it(tmp_path: Path) -> None:
    args = ["tests.studio.models:dict_output"]  # a user's module, found on PYTHONPATH
    command = [sys.executable, "-m", "torchbend.cli", "studio", *args, "--no-browser"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("torchbend studio: error:") and "gives a dict with keys" in line
    assert json.dumps(line)
