"""The studio on audio models built from public libraries (asteroid-filterbanks, nnAudio), named
``module:factory`` as a user names their own: they render in one pass, and every part of the
page's path works on their graphs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import torchbend as tb
from tests.studio.client import Client, decode_wav, served
from torchbend.audio.render import render, trace_audio
from torchbend.audio.safety import FILE_CEILING
from torchbend.models.reference import load_model
from torchbend.studio import Studio

pytest.importorskip("asteroid_filterbanks")
pytest.importorskip("nnAudio")
pytestmark = pytest.mark.audio


@pytest.mark.parametrize("factory", ["separator", "stft_mask"])
def test_a_third_party_model_opens_bends_and_renders(factory: str, tmp_path: Path) -> None:
    reference = f"tests.sweep.third_party:{factory}"
    studio = Studio(load_model(reference), reference, output=tmp_path / "out")
    before = {k: v.clone() for k, v in studio.bended.module.state_dict().items()}
    assert studio.block_size is None  # no streaming mode: one pass over the sound
    with served(studio) as server:
        client = Client(server.url)
        graph = client.ok("GET", "/api/graph")
        names = [n["name"] for n in graph["nodes"]]
        assert names == [n.name for n in studio.bended.graph().nodes]
        bendable = [r["name"] for r in client.ok("GET", "/api/activations")["rows"] if r["tensor"]]
        target = bendable[len(bendable) // 2]
        stats = client.ok("GET", f"/api/stats/activation?name={target}")
        traced = list(studio.bended.activation_shape(target))
        assert stats["shape"][:-1] == traced[:-1]  # over the first seconds of the sound
        weight = client.ok("GET", "/api/weights")["rows"][0]["name"]
        assert client.ok("GET", f"/api/stats/weight?name={weight}")["kind"] == "weight"
        bending = {
            "callback": {"class": "Scale", "args": {"scale": 0.25}},
            "patterns": [target + "$"],
        }
        assert client.ok("POST", "/api/bendings", bending)["keys"] == [[f"forward:{target}"]]
        # the whole sound: the asteroid STFT gives a length of its own to lengths not a
        # multiple of its hop, which the studio refuses (422) as `torchbend bend` does
        rendered = client.ok("POST", "/api/render", {"sound": "pad"})
        assert rendered["differs"] is True
        heard, _ = decode_wav(client.get(rendered["audio"]["bended"])[1])
        if factory == "separator":
            status, error = client.post("/api/render", {"sound": "pad", "seconds": 0.5})
            assert status == 422 and "audio to audio of the same length" in error["error"]
        client.ok("POST", "/api/configs", {"name": "third"})
    bended = tb.BendedModule(load_model(reference))
    audio = studio.library.get("pad").audio
    trace_audio(bended, "forward", audio[None])  # its argument by position, as the studio
    bended.bend(tb.BendingConfig.load(studio.output / "configs" / "third.json"))
    stage = tb.audio.Safety(44100, ceiling=FILE_CEILING)  # the studio's files' stage
    python, _ = render(bended, audio, 44100, "forward", None, safety=stage)
    assert torch.allclose(heard, python.clamp(-1, 1), atol=1 / 32767)
    after = studio.bended.module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
