"""The files the README, the gallery and the command export, played by the real nn~ in Pure
Data at every buffer size, sample for sample against the file called as nn~ calls it and
against what the Python API streams."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

import torchbend as tb
from tests.cli.test_readme_commands import python_render, readme_bends
from tests.command import in_process
from tests.pdhost import (
    Message,
    PdRun,
    compare,
    delays,
    lag,
    needs_pd,
    nn_emulation,
    nn_errors,
    play,
    run_pd,
)
from tests.studio.client import Client, served, tiny_studio
from torchbend.audio import io
from torchbend.audio.stream import Stream

pytestmark = [needs_pd, pytest.mark.audio]

ROOT = Path(__file__).resolve().parents[2]

BUFFERS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
"""Every buffer size nn~ takes from a Pd patch (its argument, or ``[bufsize N(``)."""

LENGTH = 32768
"""Samples played: whole buffers of every size, 0.74 s at 44.1 kHz."""


@pytest.fixture(scope="module")
def voice() -> np.ndarray:
    """The shipped voice, its first LENGTH samples, mono: ``[1, LENGTH]``."""
    audio, _ = io.load(ROOT / "assets" / "sounds" / "voice.wav", 44100)
    return audio.mean(0, keepdim=True)[:, :LENGTH].numpy().astype(np.float32)


def test_the_readme_export_plays_in_pd_at_every_buffer_as_python_streams_it(tmp_path, voice):
    """``torchbend export tiny_ddsp --config bends.json --format nntilde -o bended.ts``, as
    the README runs it: in Pd, at each buffer, the file called buffer by buffer (nothing
    lost or reordered by nn~), and that is what Python streams (state carried from one
    buffer to the next: no click at any buffer's start)."""
    specs = readme_bends(tmp_path / "bends.json")
    file = tmp_path / "bended.ts"
    done = in_process(
        "export",
        "tiny_ddsp",
        "--config",
        "bends.json",
        "--format",
        "nntilde",
        "-o",
        "bended.ts",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run = play(file, voice, tmp_path / "pd", buffers=BUFFERS)
    compare(file, voice, run)
    python = python_render(torch.from_numpy(voice), specs, block=2048).numpy()
    late = delays(file)  # what `torchbend check --latency` reports, but the model's own
    for n in BUFFERS:
        played = run.outputs[n][:, late[n] :]
        error = np.abs(played - python[:, : played.shape[-1]]).max()
        assert error < 1e-4, f"buffer {n}: Pd differs from Python's stream by {error}"
    fifo = {row.buffer: row.fifo for row in tb.export.latency(file).rows}
    assert [fifo[n] for n in BUFFERS] == [256, 256] + [0] * 6  # TinyDDSP's hop


def test_the_file_streams_where_each_buffer_alone_would_click(tmp_path, voice):
    """The bug the real host showed: a file whose buffers each start from silence. The
    comparison above catches it: a model exported without streaming gives Pd buffers that
    differ from Python's stream at every buffer's start."""
    bended = tb.BendedModule(tb.models.load("tiny_rave"))  # not streaming
    bended.trace(x=torch.zeros(2, 1, 4096))
    file = tmp_path / "plain.ts"
    torch.jit.save(torch.jit.script(_NnFile(bended.module)), str(file))
    run = play(file, voice, tmp_path / "pd", buffers=(2048,))
    compare(file, voice, run)  # Pd plays the file as called: the file is what is wrong
    streamed = tb.models.load("tiny_rave").set_streaming(True)
    with torch.no_grad():
        python = streamed(torch.from_numpy(voice)[None])[0].numpy()
    played = run.outputs[2048][:, lag(2048) :]
    assert np.abs(played - python[:, : played.shape[-1]]).max() > 0.05


class _NnFile(torch.nn.Module):
    """An nn~ file of a model as it is, without torchbend's export (what a user scripting a
    model that was not put in streaming mode writes)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("forward_params", torch.tensor([1, 1, 1, 1]))
        self.forward_input_labels = ["audio"]
        self.forward_output_labels = ["audio"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    @torch.jit.export
    def get_methods(self) -> list[str]:
        return ["forward"]

    @torch.jit.export
    def get_attributes(self) -> list[str]:
        return []


@pytest.mark.parametrize("name", ["tiny_rave", "tiny_ddsp"])
def test_encode_then_decode_in_pd_plays_the_latent_round_trip(tmp_path, voice, name):
    """A shipped model's encode (1 -> its latent channels, at its ratio) wired into its decode
    in Pd, as a patch does to bend the latent between them."""
    model = tb.models.load(name).set_streaming(True)
    bended = tb.BendedModule(model)
    x = torch.zeros(2, 1, 4096)
    z = model.encode(x).detach()
    for method, inputs in (("forward", {"x": x}), ("encode", {"x": x}), ("decode", {"z": z})):
        bended.trace(method, **inputs)
    file = tmp_path / f"{name}.ts"
    tb.export.nntilde(bended, file, methods=["forward", "encode", "decode"])
    chain = ("encode", "decode")
    run = play(file, voice, tmp_path / "pd", methods=chain, buffers=(256, 2048))
    compare(file, voice, run, methods=chain)
    assert np.abs(run.outputs[2048]).max() > 0.01  # sound, not silence


@pytest.fixture(scope="module")
def gallery(tmp_path_factory) -> Path:
    """A folder laid out as the repository is, where examples/07_export_for_nntilde.py has
    written its nn~ file (out/examples/07/tiny_ddsp_bent.ts), as a user runs it."""
    folder = tmp_path_factory.mktemp("gallery")
    out = folder / "out" / "examples" / "07"
    out.mkdir(parents=True)
    example = runpy.run_path(str(ROOT / "examples" / "07_export_for_nntilde.py"))
    example["export_for_nntilde"](out, smoke=True)  # its part 1, forward only, as --smoke does
    (folder / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "07_play_in_pd.pd", folder / "examples")
    (folder / "assets" / "sounds").mkdir(parents=True)
    shutil.copy(ROOT / "assets" / "sounds" / "voice.wav", folder / "assets" / "sounds")
    return folder


def test_the_gallery_export_plays_in_pd(tmp_path, voice, gallery):
    """examples/07_export_for_nntilde.py's file, as the example writes it."""
    file = gallery / "out" / "examples" / "07" / "tiny_ddsp_bent.ts"
    run = play(file, voice, tmp_path / "pd", buffers=(64, 512, 4096))
    compare(file, voice, run)
    expected = nn_emulation(file, voice, 4096)
    assert np.abs(expected).max() > 0.01  # it plays sound, not silence


def controlled_rave(path: Path) -> None:
    """TinyRave streaming, with a control of each kind nn~ sets: a ramped float on an
    activation, an enum (an int with named choices), a bool, and a float that bends a weight
    again at each change; exported with the safety stage."""
    bended = tb.BendedModule(tb.models.load("tiny_rave").set_streaming(True))
    bended.trace(x=torch.zeros(2, 1, 4096))
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 8.0), ramp=2)
    steps = tb.BendingParameter(
        "steps", 0, range=(0, 3), widget=tb.Widget(choices=("a", "b", "c", "d"))
    )
    flip = tb.BendingParameter("flip", True)
    weight = tb.BendingParameter("weight", 1.0, range=(0.0, 4.0))
    bended.bend(tb.Scale(gain), "decoder_0$")
    bended.bend(tb.Roll(steps), "encoder_2$")
    bended.bend(tb.Invert(active=flip), "decoder_1$")
    bended.bend(tb.Scale(weight), r"decoder\.2\.weight")
    tb.export.nntilde(bended, path, safety=True)


CHANGES = [
    (5000, "set gain 6", lambda f: f.set_gain(6.0)),
    (9000, "set steps 2", lambda f: f.set_steps(2)),
    (13000, "set flip 0", lambda f: f.set_flip(False)),
    (17000, "set weight 3.5", lambda f: f.set_weight(3.5)),
    (21000, "set gain 0.25", lambda f: f.set_gain(0.25)),
    (25000, "set flip true", lambda f: f.set_flip(True)),
    (27000, "set steps d", lambda f: f.set_steps(3)),
]
"""Control changes from a patch, mid-render: the message Pd sends, what the setter must get."""


def test_controls_set_from_pd_mid_render_play_as_the_file_is_called(tmp_path, voice):
    """Float, enum, bool and weight controls changed by ``[set NAME VALUE(`` messages while
    Pd plays (numbers, as a patch's number boxes send them, and words), with ramps and the
    safety stage: Pd's output is the file called buffer by buffer with each setter called
    before the buffer nn~ computes next (a bool set from the number 0 is off, an enum takes
    its entry's name)."""
    file = tmp_path / "controls.ts"
    controlled_rave(file)
    messages = [Message(sample, text, apply) for sample, text, apply in CHANGES]
    run = play(file, voice, tmp_path / "pd", buffers=(256, 2048), messages=messages)
    compare(file, voice, run, messages=messages)
    unchanged = nn_emulation(file, voice, 2048)
    for sample, text, _ in CHANGES:
        moved = np.abs(run.outputs[2048] - unchanged)[:, sample + 4096 :].max()
        assert moved > 1e-3, f"{text!r} changed nothing"


HARNESS = """#N canvas 0 0 400 300 10;
#X obj 0 0 loadbang;
#X obj 0 20 t b b;
#X obj 0 40 delay {turn};
#X msg 0 60 \\; gain 1.5;
#X obj 0 80 delay {stop};
#X obj 0 100 t b b;
#X msg 0 120 write -wave -bytes 4 bent.wav bent;
#X obj 0 140 soundfiler;
#X msg 0 160 \\; pd quit;
#X connect 0 0 1 0;
#X connect 1 1 2 0;
#X connect 2 0 3 0;
#X connect 1 0 4 0;
#X connect 4 0 5 0;
#X connect 5 1 6 0;
#X connect 6 0 7 0;
#X connect 5 0 8 0;
"""
"""A second patch, opened with the example's: it turns the example's gain knob through its
receiver, records what the example recorded, and quits Pd."""


def test_the_example_patch_plays_the_gallery_file_and_its_knob(tmp_path, gallery):
    """examples/07_play_in_pd.pd, opened in Pd as it is (its loadbang reads the shipped voice,
    sends [bufsize 2048( and plays): what it plays is the gallery file called as nn~ calls it,
    and its gain receiver reaches the file's gain control."""
    turn, stop = 16000, LENGTH
    harness = HARNESS.format(
        turn=f"{(turn - turn % 64 + 32) * 1000 / 44100:.6f}", stop=f"{stop * 1000 / 44100:.6f}"
    )
    (gallery / "harness.pd").write_text(harness)
    _, log = run_pd(gallery / "examples", ["-open", "07_play_in_pd.pd", "-open", "../harness.pd"])
    assert "bent.wav" in log and not nn_errors(log), log[-2000:]
    played, _ = soundfile.read(gallery / "bent.wav", dtype="float32", always_2d=True)
    file = gallery / "out" / "examples" / "07" / "tiny_ddsp_bent.ts"
    audio, _ = io.load(gallery / "assets" / "sounds" / "voice.wav", 44100)
    audio = audio[:1, :LENGTH].numpy()
    turned = [Message(turn, "gain 1.5", lambda f: f.set_gain(1.5))]
    run = PdRun({2048: played.T[:, : LENGTH - 4096]}, log)
    compare(file, audio, run, messages=turned)


def test_the_studios_export_plays_in_pd_as_the_studio_streams(tmp_path, voice):
    """The studio's "Export .ts" (POST /api/export, then the download): the bending on the
    page, streaming, played in Pd at two buffers as nn~ calls it, and as the studio's model
    streams the sound."""
    studio = tiny_studio(tmp_path / "out")
    with served(studio) as server:
        client = Client(server.url)
        client.ok("POST", "/api/bendings", STUDIO_MASK)
        exported = client.ok("POST", "/api/export", {"name": "from-the-studio"})
        status, data = client.get(exported["url"])
    assert status == 200 and exported["name"] == "from-the-studio.ts"
    assert "buffer" in exported["latency"] and "ok" in exported["report"]
    file = tmp_path / "downloaded.ts"
    file.write_bytes(data)
    run = play(file, voice, tmp_path / "pd", buffers=(64, 2048))
    compare(file, voice, run)
    with torch.no_grad():
        python = Stream(studio.bended, block_size=2048).process(torch.from_numpy(voice)).numpy()
    late = delays(file)
    for n in (64, 2048):
        played = run.outputs[n][:, late[n] :]
        assert np.abs(played - python[:, : played.shape[-1]]).max() < 1e-4


STUDIO_MASK = {
    "callback": {"class": "Mask", "args": {"prob": 0.5, "seed": 0, "dim": -2}},
    "patterns": ["decoder_0"],
}
