"""The private TorchScript names ``torchbend/tracing/script.py`` relies on, each checked by
name, and what its preparation does to a method torch's converter could not take as is."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from torchbend.tracing.script import Convertible, attribute_value


def test_the_private_torchscript_names_exist():
    assert callable(torch._C._freeze_module)
    assert callable(torch.jit._recursive.wrap_cpp_module)
    for name in ("inline", "peephole", "constant_propagation", "dce"):
        assert callable(getattr(torch._C, f"_jit_pass_{name}"))


class Branchy(nn.Module):
    """Branches on a plain attribute and on an optional bias, as cached convolutions do."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3, padding=1)
        self.padding = 2
        self.mode = "sum"

    @torch.jit.export
    def shift(self, x: torch.Tensor) -> torch.Tensor:
        if self.padding:
            x = torch.nn.functional.pad(x, (self.padding, 0))
        bias = self.conv.bias  # typed Optional[Tensor] by nn.Conv1d
        if bias is not None:
            x = x + bias.mean()
        return self.conv(x) if self.mode == "sum" else x


def _kinds(module: torch.jit.ScriptModule) -> list[str]:
    return [n.kind() for n in module.graph.nodes()]


def test_decisions_of_attributes_are_settled_and_tensors_kept():
    scripted = torch.jit.script(Branchy())
    prepared = Convertible(scripted, "shift")
    assert "prim::If" not in _kinds(prepared.holder)
    assert set(prepared.attributes) == {"padding", "mode"}
    x = torch.randn(1, 2, 5)
    assert torch.allclose(prepared.holder(x), scripted.shift(x))
    reads = {n.s("name") for n in prepared.holder.graph.nodes() if n.kind() == "prim::GetAttr"}
    assert {"weight", "bias"} <= reads  # still read from the module: bendable


def test_attribute_values_are_hashable():
    scripted = torch.jit.script(Branchy())
    assert attribute_value(scripted, "padding") == 2
    assert attribute_value(scripted, "conv.padding") == (1,)
    assert hash(attribute_value(scripted, "conv.stride")) is not None


class Sized(nn.Module):
    """Branches on a size and on None-ness, and loops over a size."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor, scale: Optional[float] = None) -> torch.Tensor:  # noqa: UP045
        if scale is None:
            scale = 1.0
        for _ in range(x.size(0)):
            x = self.lin(x) * scale
        if x.size(1) > 2:
            x = x.relu()
        return x


def test_branches_and_loops_are_settled_on_the_example_and_their_facts_kept():
    scripted = torch.jit.script(Sized())
    prepared = Convertible(scripted, "forward")
    x = torch.randn(2, 3)
    flow = prepared.settle_flow(["x", "scale"], (x, None))
    assert flow is not None and flow.refused is None
    assert not {"prim::If", "prim::Loop"} & set(_kinds(prepared.holder))
    assert {("x", "shape", 0), ("x", "shape", 1)} <= flow.facts  # turns, branch
    assert flow.dropped == [1]  # None leaves the graph
    assert "aten::relu" in _kinds(prepared.holder)


def test_a_method_without_branches_is_left_as_it_is():
    prepared = Convertible(torch.jit.script(nn.Linear(2, 2)), "forward")
    assert prepared.settle_flow(["input"], (torch.randn(1, 2),)) is None
