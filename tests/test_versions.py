"""Versions of the weights, switching between them and interpolating."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb


def model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2))


def test_write_set_version_and_context():
    m = model(0)
    x = torch.randn(4, 3)
    bended = tb.BendedModule(m)
    bended.trace(input=x)
    plain = bended(x)
    bended.bend(tb.Scale(0.5), r"0\.weight")
    halved = bended(x)
    bended.write("half")
    bended.reset()
    assert torch.equal(bended(x), plain)
    assert bended.version == "original" and bended.versions == ["original", "half"]
    with bended.set_version("half"):
        assert bended.version == "half"
        assert torch.equal(bended(x), halved)
    assert bended.version == "original" and torch.equal(bended(x), plain)
    bended.set_version("half")
    assert torch.equal(bended(x), halved)
    bended.bend(tb.Scale(2.0), r"0\.weight")
    assert torch.allclose(bended(x), plain)
    with pytest.raises(
        tb.BendingError, match=r"no version 'twice'; versions: \['original', 'half'\]"
    ):
        bended.set_version("twice")


def test_create_version_and_interpolate():
    a, b = model(0), model(1)
    x = torch.randn(4, 3)
    bended = tb.BendedModule(a)
    bended.trace(input=x)
    bended.create_version("other", b)
    with bended.set_version("other"):
        assert torch.allclose(bended(x), b(x))
    with bended.interpolate(1.0, other=1.0):
        mixed = {k: (a.state_dict()[k] + b.state_dict()[k]) / 2 for k in a.state_dict()}
        c = model(2)
        c.load_state_dict(mixed)
        assert torch.allclose(bended(x), c(x), atol=1e-6)
    assert torch.equal(bended(x), a(x))
    with pytest.raises(tb.BendingError, match="interpolate\\(\\) takes weights of versions"):
        bended.interpolate(nope=1.0)


def test_create_version_with_mismatched_keys_lists_them():
    bended = tb.BendedModule(model(0))
    state = model(1).state_dict()
    state["extra.weight"] = torch.zeros(1)
    del state["2.bias"]
    with pytest.raises(
        tb.BendingError, match=r"missing \['2.bias'\], unexpected \['extra.weight'\]"
    ):
        bended.create_version("bad", state)
    bended.create_version("partial", {"0.weight": torch.zeros(3, 3)}, strict=False)
    bad_shape = {**model(1).state_dict(), "0.weight": torch.zeros(2, 2)}
    with pytest.raises(tb.BendingError, match="shape mismatch"):
        bended.create_version("shape", bad_shape, strict=False)
