"""Size arithmetic of RAVE's exported methods put in the forms torch's converter takes: a
trim by nn~'s ``_params`` buffers made integer arithmetic, slices of sizes made views."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.tracing.script import Convertible
from torchbend.tracing.sizes import numbers_from_scalar_tensors, size_slices_as_views


class Trimmed(nn.Module):
    """Upsamples by 4 with one sample too many, then trims to the ratio ``decode_params``
    declares, as RAVE's ``decode`` trims its output."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(2, 1, 5, 4)
        self.register_buffer("decode_params", torch.tensor([2, 4, 1, 1]))

    @torch.jit.export
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        y = self.up(z)
        if y.shape[-1] > z.shape[-1] * self.decode_params[1]:
            y = y[..., : z.shape[-1] * self.decode_params[1]]
        return y


def _kinds(graph: torch.Graph) -> list[str]:
    return [n.kind() for n in graph.nodes()]


def test_a_trim_by_an_nntilde_ratio_is_a_decision_on_sizes() -> None:
    scripted = torch.jit.script(Trimmed())
    prepared = Convertible(scripted, "decode")
    graph = prepared.holder.graph
    [branch] = [n for n in graph.nodes() if n.kind() == "prim::If"]
    assert isinstance(branch.input().type(), torch.BoolType)
    assert branch.input().node().kind() in ("aten::lt", "aten::gt")  # on ints: a size check
    reads = {n.s("name") for n in graph.findAllNodes("prim::GetAttr")}
    assert "decode_params" not in reads  # nn~'s contract, read as the constant it is
    z = torch.randn(2, 2, 16)
    assert torch.equal(prepared.holder(z), scripted.decode(z))
    assert prepared.holder(z).shape[-1] == 64


def test_a_file_that_trims_by_its_ratio_traces_and_bends() -> None:
    scripted = torch.jit.script(Trimmed())
    bended = tb.BendedModule(scripted)
    z = torch.randn(2, 2, 16, generator=torch.Generator().manual_seed(0))
    bended.trace("decode", z=z)
    assert bended.traced_by("decode") == "torchscript"
    longer = torch.randn(2, 2, 40, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(bended.decode(longer), scripted.decode(longer), atol=1e-6)
    bended.bend(tb.Scale(0.5), r"up\.weight")
    assert not torch.allclose(bended.decode(z), scripted.decode(z))


def _graph(fn: object) -> torch.Graph:
    graph = torch.jit.script(fn).graph
    torch._C._jit_pass_inline(graph)
    return graph


def _with_constant(graph: torch.Graph, name: str, value: torch.Tensor) -> None:
    """The graph's input ``name`` replaced by a constant, as freezing makes a buffer one."""
    [param] = [v for v in graph.inputs() if v.debugName().startswith(name)]
    with graph.insert_point_guard(next(iter(graph.nodes()))):
        param.replaceAllUsesWith(graph.insertConstant(value))
    torch._C._jit_pass_constant_propagation(graph)


def test_integer_arithmetic_is_rewritten_and_float_is_left_alone() -> None:
    def bound(x: torch.Tensor, ratio: torch.Tensor) -> int:
        return int(x.shape[-1] * ratio + 1)

    graph = _graph(bound)
    _with_constant(graph, "ratio", torch.tensor(4))
    assert numbers_from_scalar_tensors(graph) == 1
    torch._C._jit_pass_dce(graph)
    assert "aten::Int" not in _kinds(graph) and "aten::IntImplicit" not in _kinds(graph)
    run = torch._C._create_function_from_graph("bound", graph)
    assert run(torch.zeros(1, 1, 5), torch.tensor(0)) == 21  # ratio: the constant, 4

    float_graph = _graph(bound)
    _with_constant(float_graph, "ratio", torch.tensor(4.0))
    assert numbers_from_scalar_tensors(float_graph) == 0


@pytest.mark.parametrize("params", [torch.tensor([1.0, 4.0, 1.0, 1.0]), torch.tensor([4, 1])])
def test_buffers_that_are_not_an_nntilde_contract_stay_buffers(params: torch.Tensor) -> None:
    module = Trimmed()
    module.decode_params = params
    holder = Convertible(torch.jit.script(module), "decode").holder
    reads = {n.s("name") for n in holder.graph.findAllNodes("prim::GetAttr")}
    assert "decode_params" in reads


class Leading(nn.Module):
    """Keeps its input's leading sizes to reshape by them, as RAVE's methods do."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size = x.shape[:-2]
        y = x.reshape(-1, 1, x.shape[-1]) * 2
        return y.reshape(batch_size + [-1, x.shape[-1]])  # noqa: RUF005 (RAVE's form)


def test_a_slice_of_sizes_becomes_the_sizes_of_a_view() -> None:
    scripted = torch.jit.script(Leading())
    holder = Convertible(scripted, "forward").holder
    slices = [n for n in holder.graph.findAllNodes("aten::slice")]
    assert not [n for n in slices if isinstance(n.output().type(), torch.ListType)]
    for shape in [(2, 3, 16), (2, 5, 3, 16)]:
        x = torch.randn(*shape)
        assert torch.equal(holder(x), scripted(x))
    bended = tb.BendedModule(scripted)
    bended.trace(x=torch.randn(2, 3, 16))
    assert bended.traced_by("forward") == "torchscript"
    x = torch.randn(3, 2, 40)
    assert torch.equal(bended(x), scripted(x))


def test_slices_it_cannot_rewrite_are_left_as_they_are() -> None:
    def middle(x: torch.Tensor) -> list[int]:
        return x.shape[1:2]  # needs the rank: not rewritten

    graph = _graph(middle)
    assert size_slices_as_views(graph) == 0


def test_leading_sizes_are_dropped_by_indexing_too() -> None:
    def tail(x: torch.Tensor) -> list[int]:
        return x.shape[1:]

    graph = _graph(tail)
    assert size_slices_as_views(graph) == 1
    torch._C._jit_pass_dce(graph)
    run = torch._C._create_function_from_graph("tail", graph)
    assert run(torch.zeros(2, 3, 4)) == [3, 4]
