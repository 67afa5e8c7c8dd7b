"""``torchbend health``: the table it prints is the Python API's, and its failures are one line."""

from __future__ import annotations

import pytest

import torchbend as tb
from tests.command import in_process
from torchbend.audio.render import padded

pytestmark = pytest.mark.audio


@pytest.fixture(scope="module")
def sound(tmp_path_factory) -> str:
    """A third of a second of the shipped voice, as a user's file."""
    audio, rate = tb.audio.load("assets/sounds/voice.wav", sample_rate=44100, mono=True)
    path = tmp_path_factory.mktemp("health") / "voice.wav"
    tb.audio.save(path, audio[:, 44100 : 44100 + 14700], rate)
    return str(path)


def test_the_command_prints_the_python_table_and_blames_the_bent_node(sound, tmp_path):
    config = tmp_path / "bends.json"
    model = tb.BendedModule(tb.models.load("tiny_ddsp"))
    audio, _ = tb.audio.load(sound, sample_rate=44100, mono=True)
    x = padded(audio, 256)
    model.trace(x=x)
    model.bend(tb.Scale(0.0), "decoder_3$")
    model.bending_config().save(config)
    report = tb.discover.health(model, x)
    picture = tmp_path / "health.png"
    args = ["health", "tiny_ddsp", "--sound", sound, "--config", str(config)]
    done = in_process(*args, "--picture", str(picture))
    assert done.returncode == 0, done.stderr
    assert f"{report.table()}\nfirst problem: decoder_3 (silent)\n" == done.stdout
    assert "bent 1 target(s): ['forward:decoder_3']" in done.stderr
    if picture.exists():  # written when matplotlib is installed
        assert picture.read_bytes()[:4] == b"\x89PNG"
    unbent = in_process("health", "tiny_ddsp", "--sound", sound, "--nodes", "decoder")
    assert unbent.returncode == 0 and unbent.stdout.endswith("no problem\n")
    assert unbent.stdout.count("\ndecoder_") == 7


def test_the_command_refuses_bad_input_in_one_line(sound):
    done = in_process("health", "tiny_ddsp", "--sound", sound, "--nodes", "decodr_1$")
    error = done.stderr.splitlines()[-1]
    assert done.returncode == 2 and done.stderr.count("error") == 1
    assert error.startswith("torchbend health: error:") and "did you mean 'decoder_1'" in error
    done = in_process("health", "tiny_ddsp", "--sound", sound, "--seconds", "0")
    assert done.returncode == 2 and "holds no samples" in done.stderr
    done = in_process("health", "tiny_ddsp")
    assert done.returncode == 2 and "--sound" in done.stderr


def test_a_user_runs_it_from_the_shell(sound):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "torchbend.cli", "health", "tiny_ddsp", "--sound", sound,
         "--bend", "Scale(0.0)@decoder_1$", "--nodes", "decoder"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("first problem: decoder_1 (silent)\n")
    model = tb.BendedModule(tb.models.load("tiny_ddsp"))
    audio, _ = tb.audio.load(sound, sample_rate=44100, mono=True)
    x = padded(audio, 256)
    model.trace(x=x)
    model.bend(tb.Scale(0.0), "decoder_1$")
    assert str(tb.discover.health(model, x, nodes="decoder").table()) in done.stdout
