"""Modules that declare themselves leaves, and buffers left as the model had them."""

from __future__ import annotations

import torch

import torchbend as tb
from torchbend.models import CachedConv1d


def test_cached_convs_are_leaves_and_stream_at_any_batch():
    torch.manual_seed(0)
    conv = CachedConv1d(1, 2, 3)
    conv.streaming = True
    net = torch.nn.Sequential(conv, torch.nn.Tanh())
    bended = tb.BendedModule(net)
    bended.trace(input=torch.randn(1, 1, 32))
    assert [a.name for a in bended.activations(op="call_module")] == ["_0", "_1"]
    conv.reset_cache()
    x = torch.randn(4, 1, 64)
    expected = torch.cat([net(x[..., :32]), net(x[..., 32:])], -1)
    conv.reset_cache()
    out = torch.cat([bended(x[..., :32]), bended(x[..., 32:])], -1)
    assert torch.allclose(out, expected, atol=1e-6)


def test_tracing_leaves_buffers_without_autograd_history():
    model = tb.models.TinyRave().set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, 512))
    assert all(b.grad_fn is None for b in model.buffers())
