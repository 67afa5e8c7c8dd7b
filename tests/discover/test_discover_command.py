"""``torchbend discover``, run as a user runs it, against the Python API's ranking."""

from __future__ import annotations

import json

import torch

import torchbend as tb
from tests.command import in_process
from torchbend.discover import rank


def test_the_command_prints_and_writes_the_python_ranking(tmp_path) -> None:
    voice, rate = tb.audio.io.load("assets/sounds/voice.wav", mono=True)
    sound = voice[0, :11264]  # what --seconds 0.26 keeps: a multiple of the ratio, 256
    records = tmp_path / "ranking.json"
    done = in_process(
        "discover", "tiny_ddsp", "--sound", "assets/sounds/voice.wav", "--descriptor", "pitch",
        "--targets", "^cat$", "--seconds", "0.26", "--top", "3", "--records", str(records),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))
    ranking = rank(bended, {"voice": sound}, "pitch", targets="^cat$", rate=rate)
    assert records.read_text() == json.dumps(ranking.to_records(), indent=1) + "\n"
    lines = done.stdout.splitlines()
    assert lines[:5] == str(ranking.table(3)).splitlines()
    assert lines[2].split()[1:3] == ["cat", "0"]  # the pitch channel of the latent


def test_bad_arguments_are_named_before_any_work(tmp_path) -> None:
    done = in_process("discover", "tiny_ddsp", "--sound", "x.wav", "--descriptor", "sparkle")
    assert done.returncode == 2 and "invalid choice: 'sparkle'" in done.stderr
    done = in_process(
        "discover", "tiny_ddsp", "--sound", "assets/sounds/voice.wav", "--picture",
        str(tmp_path / "a.txt"),
    )  # fmt: skip
    assert done.returncode != 0 and ".png" in done.stderr


def test_the_command_saves_the_knob_python_finds(tmp_path) -> None:
    voice, rate = tb.audio.io.load("assets/sounds/voice.wav", mono=True)
    sound = voice[0, :11264]
    config = tmp_path / "knob.json"
    done = in_process(
        "discover", "tiny_ddsp", "--sound", "assets/sounds/voice.wav", "--descriptor", "pitch",
        "--targets", "^cat$", "--seconds", "0.26", "--knob", str(config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"wrote {config}" in done.stdout
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))
    ranking = rank(bended, {"voice": sound}, "pitch", targets="^cat$", rate=rate)
    found = tb.discover.knob(bended, {"voice": sound}, "pitch", ranking=ranking, rate=rate)
    found.attach(bended)
    x = sound[None, None]
    with torch.inference_mode():
        bended.update("pitch", 0.75, ramp=False)
        expected = bended(x)
        bended.reset()
        bended.bend(tb.BendingConfig.load(config))
        bended.update("pitch", 0.75, ramp=False)
        assert torch.equal(bended(x), expected)
