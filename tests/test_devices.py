"""Devices, dtypes and compilation of bended modules."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv1d(1, 8, 3, padding=1), nn.Tanh(), nn.Conv1d(8, 1, 3, padding=1))


def bent(m: nn.Module, x: torch.Tensor) -> tb.BendedModule:
    bended = tb.BendedModule(m)
    bended.trace(input=x)
    bended.bend(tb.Mask(0.5, dim=-2, seed=0), "_0$")
    bended.bend(tb.Noise(0.1, seed=1), r"2\.weight")
    bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0)), "_1$")
    return bended


def test_dtype_moves_carry_callbacks_graphs_and_bent_weights():
    x = torch.randn(1, 1, 64)
    bended = bent(model(), x)
    expected = bended(x)
    bended.double()
    assert all(p.dtype == torch.float64 for p in bended.module.parameters())
    assert bended.weight("2.weight").dtype == torch.float64
    assert all(
        b.dtype == torch.float64 for b in bended.callbacks.buffers() if b.is_floating_point()
    )
    assert torch.allclose(bended(x.double()).float(), expected, atol=1e-5)
    bended.bend(tb.Mask(0.5, seed=2), r"0\.bias")
    assert bended.weight("0.bias").dtype == torch.float64
    bended.update("gain", 0.5)
    assert bended(x.double()).dtype == torch.float64


@pytest.mark.slow
def test_torch_compile_with_inductor_matches_eager():
    x = torch.randn(1, 1, 64)
    bended = bent(model().eval(), x)
    compiled = torch.compile(bended)
    with torch.inference_mode():
        assert torch.allclose(compiled(x), bended(x), atol=1e-5)


@pytest.mark.gpu
@cuda
def test_cuda_move_and_bending_after_the_move():
    x = torch.randn(1, 1, 64)
    bended = bent(model(), x)
    expected = bended(x)
    bended.cuda()
    out = bended(x.cuda())
    assert out.device.type == "cuda"
    assert torch.allclose(out.cpu(), expected, atol=1e-5)
    bended.bend(tb.Mask(0.5, dim=-2, seed=3), "_1$")
    assert all(b.device.type == "cuda" for b in bended.callbacks.buffers())
    bended.update("gain", 0.5)
    bended.cpu()
    assert bended(x).device.type == "cpu"


@pytest.mark.gpu
@cuda
def test_cuda_half():
    x = torch.randn(1, 1, 64)
    bended = bent(model(), x)
    expected = bended(x)
    bended.cuda().half()
    assert torch.allclose(bended(x.cuda().half()).float().cpu(), expected, atol=2e-2)
