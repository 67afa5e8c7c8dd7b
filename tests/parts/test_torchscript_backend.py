"""TorchScript files bend too: tb.BendedModule(torch.jit.load(path)) traces forward through
torch's TorchScript-to-export converter."""

from __future__ import annotations

import pytest
import torch

import torchbend as tb


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ts") / "tiny_rave.ts"
    torch.jit.save(torch.jit.script(tb.models.load()), str(path))
    return torch.jit.load(str(path))


def test_a_torchscript_file_traces_bends_and_resets(loaded):
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(0))
    expected = loaded(x)
    bended = tb.BendedModule(loaded)
    bended.trace(x=x)
    assert bended.view().traced_by("forward") == "torchscript"
    assert torch.allclose(bended(x), expected, atol=1e-5)
    names = bended.activation_names()
    assert len(names) > 20
    keys = bended.bend(tb.Mask(0.5, dim=-2, seed=0), names[len(names) // 2] + "$")
    bended.bend(tb.Scale(0.5), r"decoder\.5\.weight")
    assert keys == [f"forward:{names[len(names) // 2]}"]
    assert not torch.allclose(bended(x), expected, atol=1e-3)
    assert torch.equal(loaded(x), expected)  # the file's own module is untouched
    bended.reset()
    assert torch.equal(bended(x), bended(x)) and torch.allclose(bended(x), expected, atol=1e-5)
    assert bended.encode(x).shape == (1, 16, 8)  # other methods run through the module


def test_only_forward_of_a_torchscript_file_converts(loaded):
    bended = tb.BendedModule(loaded)
    with pytest.raises(tb.TracingError, match="only forward of a TorchScript module"):
        bended.trace("encode", x=torch.zeros(1, 1, 2048))
