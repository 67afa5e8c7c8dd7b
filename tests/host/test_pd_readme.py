"""The nn~ files the README's Python writes (``depth.ts`` with its knob, ``bended.ts`` with its
``drive``), played in the real nn~ inside Pure Data: as the file is called buffer by buffer,
with the knob turned from the patch, and as Python renders the bended model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchbend as tb
from tests.audio.stateless import Centred, Recurrent, WaveNet, built
from tests.pdhost import Message, compare, delays, needs_pd, play
from tests.test_docs import ROOT, blocks

pytestmark = [needs_pd, pytest.mark.audio]

README = ROOT / "README.md"


def readme_block(marker: str) -> str:
    (code,) = [b.code for b in blocks(README) if marker in b.code]
    return code


@pytest.fixture
def noise() -> np.ndarray:
    generator = torch.Generator().manual_seed(0)
    return (0.3 * torch.randn(1, 16384, generator=generator)).numpy()


@pytest.mark.parametrize(
    ("marker", "file", "knob"),
    [
        ('tb.export.nntilde(bended, "depth.ts")', "depth.ts", ("depth", 0.2)),
        ('tb.export.nntilde(bended, "bended.ts")', "bended.ts", ("drive", 6.0)),
    ],
)
def test_the_readme_files_play_in_pd_with_their_knob(
    tmp_path, monkeypatch, noise, marker, file, knob
):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(readme_block(marker), str(README), "exec"), namespace)
    name, value = knob
    turned = [Message(8000, f"set {name} {value}", lambda f: getattr(f, f"set_{name}")(value))]
    run = play(tmp_path / file, noise, tmp_path / "pd", buffers=(64, 2048), messages=turned)
    compare(tmp_path / file, noise, run, messages=turned)
    bended = namespace["bended"]  # as exported: its knob where the README left it
    quiet = play(tmp_path / file, noise, tmp_path / "pd-still", buffers=(256,))
    with torch.no_grad():
        python = bended(torch.from_numpy(noise)[None])[0].numpy()
    played = quiet.outputs[256][:, delays(tmp_path / file)[256] :]
    assert np.abs(played - python[:, : played.shape[-1]]).max() < 1e-5


@pytest.mark.parametrize("kind", [WaveNet, Centred, Recurrent])
def test_a_model_that_keeps_no_state_plays_in_pd_once_converted(tmp_path, noise, kind):
    """A user's model without state (a WaveNet-style causal stack with residual adds, a
    centred-padding stack, a GRU): refused as it is, exported once converted by
    ``tb.audio.make_streaming``, and in Pd equal to the model's one pass late by nn~'s
    buffering and the latency the file reports (no click at any buffer)."""
    model = built(kind)
    params = {"forward": [1, 1, 1, 1]}
    with pytest.raises(tb.ExportError, match="does not stream"):
        tb.export.nntilde(model, tmp_path / "plain.ts", params=params)
    file = tmp_path / "converted.ts"
    tb.export.nntilde(tb.audio.make_streaming(model), file, params=params)
    run = play(file, noise, tmp_path / "pd", buffers=(64, 2048))
    compare(file, noise, run)
    with torch.no_grad():
        offline = model(torch.from_numpy(noise)[None])[0].numpy()
    late = delays(file, model=True)
    for n, played in run.outputs.items():
        played = played[:, late[n] :]
        error = np.abs(played - offline[:, : played.shape[-1]]).max()
        assert error < 1e-5, f"{kind.__name__} at {n}: {error}"
