"""Tests for TinyRave: shapes, streaming == offline, bended tracing == eager."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

import torchbend as tb
from torchbend.models import TinyRave


@pytest.fixture(scope="module")
def model() -> TinyRave:
    torch.manual_seed(0)
    return TinyRave().eval()


def test_shapes_and_ratio(model: TinyRave) -> None:
    assert model.ratio == 16 and model.latent_size == 16 and model.latency == 240
    x = torch.randn(3, 1, 4 * model.ratio)
    with torch.no_grad():
        z = model.encode(x)
        assert z.shape == (3, 16, 4)
        y = model.decode(z)
        assert y.shape == x.shape
        torch.testing.assert_close(model(x), y)


def test_other_sizes() -> None:
    small = TinyRave(latent_size=4, hidden=(8, 12), bands=4, taps_per_band=8)
    assert small.ratio == 4 and small.latency == 28
    assert small(torch.randn(1, 1, 64)).shape == (1, 1, 64)


def test_silence_gives_exact_silence(model: TinyRave) -> None:
    """No bias anywhere and odd activations: nothing comes out of nothing, bent or not."""
    assert all(not name.endswith("bias") for name, _ in model.named_parameters())
    with torch.no_grad():
        assert torch.equal(model(torch.zeros(1, 1, 4096)), torch.zeros(1, 1, 4096))


def test_validation(model: TinyRave) -> None:
    with pytest.raises(ValueError, match=r"mono audio \[batch, 1, time\], got \[1, 2, 512\]"):
        model.encode(torch.randn(1, 2, 512))
    with pytest.raises(ValueError, match=r"multiple of its ratio 16, got 1000"):
        model(torch.randn(1, 1, 1000))
    with pytest.raises(ValueError, match=r"two entries\), got \[8\]"):
        TinyRave(hidden=(8,))
    with pytest.raises(ValueError, match=r"latent_size must be positive, got 0"):
        TinyRave(latent_size=0)
    with pytest.raises(ValueError, match=r"at least 2 bands and 2 taps per band, got 1 and 16"):
        TinyRave(bands=1)


@pytest.mark.parametrize("block", [64, 256, 2048])
def test_streaming_matches_offline(model: TinyRave, block: int) -> None:
    torch.manual_seed(1)
    x = 0.5 * torch.randn(2, 1, 4096)
    with torch.no_grad():
        offline = model(x)
        model.set_streaming(True)
        try:
            streamed = torch.cat([model(b) for b in x.split(block, -1)], -1)
            model.reset_cache()
            again = torch.cat([model(b) for b in x.split(block, -1)], -1)
        finally:
            model.set_streaming(False)
    torch.testing.assert_close(streamed, offline, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(again, streamed)


def test_streaming_encode_decode_split(model: TinyRave) -> None:
    x = 0.5 * torch.randn(1, 1, 2048)
    with torch.no_grad():
        offline = model.encode(x)
        model.set_streaming(True)
        try:
            z = torch.cat([model.encode(b) for b in x.split(512, -1)], -1)
        finally:
            model.set_streaming(False)
    torch.testing.assert_close(z, offline, atol=1e-5, rtol=1e-4)


def test_bended_tracing_matches_eager(model: TinyRave) -> None:
    x = 0.5 * torch.randn(1, 1, 2048)
    with torch.no_grad():
        z = model.encode(x)
        bended = tb.BendedModule(model)
        bended.trace("encode", x=x)
        bended.trace("decode", z=z)
        bended.trace("forward", x=x)
        torch.testing.assert_close(bended.encode(x), z, atol=0, rtol=0)
        torch.testing.assert_close(bended.decode(z), model.decode(z), atol=0, rtol=0)
        torch.testing.assert_close(bended(x), model(x), atol=0, rtol=0)
        assert any("encoder" in name for name in bended.activation_names("encode"))
        bended.bend(tb.Scale(0.0), r"decoder\.0\.weight")
        assert not torch.equal(bended.decode(z), model.decode(z))
        bended.reset()
        torch.testing.assert_close(bended.decode(z), model.decode(z), atol=0, rtol=0)


def test_copy_and_pickle(model: TinyRave) -> None:
    x = torch.randn(1, 1, 512)
    with torch.no_grad():
        for other in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            torch.testing.assert_close(other(x), model(x))


def test_torchscript(model: TinyRave) -> None:
    x = 0.5 * torch.randn(2, 1, 2048)
    scripted = torch.jit.script(model)
    with torch.no_grad():
        torch.testing.assert_close(scripted(x), model(x))
        torch.testing.assert_close(scripted.encode(x), model.encode(x))
        offline = model(x)
        model.set_streaming(True)
        try:
            scripted = torch.jit.script(model)
            streamed = torch.cat([scripted(b) for b in x.split(512, -1)], -1)
        finally:
            model.set_streaming(False)
    torch.testing.assert_close(streamed, offline, atol=1e-5, rtol=1e-4)
