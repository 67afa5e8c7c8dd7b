"""``torchbend audition``, run as a user runs it, against the Python API's sounds."""

from __future__ import annotations

import pytest
import torch

import torchbend as tb
from tests.command import in_process
from torchbend.audio.render import padded
from torchbend.discover import activation_audio, audition

pytestmark = pytest.mark.audio

STEP = 1 / 32768
"""The files are 16-bit: a sample read back is within one step of what was written."""


@pytest.fixture(scope="module")
def sound(tmp_path_factory) -> str:
    """A quarter of a second of the shipped voice, as a user's file."""
    audio, rate = tb.audio.load("assets/sounds/voice.wav", sample_rate=44100, mono=True)
    path = tmp_path_factory.mktemp("audition") / "voice.wav"
    tb.audio.save(path, audio[:, 44100 : 44100 + 11000], rate)
    return str(path)


@pytest.fixture(scope="module")
def python(sound) -> tuple[tb.BendedModule, torch.Tensor]:
    """tiny_ddsp bent as the command is told to, and the padded sound."""
    audio, _ = tb.audio.load(sound, sample_rate=44100, mono=True)
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))
    x = padded(audio, 256)
    bended.trace(x=x)
    bended.bend(tb.Scale(0.5), "decoder_3$")
    return bended, x


BEND = ("--bend", "Scale(0.5)@decoder_3$")


@pytest.mark.parametrize("mode", ["solo", "bypass", "activation"])
def test_the_command_writes_the_python_sound(sound, python, tmp_path, mode) -> None:
    bended, x = python
    out = tmp_path / f"{mode}.wav"
    args = ["audition", "tiny_ddsp", "--sound", sound, "--node", "cat", "--channel", "0"]
    done = in_process(*args, "--mode", mode, "--out", str(out), *BEND)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out}: ") and "channel 0" in done.stdout
    written, rate = tb.audio.io.load(out)
    if mode == "activation":
        expected, _ = activation_audio(bended, x, "cat", 0)
    else:
        expected = audition(bended, x, "cat", 0, mode=mode)[0]
    expected = expected[..., :11000]
    assert rate == 44100 and written.shape == expected.shape == (1, 11000)
    assert expected.abs().max() < 1  # nothing clipped
    assert (written - expected).abs().max() <= STEP


def test_the_image_is_written(sound, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    image = tmp_path / "cat.png"
    done = in_process(
        "audition", "tiny_ddsp", "--sound", sound, "--node", "cat", "--image", str(image)
    )
    assert done.returncode == 0, done.stderr
    assert image.read_bytes()[:4] == b"\x89PNG" and f"wrote {image}" in done.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "x.mp3"], "--out 'x.mp3': cannot write .mp3; give a file ending in .wav"),
        (["--image", "x.jpg"], "cannot write .jpg; give a file ending in .png"),
        ([], "give --out FILE.wav (the sound), --image FILE.png, or both"),
        (["--mode", "mute", "--out", "x.wav"], "invalid choice: 'mute'"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(sound, extra, message) -> None:
    done = in_process("audition", "tiny_ddsp", "--sound", "nowhere.wav", "--node", "cat", *extra)
    assert done.returncode != 0 and message in done.stderr and "nowhere" not in done.stderr


def test_a_bad_node_or_channel_is_one_line(sound, tmp_path) -> None:
    out = str(tmp_path / "a.wav")
    args = ["audition", "tiny_ddsp", "--sound", sound, "--out", out]
    done = in_process(*args, "--node", "catt")
    assert done.returncode != 0 and "did you mean 'cat'" in done.stderr.splitlines()[-1]
    done = in_process(*args, "--node", "cat", "--channel", "99")
    assert done.returncode != 0 and "channel 99 is out of range" in done.stderr
