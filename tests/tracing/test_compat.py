"""The torch.fx names ``torchbend/tracing/compat.py`` relies on, each checked by name: a torch
upgrade that changes one fails here rather than somewhere inside a trace."""

from __future__ import annotations

import inspect
import operator
import threading
from typing import Any

import pytest
import torch
import torch.fx
from torch import nn

from torchbend.tracing import check_decision
from torchbend.tracing.compat import (
    CHECK_WITH,
    CHECKED_ON,
    FX_TRACE_LOCK,
    USER_CHECKS,
    RootCallTracer,
    copy_codegen,
    export_guards,
    freeze_keeping_tensors,
    inline,
    node_op,
    pytree,
    recorded_node,
    simplify,
    target_name,
    ts_converter,
)


def test_the_module_says_which_torch_it_was_checked_on():
    assert CHECKED_ON and all(v.count(".") == 2 for v in CHECKED_ON)


def test_not_backward_compatible_tracer_hooks_keep_their_signatures():
    root = inspect.signature(torch.fx.Tracer.create_args_for_root).parameters
    assert list(root) == ["self", "root_fn", "is_module", "concrete_args"]
    getattr_ = inspect.signature(torch.fx.Tracer.getattr).parameters
    assert list(getattr_) == ["self", "attr", "attr_val", "parameter_proxy_cache"]


