"""Graph rewriting: activation slots inserted in a copy of the traced graph."""

from __future__ import annotations

import copy

import torch
from torch import nn

import torchbend as tb
from torchbend.engine.rewriting import ActivationSlot, build_graph_module, graph_module_record
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
    gm = build_graph_module(result, net, {"a": slot}, "G")
    assert torch.allclose(gm(x), (net.a(x) + 1) * 3 * 2)
    empty = build_graph_module(result, net, {"a": ActivationSlot("a", [])}, "G")
    assert torch.equal(empty(x), net(x))


def test_compiled_graph_modules_keep_the_flow_steps_of_their_trace():
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    x = torch.randn(2, 3)
    traced = bended.trace(x=x)
    bended.bend(tb.Scale(2.0), "a$")
    gm = bended.graph_module()
    record = graph_module_record(gm)
    assert gm.meta["torchbend"] is record
    assert record.flow_steps == tuple(traced.flow_steps) == tuple(bended.flow_steps())
    assert [s.checked for s in record.flow_steps] == ["runtime"]
    assert record.guard_facts == traced.guard_facts
    assert record.paths == {"_tb_a": "a"}
    assert list(record.slots) == ["a"] and record.slots["a"] is gm.get_submodule("_tb_slots.a")
    copied = copy.deepcopy(gm)
    kept = graph_module_record(copied)
    assert (kept.flow_steps, kept.guard_facts, kept.paths) == (
        record.flow_steps,
        record.guard_facts,
        record.paths,
    )
    assert kept.slots["a"] is copied.get_submodule("_tb_slots.a")  # the copy's own slot
