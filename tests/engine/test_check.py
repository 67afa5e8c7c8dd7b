"""The self-check of traced graphs: a graph that does not compute what the module computes on the
inputs it was traced with is refused, naming the first module whose output differs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.engine.selfcheck import first_difference
from torchbend.tracing.backends import ConcreteBackend


class Head(nn.Module):
    """An LLM-style head: keeps the last ``keep`` positions (all of them for 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, h, keep: int = 0):
        return self.lin(h[:, -keep:, :] if keep else h)


class SwapTanh(ConcreteBackend):
    """A backend that returns a wrong graph (its tanh nodes compute sigmoid) for inputs of rank
    ``rank`` and up."""

    def __init__(self, rank: int = 0) -> None:
        super().__init__()
        self.rank = rank

    def trace(self, root, method, inputs, on_value):
        graph = super().trace(root, method, inputs, on_value)
        if inputs["x"].dim() < self.rank:
            return graph
        for node in graph.nodes:
            if node.target is torch.tanh:
                node.target = torch.sigmoid
        return graph


class TanhThenLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if x.dim() > 2:  # a decision on the rank: another rank, another graph
            x = x.flatten(0, 1)
        return self.lin(torch.tanh(x))


def test_a_wrong_graph_is_refused_naming_the_operation_and_the_line():
    bended = tb.BendedModule(TanhThenLinear(), backend=SwapTanh())
    with pytest.raises(tb.TracingError) as e:
        bended.trace(x=torch.randn(2, 4))
    message = str(e.value)
    assert "does not compute what the module computes" in message
    assert "first operation whose value differs is 'tanh' (call_function sigmoid" in message
    assert "test_check.py" in message and "self.lin(torch.tanh(x))" in message
    assert "check=False" in message
    assert bended.traced_methods == []


def test_check_false_keeps_the_graph_for_hot_loops():
    bended = tb.BendedModule(TanhThenLinear(), check=False, backend=SwapTanh())
    bended.trace(x=torch.randn(2, 4))
    assert bended.traced_methods == ["forward"]


def test_a_wrong_graph_is_refused_on_a_call_that_traces_too():
    bended = tb.BendedModule(TanhThenLinear(), backend=SwapTanh(rank=3))
    x = torch.randn(2, 4)
    bended.trace(x=x)
    with pytest.raises(tb.TracingError, match="does not compute"):
        bended(torch.randn(3, 2, 4))  # another rank: a new graph
    assert len(bended.graphs()) == 1 and torch.equal(
        bended(x), TanhThenLinear.forward(bended.module, x)
    )


def test_right_graphs_pass_with_bendings_randomness_and_state():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4)).train()
    bended = tb.BendedModule(model)
    bended.bend(tb.Scale(2.0), r"0\.weight")
    x = torch.randn(8, 4)
    running = model[2].running_mean.clone()
    bended.trace(input=x)
    bended.bend(tb.Noise(0.1, seed=0), "_0$")
    bended.trace(input=torch.randn(8, 4, dtype=torch.float64).float())
    assert torch.equal(model[2].running_mean, running)  # the check leaves no trace either


def test_the_check_keeps_the_random_stream_of_eager_calls():
    model = nn.Sequential(nn.Dropout(0.5)).train()
    x = torch.ones(4, 16)
    torch.manual_seed(1)
    expected = model(x)
    bended = tb.BendedModule(model)
    torch.manual_seed(1)
    got = bended(x) if bended.trace(input=x) is not None else None
    assert torch.equal(got, expected)


def test_head_with_an_int_argument_traces_right():
    head = Head()
    bended = tb.BendedModule(head)
    h = torch.randn(1, 5, 4)
    bended.trace(h=h)
    assert torch.equal(bended(h), head(h))


def test_first_difference_says_what_differs():
    a = torch.zeros(2, 3)
    assert first_difference(a, a.clone()) is None
    assert first_difference(a, a + 1e-9) is None
    assert "shape [3] instead of [2, 3]" in first_difference(a, torch.zeros(3))
    assert "max difference 1" in first_difference(a, a + 1)
    assert "2 output value(s) expected" in first_difference((a, a), a)
    nan = torch.tensor([float("nan")])
    assert first_difference(nan, nan.clone()) is None
    assert "expected 3, got 4" in first_difference((a, 3), (a, 4))


class IsinstanceHead(Head):
    """The form found in LLM heads: ``slice(-n, None) if isinstance(n, int) else n``."""

    def forward(self, h, keep: int = 0):
        return self.lin(h[:, slice(-keep, None) if isinstance(keep, int) else keep, :])


def test_isinstance_on_an_int_argument_is_never_silently_wrong():
    head = IsinstanceHead()
    h = torch.randn(1, 5, 4)
    bended = tb.BendedModule(head)
    try:
        bended.trace(h=h)
    except tb.TracingError as e:
        assert "shape [1, 6] instead of [1, 5, 6]" in str(e)
        return
    assert torch.equal(bended(h), head(h))


def test_outputs_held_by_objects_are_compared_item_by_item_and_field_by_field():
    """A ModelOutput is a dict subclass and a cache an object holding lists of tensors: the
    check looks inside both (it compared their types only)."""

    class Output(dict):
        pass

    class Layer:
        def __init__(self, keys: torch.Tensor) -> None:
            self.keys = keys

    class Cache:
        def __init__(self, *keys: torch.Tensor) -> None:
            self.layers = [Layer(k) for k in keys]

    one, zero = torch.ones(2), torch.zeros(2)
    assert first_difference(Output(logits=one), Output(logits=one.clone())) is None
    assert "output['logits']: max difference 1" in first_difference(
        Output(logits=one), Output(logits=zero)
    )
    assert "output['past'].layers[1].keys" in first_difference(
        Output(past=Cache(one, one)), Output(past=Cache(one, zero))
    )
    assert "expected" in first_difference(Output(logits=one), Output(scores=one))
