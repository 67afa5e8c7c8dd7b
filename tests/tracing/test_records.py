"""Records of a trace: one frozen record per node, and the traced graph with its decisions."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from torchbend.tracing import BendingTracer, NodeRecord, TracedGraph, record_of
from torchbend.tracing.records import META_KEY


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3)

    def forward(self, x):
        y = self.conv(x)
        if x.shape[0] > 1:
            return y, x.shape[0]
        return y * y.sum() if y.sum() > 0 else y


def trace(**inputs: torch.Tensor) -> TracedGraph:
    torch.manual_seed(0)
    return BendingTracer().trace_method(Conv(), "forward", inputs)


def nodes(traced: TracedGraph) -> dict[str, torch.fx.Node]:
    return {n.name: n for n in traced.nodes}


def test_each_node_has_one_frozen_record_and_no_example_value():
    traced = trace(x=torch.randn(1, 1, 8))
    for node in traced.nodes:
        assert [k for k in node.meta if k == META_KEY or k.startswith("tb_")] == [META_KEY]
        record = record_of(node)
        assert isinstance(record, NodeRecord)
        assert not any(
            isinstance(getattr(record, f.name), torch.Tensor) for f in dataclasses.fields(record)
        )
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.static = True  # type: ignore[misc]


def test_records_describe_values_and_how_they_depend_on_inputs():
    traced = trace(x=torch.randn(2, 1, 8))
    by_name = nodes(traced)
    x, conv = record_of(by_name["x"]), record_of(by_name["conv"])
    assert (x.input, x.static, x.shape_deps) == ("x", False, frozenset({("x", "shape", None)}))
    assert conv.is_tensor and conv.shape == (2, 2, 6)
    assert (conv.dtype, conv.device) == (torch.float32, torch.device("cpu"))
    assert not conv.static and conv.shape_deps == frozenset({("x", "shape", None)})
    shape = record_of(by_name["getattr_2"])
    assert shape.static and shape.shape_of == "x"
    assert shape.shape_deps == frozenset({("x", "ndim", None)})  # len(x.shape) is x.ndim
    dim = record_of(by_name["getitem_1"])
    assert dim.static and dim.deps == frozenset({("x", "shape", 0)})
    assert not dim.is_tensor and dim.shape is None


def test_records_of_data_dependent_values_are_not_static():
    traced = trace(x=torch.ones(1, 1, 8))
    by_name = nodes(traced)
    assert [(s.kind, s.checked) for s in traced.flow_steps] == [
        ("logical", "signature"),
        ("logical", "runtime"),
    ]
    assert not record_of(by_name["gt_1"]).static
    assert record_of(by_name["sum_1"]).shape_deps == frozenset({("x", "shape", None)})


def test_output_of_sequences_holding_tensors_has_nested_shapes():
    traced = trace(x=torch.randn(2, 1, 8))
    output = next(n for n in traced.nodes if n.op == "output")
    assert record_of(output) == NodeRecord()  # the output node has no value of its own
    (y, _) = output.args[0]
    assert record_of(y).shape == (2, 2, 6)
    assert isinstance(traced.outputs, tuple) and traced.outputs[1] == 2


def test_traced_graph_is_a_graph_that_prints_as_one():
    traced = trace(x=torch.randn(1, 1, 8))
    assert isinstance(traced, torch.fx.Graph)
    assert str(traced).startswith("graph():")
    assert repr(traced).startswith("TracedGraph(nodes=")
    assert isinstance(traced.flow_steps, list) and isinstance(traced.guard_facts, tuple)
    assert ("x", "shape", 0) in traced.guard_facts
    assert traced.runtime_guards == 1
