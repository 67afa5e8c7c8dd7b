"""Graph surgery: copies that keep records, slots, keep until, cut from, guards stripped."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchbend.tracing import BendingTracer, DecisionChanged, TracedGraph, is_guard, record_of
from torchbend.tracing.surgery import (
    SLOTS,
    copy_graph,
    cut_from,
    insert_slots,
    is_slot,
    keep_until,
    strip_guards,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        y = self.a(x)
        if y.sum() > -1e9:
            return self.b(y) * 2
        return y


def traced() -> tuple[Net, TracedGraph]:
    torch.manual_seed(0)
    net = Net()
    return net, BendingTracer().trace_method(net, "forward", {"x": torch.randn(2, 3)})


def run(net: nn.Module, graph: torch.fx.Graph, *args: torch.Tensor) -> object:
    return torch.fx.GraphModule(net, graph)(*args)


def test_copies_keep_names_records_and_leave_the_graph_alone():
    _, result = traced()
    before = str(result)
    graph, nodes = copy_graph(result)
    assert str(graph) == before
    assert [n.name for n in graph.nodes] == [n.name for n in result.nodes]
    assert record_of(nodes["a"]) == record_of(next(n for n in result.nodes if n.name == "a"))
    assert record_of(nodes["a"]).shape == (2, 3)
    graph.erase_node(next(n for n in graph.nodes if n.op == "output"))
    assert str(result) == before


def test_slots_are_inserted_on_a_copy():
    torch.manual_seed(0)
    net = Net()
    result = BendingTracer().trace_method(net, "forward", {"x": torch.randn(2, 3)})
    before = str(result)
    graph = insert_slots(result, {"a"})
    assert str(result) == before
    slot = next(n for n in graph.nodes if n.op == "call_module" and n.target == f"{SLOTS}.a")
    source = slot.args[0]
    assert {u.name for u in source.users} == {slot.name}
    assert next(iter(slot.users)).name == "sum_1"


def test_slots_are_recognised_and_carry_their_activation_record():
    _, result = traced()
    graph = insert_slots(result, ["a", "b", "not_a_node"])
    slots = [n for n in graph.nodes if is_slot(n)]
    assert [n.args[0].name for n in slots] == ["a", "b"]
    assert not any(is_slot(n) for n in result.nodes)
    assert record_of(slots[0]) == record_of(slots[0].args[0])
    guard = next(n for n in graph.nodes if is_guard(n))
    assert guard.args[0].name == "gt"  # checks read traced values, not bent ones


def test_keep_until_returns_activations_and_stops_there():
    net, result = traced()
    x = torch.randn(2, 3)
    graph = keep_until(result, ["a"])
    out = run(net, graph, x)
    assert isinstance(out, dict) and list(out) == ["a"] and torch.equal(out["a"], net.a(x))
    assert "b" not in {n.name for n in graph.nodes}
    assert record_of(next(n for n in graph.nodes if n.name == "a")).is_tensor


def test_cut_from_makes_activations_inputs_and_drops_what_only_fed_them():
    net, result = traced()
    y = torch.randn(2, 3)
    graph = cut_from(result, ["a"])
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    assert [str(n.target) for n in placeholders] == ["a"]  # x only fed a
    assert record_of(placeholders[0]).shape == (2, 3)
    # The decision reads the injected activation: its check stays and runs on it.
    assert any(is_guard(n) for n in graph.nodes)
    assert torch.allclose(run(net, graph, y), net.b(y) * 2)
    assert "a" not in {str(n.target) for n in graph.nodes if n.op == "call_module"}
    with pytest.raises(DecisionChanged):
        run(net, graph, torch.full((2, 3), -1e9))


class Before(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        if x.sum() > -1e9:
            x = x * 2
        return self.b(self.a(x))


def test_cut_from_drops_checks_of_decisions_taken_before_the_activations():
    torch.manual_seed(0)
    net = Before()
    result = BendingTracer().trace_method(net, "forward", {"x": torch.randn(2, 3)})
    graph = cut_from(result, ["a"])
    assert [str(n.target) for n in graph.nodes if n.op == "placeholder"] == ["a"]
    assert not any(is_guard(n) or n.name in ("sum_1", "gt") for n in graph.nodes)
    y = torch.randn(2, 3)
    assert torch.allclose(run(net, graph, y), net.b(y))


def test_strip_guards_removes_every_check():
    _, result = traced()
    graph, _ = copy_graph(result)
    assert strip_guards(graph) == (1, [])
    assert not any(is_guard(n) for n in graph.nodes)
    assert strip_guards(graph) == (0, [])
    assert any(is_guard(n) for n in result.nodes)