class _Probe(RootCallTracer):
    """Records the calls torch.fx makes to the hooks :class:`RootCallTracer` overrides."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Any] = []

    def root_call(self, root_fn: Any, is_module: bool) -> tuple[Any, list[Any]]:
        self.calls.append(("root_call", is_module))
        x = self.create_proxy("placeholder", "x", (), {})
        return root_fn, [self.root, x]

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        self.calls.append(("getattr", attr))
        return super().getattr(attr, attr_val, parameter_proxy_cache)


def test_trace_calls_the_hooks_the_compat_tracer_overrides():
    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(2))

        def forward(self, x):
            return x * self.weight

    probe = _Probe()
    graph = probe.trace(Scale())
    assert probe.calls[0] == ("root_call", True)
    assert ("getattr", "weight") in probe.calls
    assert [n.op for n in graph.nodes] == ["placeholder", "get_attr", "call_function", "output"]


def test_module_attributes_are_values_while_executing():
    probe = _Probe()
    probe.root = nn.Linear(2, 2)
    probe.graph = torch.fx.Graph()
    weight = probe.root.weight
    assert isinstance(probe.getattr("weight", weight, {}), torch.fx.Proxy)
    probe.executing = 1
    assert probe.getattr("weight", weight, {}) is weight


def test_copies_keep_the_calling_convention():
    def first(inputs):
        return inputs["a"] + 1

    pytree = torch.fx.symbolic_trace(first, concrete_args={"inputs": {"a": torch.fx.PH}})
    copy = torch.fx.Graph()
    copy_codegen(pytree.graph, copy)
    copy.output(copy.graph_copy(pytree.graph, {}))
    x = torch.ones(2)
    assert torch.equal(torch.fx.GraphModule(pytree, copy)({"a": x}), x + 1)
    assert "def forward(self, inputs)" in copy.python_code("self").src


def test_target_names_are_torch_fx_names():
    assert target_name(operator.add) == "operator.add"
    assert target_name(getattr) == "builtins.getattr"
    assert target_name(torch.relu) == "torch.relu"
    assert target_name("encoder.conv") == "encoder.conv"


def test_checks_of_decisions_survive_dead_code_elimination():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(check_decision, (x, "bool", True, 0))
    graph.output(x)
    graph.eliminate_dead_code()
    assert [n.target for n in graph.nodes if n.op == "call_function"] == [check_decision]


def test_attribute_nodes_are_recorded_lazily():
    tracer = torch.fx.Tracer()
    tracer.graph = torch.fx.Graph()
    x = tracer.create_proxy("placeholder", "x", (), {})
    shape = x.shape
    assert isinstance(shape, torch.fx.proxy.Attribute)
    assert recorded_node(shape) is None
    node = shape.node
    assert recorded_node(shape) is node and node.target is getattr


def test_torch_checks_go_through_check_with():
    calls = []
    original = getattr(torch, CHECK_WITH)

    def spy(error_type: Any, cond: Any, message: Any) -> None:
        calls.append(cond)
        original(error_type, cond, message)

    setattr(torch, CHECK_WITH, spy)
    try:
        torch._check(True)
        torch._check_tensor_all(torch.ones(2, dtype=torch.bool))
    finally:
        setattr(torch, CHECK_WITH, original)
    assert len(calls) == 2


def test_tensor_checks_are_the_functions_checking_for_user_code():
    (code,) = USER_CHECKS
    assert code is torch._check_tensor_all_with.__code__
    assert "_check_tensor_all_with" in torch._check_tensor_all.__code__.co_names


def test_pytree_flattens_and_rebuilds():
    leaves, spec = pytree.tree_flatten({"a": (1, [2, 3])})
    assert leaves == [1, 2, 3]
    assert pytree.tree_unflatten([4, 5, 6], spec) == {"a": (4, [5, 6])}


class _Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.flag = True
        self.weight = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.flag:
            return self.inner(x) * self.weight
        return x

    @torch.jit.export
    def inner(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def test_script_graphs_are_inlined_frozen_and_simplified():
    scripted = torch.jit.script(_Branchy())
    graph = scripted.graph.copy()
    inline(graph)
    assert not [n for n in graph.nodes() if n.kind() == "prim::CallMethod"]
    frozen = freeze_keeping_tensors(scripted)
    simplify(frozen.graph)
    kinds = [n.kind() for n in frozen.graph.nodes()]
    assert "prim::If" not in kinds  # the plain attribute became a constant, its branch folded
    assert "weight" in dict(frozen.named_parameters()) or hasattr(frozen, "weight")
    x = torch.randn(3)
    assert torch.equal(frozen(x), (x + 1) * 1)


def test_the_torchscript_converter_converts_forward():
    scripted = torch.jit.script(nn.Linear(2, 2))
    program = ts_converter(scripted, (torch.randn(1, 2),)).convert()
    assert isinstance(program, torch.export.ExportedProgram)


def test_traces_hold_the_lock_and_hooks_called_from_elsewhere_are_not_the_traces():
    seen: dict[str, Any] = {}

    class Looks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(2))
            self.child = nn.ReLU()

        def forward(self, x: Any) -> Any:
            def other() -> None:  # a thread running the module plainly while it traces
                seen["locked"] = FX_TRACE_LOCK.acquire(blocking=False)
                seen["weight"] = type(self.weight)
                seen["child"] = type(self.child(torch.ones(1)))

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
            return self.child(x * self.weight)

    probe = _Probe()
    graph = probe.trace(Looks())
    assert seen == {"locked": False, "weight": nn.Parameter, "child": torch.Tensor}
    assert [n.op for n in graph.nodes].count("call_module") == 1
    assert probe.thread is None and not probe.elsewhere()


def test_an_exported_module_holds_its_guards_on_symbolic_sizes():
    class Net(torch.nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.randn(2, 8)
    dims = {"x": {1: torch.export.Dim("n", min=2)}}
    gm = torch.export.export(Net(), (x,), dynamic_shapes=dims).module()
    guards = export_guards(gm)
    assert guards is not None and callable(guards)
    guards(torch.randn(2, 5))  # a length it left symbolic passes
    with pytest.raises(AssertionError):
        guards(torch.randn(3, 5))  # a size it specialized does not


def test_torchscript_nodes_name_their_aten_overloads():
    graph = torch.jit.script(torch.nn.Linear(2, 2)).inlined_graph
    linear = next(n for n in graph.nodes() if n.kind() == "aten::linear")
    op, keywords = node_op(linear)
    assert op is torch.ops.aten.linear.default and keywords == [None, None, None]
    constant = next(n for n in graph.nodes() if n.kind() == "prim::GetAttr")
    assert node_op(constant) is None
