"""TorchScript files bend too: tb.BendedModule(torch.jit.load(path)) traces forward through
torch's TorchScript-to-export converter."""

from __future__ import annotations

import re

import pytest
import torch

import torchbend as tb


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ts") / "tiny_rave.ts"
    torch.jit.save(torch.jit.script(tb.models.load("tiny_rave")), str(path))
    return torch.jit.load(str(path))


def test_a_torchscript_file_traces_bends_and_resets(loaded):
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(0))
    expected = loaded(x)
    bended = tb.BendedModule(loaded)
    bended.trace(x=x)
    assert bended.traced_by("forward") == "torchscript"
    assert torch.allclose(bended(x), expected, atol=1e-5)
    names = bended.activation_names()
    assert len(names) > 10
    keys = bended.bend(tb.Mask(0.5, dim=-2, seed=0), names[len(names) // 2] + "$")
    bended.bend(tb.Scale(0.5), r"decoder\.2\.weight")
    assert keys == [f"forward:{names[len(names) // 2]}"]
    assert not torch.allclose(bended(x), expected, atol=1e-3)
    assert torch.equal(loaded(x), expected)  # the file's own module is untouched
    z = loaded.encode(x)
    assert not torch.allclose(bended.decode(z), loaded.decode(z), atol=1e-3)  # untraced, bent
    longer = torch.randn(1, 1, 4096, generator=torch.Generator().manual_seed(2))
    assert bended(longer).shape == (1, 1, 4096)  # a new graph, checked on the bent weights
    assert torch.equal(loaded(x), expected)
    bended.reset()
    assert torch.equal(bended(x), bended(x)) and torch.allclose(bended(x), expected, atol=1e-5)
    assert bended.encode(x).shape == (1, 16, 128)  # other methods run through the module


def test_every_method_of_a_torchscript_file_converts(loaded):
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(1))
    z = loaded.encode(x)
    bended = tb.BendedModule(loaded)
    bended.trace("encode", x=x)
    bended.trace("decode", z=z)
    assert bended.traced_by("encode") == bended.traced_by("decode") == "torchscript"
    assert torch.allclose(bended.encode(x), z, atol=1e-5)
    assert torch.allclose(bended.decode(z), loaded.decode(z), atol=1e-5)
    decoder = bended.activation_names("decode")
    keys = bended.bend(tb.Scale(0.0), "decode:" + decoder[len(decoder) // 2] + "$")
    assert len(keys) == 1
    assert torch.allclose(bended.encode(x), z, atol=1e-5)  # encode has no such activation
    assert not torch.allclose(bended.decode(z), loaded.decode(z), atol=1e-3)
    bended.reset()
    assert torch.allclose(bended.decode(z), loaded.decode(z), atol=1e-5)


class CountsDown(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = 0
        while bool(x.sum() > 0):  # a loop on tensor values: torch's converter refuses it
            x = x - 1
            n += 1
        return x * n


def test_a_method_torch_cannot_convert_is_a_clear_error():
    scripted = torch.jit.script(CountsDown())
    with pytest.raises(tb.TracingError, match=r"could not convert TorchScript CountsDown\.forward"):
        tb.BendedModule(scripted).trace(x=torch.ones(2))


class CannotStream(tb.models.TinyRave):
    """TinyRave without its streaming mode, so that its nn~ file is offline (a model that can
    stream is exported streaming, and torch's converter refuses a streaming file: its caches
    are resized inside an ``if``, a prim::SetAttr that torch.cond does not take)."""

    set_streaming = None  # type: ignore[assignment]


def test_a_bent_nntilde_file_is_written_back_for_nntilde(tmp_path):
    torch.manual_seed(0)
    source = tb.BendedModule(CannotStream())
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(3))
    source.trace(x=x)
    with pytest.warns(tb.audio.StreamWarning, match="does not stream"):  # offline on purpose
        tb.export.nntilde(source, tmp_path / "model.ts", clicks="warn")
    loaded = torch.jit.load(str(tmp_path / "model.ts"))
    bended = tb.BendedModule(loaded)
    bended.trace(x=x)
    name = next(n for n in bended.weight_names if n.endswith("decoder_0.weight"))
    bended.bend(tb.Scale(0.5), re.escape(name) + "$")
    with pytest.warns(tb.audio.StreamWarning, match="does not stream"):
        report = tb.export.nntilde(bended, tmp_path / "bent.ts", clicks="warn")
    assert "forward" in str(report)
    bent = torch.jit.load(str(tmp_path / "bent.ts"))
    assert torch.allclose(bent(x), bended(x), atol=1e-5)
    assert not torch.allclose(bent(x), loaded(x), atol=1e-3)
    assert torch.equal(bent.forward_params, loaded.forward_params)
    assert bent.get_methods() == loaded.get_methods()
    # forward alone needs blocks of 16: the graph bent was the one in the FIFO, put back.
    assert loaded.fifo_block == bent.fifo_block == 16

    bended.bend(tb.Scale(0.0), bended.activation_names()[5] + "$")  # traced on one item
    with pytest.raises(tb.ExportError, match="Trace it on a batch of 2 or more"):
        tb.export.nntilde(bended, tmp_path / "again.ts", clicks="warn")
    assert not (tmp_path / "again.ts").exists()
