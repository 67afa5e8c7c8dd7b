"""Graph rewriting: activation slots inserted in a copy of the traced graph."""

from __future__ import annotations

import torch
from torch import nn

import torchbend as tb
from torchbend.rewriting import ActivationSlot, build_graph_module
from torchbend.tracing import BendingTracer


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        y = self.a(x)
        if y.sum() > -1e9:
            return y * 2
        return y


def test_empty_slot_is_identity_and_callbacks_run_in_order():
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(2, 3)
    result = BendingTracer().trace_method(net, "forward", {"x": x})
    slot = ActivationSlot("forward:a", [tb.Bias(1.0), tb.Scale(3.0)])
    gm = build_graph_module(result.graph, net, result.constants, {"a": slot}, "G")
    assert torch.allclose(gm(x), (net.a(x) + 1) * 3 * 2)
    empty = build_graph_module(
        result.graph, net, result.constants, {"a": ActivationSlot("a", [])}, "G"
    )
    assert torch.equal(empty(x), net(x))
