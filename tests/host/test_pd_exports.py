"""The files the README, the gallery and the command export, played by the real nn~ in Pure
Data at every buffer size, sample for sample against the file called as nn~ calls it and
against what the Python API streams."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import torchbend as tb
from tests.pdhost import compare, lag, needs_pd, nn_emulation, play
from tests.cli.test_readme_commands import python_render, readme_bends
from tests.command import in_process
from torchbend.audio import io

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
    done = in_process("export", "tiny_ddsp", "--config", "bends.json", "--format", "nntilde",
                      "-o", "bended.ts", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = play(file, voice, tmp_path / "pd", buffers=BUFFERS)
    compare(file, voice, run)
    python = python_render(torch.from_numpy(voice), specs, block=2048).numpy()
    for n in (256, 2048, 8192):
        played = run.outputs[n][:, lag(n) :]
        error = np.abs(played - python[:, : played.shape[-1]]).max()
        assert error < 1e-4, f"buffer {n}: Pd differs from Python's stream by {error}"


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


def test_encode_then_decode_in_pd_plays_the_latent_round_trip(tmp_path, voice):
    """A shipped model's encode (1 -> 16 signals at its ratio) wired into its decode in Pd,
    as a patch does to bend the latent between them."""
    model = tb.models.load("tiny_rave").set_streaming(True)
    bended = tb.BendedModule(model)
    x = torch.zeros(2, 1, 4096)
    for method, inputs in (("forward", {"x": x}), ("encode", {"x": x}),
                           ("decode", {"z": model.encode(x).detach()})):
        bended.trace(method, **inputs)
    file = tmp_path / "rave.ts"
    tb.export.nntilde(bended, file, methods=["forward", "encode", "decode"])
    chain = ("encode", "decode")
    run = play(file, voice, tmp_path / "pd", methods=chain, buffers=(256, 2048))
    compare(file, voice, run, methods=chain)


def test_the_gallery_export_plays_in_pd(tmp_path, voice, monkeypatch):
    """examples/07_export_for_nntilde.py's file, as the example writes it."""
    monkeypatch.setattr(sys, "argv", ["07", "--out", str(tmp_path), "--smoke"])
    runpy.run_path(str(ROOT / "examples" / "07_export_for_nntilde.py"), run_name="__main__")
    file = tmp_path / "tiny_ddsp_bent.ts"
    run = play(file, voice, tmp_path / "pd", buffers=(64, 512, 4096))
    compare(file, voice, run)
    expected = nn_emulation(file, voice, 4096)
    assert np.abs(expected).max() > 0.01  # it plays sound, not silence
