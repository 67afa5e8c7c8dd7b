"""Unit tests of the tracer: flow steps, guards and facts, factories, escapes, objects."""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import operator
from typing import Any

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.tracing import BendingTracer, DecisionChanged, TracedGraph, check_decision, is_guard
from torchbend.tracing.assignments import assign_attribute
from torchbend.tracing.objects import class_key, rebuild_object


class Function(nn.Module):
    """Wraps a function of keyword arguments as a module."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, y=None, n: int = 1):
        return self.fn(x, y, n)


def trace(fn: Any, **inputs: Any) -> TracedGraph:
    module = fn if isinstance(fn, nn.Module) else Function(fn)
    full = {"y": None, "n": 1} | inputs if not isinstance(fn, nn.Module) else inputs
    return BendingTracer().trace_method(module, "forward", full)


def graph_module(fn: Any, result: TracedGraph) -> torch.fx.GraphModule:
    module = fn if isinstance(fn, nn.Module) else Function(fn)
    for name, tensor in result.constants.items():
        setattr(module, name, tensor)
    return torch.fx.GraphModule(module, result)


def steps(result: TracedGraph) -> list[tuple[str, Any, str]]:
    return [(s.kind, s.value, s.checked) for s in result.flow_steps]


def targets(result: TracedGraph) -> list[Any]:
    return [n.target for n in result.nodes if n.op in ("call_function", "call_method")]


# -- flow steps and guards ------------------------------------------------------------------------


def test_shape_decision_is_guarded_by_the_signature():
    def fn(x, y, n):
        return x + 1 if x.shape[0] > 2 else x - 1

    result = trace(fn, x=torch.zeros(3, 2))
    assert steps(result) == [("logical", True, "signature")]
    assert ("x", "shape", 0) in result.guard_facts
    assert result.runtime_guards == 0
    assert not any(is_guard(n) for n in result.nodes)


def test_data_decision_is_checked_inside_the_graph():
    def fn(x, y, n):
        return x + 1 if x.sum() > 0 else x - 1

    result = trace(fn, x=torch.ones(3))
    assert steps(result) == [("logical", True, "runtime")]
    assert result.runtime_guards == 1
    assert check_decision in targets(result)
    gm = graph_module(fn, result)
    assert torch.equal(gm(torch.ones(2)), torch.full((2,), 2.0))
    with pytest.raises(DecisionChanged) as info:
        gm(-torch.ones(3))
    assert (info.value.step, info.value.expected, info.value.got) == (0, True, False)


def test_decision_on_a_constant_is_checked_nowhere():
    def fn(x, y, n):
        return x * 2 if torch.ones(3).sum() > 2 else x

    result = trace(fn, x=torch.ones(3))
    assert steps(result) == [("logical", True, "constant")]
    assert result.runtime_guards == 0


def test_range_over_an_int_argument_is_a_loop_guarded_by_its_value():
    def fn(x, y, n):
        for _ in range(n):
            x = x * 2
        return x

    result = trace(fn, x=torch.ones(2), n=3)
    assert steps(result) == [("loop", 3, "signature")]
    assert ("n", "value", None) in result.guard_facts
    assert targets(result).count(operator.mul) == 3


def test_escapes_len_int_float():
    def fn(x, y, n):
        k = int(x.shape[-1] / 2)
        return x[..., :k] * len(x) + float(x.mean())

    result = trace(fn, x=torch.ones(3, 4))
    assert steps(result) == [
        ("value", 2, "signature"),
        ("value", 3, "signature"),
        ("value", 1.0, "runtime"),
    ]
    assert {("x", "shape", -1), ("x", "shape", 0)} <= set(result.guard_facts)


def test_iterating_a_tensor_is_a_loop_over_its_length():
    def fn(x, y, n):
        return [row * i for i, row in enumerate(x)]

    result = trace(fn, x=torch.ones(3, 2))
    assert steps(result) == [("loop", 3, "signature")]
    assert ("x", "shape", 0) in result.guard_facts
    assert len(result.outputs) == 3


def test_flow_steps_point_at_user_code():
    def decide(x, y, n):
        if x.shape[0] > 1:
            return x
        return -x

    (step,) = trace(decide, x=torch.ones(2)).flow_steps
    assert step.file.startswith(__file__ + ":")
    assert step.function == "decide"
    assert repr(step).startswith("LogicalFlowStep(name=gt, value=True, file=")


def test_shape_arithmetic_stays_symbolic():
    def fn(x, y, n):
        return x.reshape(x.shape[0] * x.shape[1]) * x.size(-1)

    result = trace(fn, x=torch.ones(2, 3))
    assert result.flow_steps == []
    assert not [fact for fact in result.guard_facts if fact[0] == "x"]
    assert torch.equal(graph_module(fn, result)(torch.ones(4, 5)), torch.full((20,), 5.0))


def test_unpacking_a_shape_is_guarded_by_the_number_of_dims():
    def fn(x, y, n):
        return x.reshape(*x.shape[:-1], 2, -1), len(x.shape)

    result = trace(fn, x=torch.ones(3, 4))
    assert {s.checked for s in result.flow_steps} == {"signature"}
    assert ("x", "ndim", None) in result.guard_facts
    assert not [f for f in result.guard_facts if f[1] == "shape"]  # other sizes reuse the graph


def test_tensors_sized_by_a_shape_are_guarded_by_that_shape():
    def fn(x, y, n):
        return [row + 1 for row in torch.zeros(x.shape)]

    result = trace(fn, x=torch.ones(2, 3))
    assert steps(result) == [("loop", 2, "signature")]
    assert ("x", "shape", None) in result.guard_facts


def test_none_bool_and_string_inputs_stay_concrete():
    def fn(x, y, n):
        return x if y is None else x * y

    result = trace(fn, x=torch.ones(2))
    assert "y" in result.concrete_inputs
    assert ("y", "value", None) in result.guard_facts
    assert steps(result) == []


# -- factories ---------------------------------------------------------------------------------


def test_factories_are_graph_calls_not_constants():
    def fn(x, y, n):
        return x + torch.ones(3) + torch.randn(3) + torch.zeros(x.shape) + torch.randn_like(x)

    result = trace(fn, x=torch.ones(3))
    assert result.constants == {}
    assert {torch.ones, torch.randn, torch.zeros, torch.randn_like} <= set(targets(result))
    gm = graph_module(fn, result)
    torch.manual_seed(0)
    first = gm(torch.ones(3))
    assert not torch.equal(first, gm(torch.ones(3)))
    torch.manual_seed(0)
    assert torch.equal(first, fn(torch.ones(3), None, 1))


def test_random_values_are_not_constant():
    def fn(x, y, n):
        return x if torch.rand(()) < 2 else -x

    assert steps(trace(fn, x=torch.ones(1))) == [("logical", True, "runtime")]


def test_captured_tensors_become_constants():
    table = torch.arange(4.0)

    def fn(x, y, n):
        return x + table

    result = trace(fn, x=torch.ones(4))
    assert list(result.constants.values()) == [table]


# -- tracing leaves no trace ----------------------------------------------------------------------


def test_tracing_draws_no_random_numbers():
    def fn(x, y, n):
        return x + torch.randn(3) + nn.functional.dropout(x, 0.5, True)

    torch.manual_seed(0)
    state = torch.get_rng_state()
    trace(fn, x=torch.ones(3))
    assert torch.equal(torch.get_rng_state(), state)


def test_tracing_leaves_buffers_as_they_were():
    class Running(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(2)
            self.register_buffer("total", torch.zeros(2))

        def forward(self, x):
            self.total.add_(x.sum(0))
            return self.bn(x) + self.total

    module = Running().train()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    buffers = dict(module.named_buffers())
    trace(module, x=torch.randn(4, 2))
    for name, value in module.state_dict().items():
        assert torch.equal(value, before[name]), name
    assert all(b is buffers[n] for n, b in module.named_buffers())


def test_traced_values_assigned_to_attributes_do_not_stay_in_the_module():
    class Keeps(nn.Module):
        def forward(self, x):
            self.last = x * 2
            return self.last + 1

    module = Keeps()
    result = trace(module, x=torch.ones(2))
    assert torch.equal(result.outputs, torch.full((2,), 3.0))
    assert not hasattr(module, "last")


def test_a_buffer_forward_replaces_is_an_assignment_of_the_graph():
    class Assigns(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("state", torch.zeros(2))

        def forward(self, x):
            self.state = self.state + x
            return self.state

    module = Assigns()
    result = trace(module, x=torch.ones(2))
    assert type(module.state) is torch.Tensor and torch.equal(module.state, torch.zeros(2))
    (assign,) = [n for n in result.nodes if n.target is assign_attribute]
    assert assign.args[1:3] == ("state", True) and assign.args[3].name == "add"
    assert is_guard(assign)  # an effect, no activation


# -- escapes to Python values ---------------------------------------------------------------------


def test_dtype_and_device_are_values_guarded_by_the_signature():
    def fn(x, y, n):
        low = torch.finfo(x.dtype).min
        assert x.device.type == "cpu" and not x.is_cuda
        return x.clamp(min=low / 2).to(torch.float64 if x.dtype == torch.float32 else x.dtype)

    result = trace(fn, x=torch.ones(2))
    assert {("x", "dtype", None), ("x", "device", None)} <= set(result.guard_facts)
    assert graph_module(fn, result)(torch.ones(2)).dtype == torch.float64


def test_item_assignment_is_recorded():
    def fn(x, y, n):
        out = torch.zeros(x.shape)
        for i in range(x.shape[0]):
            out[i] = x[i] * i
        return out

    result = trace(fn, x=torch.ones(3, 2))
    assert targets(result).count(operator.setitem) == 3
    x = torch.randn(3, 2)
    assert torch.equal(graph_module(fn, result)(x), fn(x, None, 1))


def test_writing_data_into_a_constant_makes_its_decisions_runtime():
    def fn(x, y, n):
        acc = torch.zeros(2)
        acc[0] = x.sum()
        acc.add_(x.mean())
        return x if acc.sum() > 0 else -x

    assert steps(trace(fn, x=torch.ones(2))) == [("logical", True, "runtime")]


# -- objects in outputs ---------------------------------------------------------------------------


@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: int


class Record(collections.OrderedDict):
    pass


def test_outputs_are_plain_containers():
    def fn(x, y, n):
        return [x, {"a": (x, [x])}]

    outputs = trace(fn, x=torch.ones(1)).outputs
    assert type(outputs) is list and type(outputs[1]) is dict and type(outputs[1]["a"][1]) is list


def test_objects_holding_proxies_are_rebuilt_in_the_graph():
    def fn(x, y, n):
        record = Record()
        record["b"] = x * 2
        record["a"] = x
        return Pair(x + 1, 3), record, torch.distributions.Normal(x, x.exp())

    result = trace(fn, x=torch.zeros(2))
    assert targets(result).count(rebuild_object) == 3
    pair, record, normal = graph_module(fn, result)(torch.ones(2))
    assert pair == Pair(pair.first, 3) and torch.equal(pair.first, torch.full((2,), 2.0))
    assert type(record) is Record and list(record) == ["b", "a"]
    assert torch.equal(normal.scale, torch.ones(2).exp())


def test_class_keys_find_their_class():
    def local() -> type:
        class Local:
            pass

        return Local

    first, second = local(), local()
    assert class_key(first) != class_key(second)
    assert type(rebuild_object(class_key(second), None, {})) is second
    assert type(rebuild_object("collections:OrderedDict", {"a": 1}, {})) is collections.OrderedDict


# -- signatures -----------------------------------------------------------------------------------


def test_decorated_methods_are_called_through_their_wrapper():
    seen: list[dict[str, Any]] = []

    def logged(method: Any) -> Any:
        @functools.wraps(method)
        def wrapper(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            seen.append(dict(kwargs))
            return method(self, *args, **kwargs)

        return wrapper

    class Decorated(nn.Module):
        @logged
        def forward(self, x, scale: float = 2.0, **kwargs):
            return x * scale

    result = trace(Decorated(), x=torch.ones(2), scale=3.0)
    # ``**kwargs`` given nothing has no placeholder: only given inputs have one.
    assert [str(n.target) for n in result.nodes if n.op == "placeholder"] == ["x", "scale"]
    assert set(seen[0]) == {"x", "scale"}
    assert all(fact[0] != "kwargs" for fact in result.guard_facts)
    bended = tb.BendedModule(Decorated())
    bended.trace(x=torch.ones(2))
    assert torch.equal(bended(torch.ones(3), scale=4.0), torch.full((3,), 4.0))


def test_keyword_only_and_var_arguments():
    class Signature(nn.Module):
        def forward(self, x, *rest, k: int = 2, **options):
            return x * k + len(rest) + len(options)

    result = trace(Signature(), x=torch.ones(1), k=3)
    assert [str(n.target) for n in result.nodes if n.op == "placeholder"] == ["x", "k"]
    assert torch.equal(result.outputs, torch.full((1,), 3.0))
    # The items of ``*rest`` and ``**options`` given have one placeholder each, in call order.
    result = trace(Signature(), x=torch.ones(1), k=3, rest_0=2, rest_1=3, flag=True)
    assert [str(n.target) for n in result.nodes if n.op == "placeholder"] == [
        "x",
        "rest_0",
        "rest_1",
        "k",
        "flag",
    ]
    assert torch.equal(result.outputs, torch.full((1,), 6.0))


# -- leaves and errors ----------------------------------------------------------------------------


class Negate(nn.Module):
    def forward(self, x):
        return torch.neg(x)


class WithNegate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.negate = Negate()

    def forward(self, x):
        return self.negate(self.linear(x))


@pytest.mark.parametrize("leaf", [Negate, "negate"])
def test_leaves_stay_module_calls(leaf: Any):
    x = torch.ones(3)
    traced_through = BendingTracer().trace_method(WithNegate(), "forward", {"x": x})
    assert torch.neg in targets(traced_through)
    kept = BendingTracer([leaf]).trace_method(WithNegate(), "forward", {"x": x})
    assert [n.target for n in kept.nodes if n.op == "call_module"] == ["linear", "negate"]


def test_failures_name_the_node_and_the_user_line():
    def fn(x, y, n):
        return x @ torch.ones(5, 5)

    with pytest.raises(tb.TracingError, match=r"'matmul'.*test_tracer\.py:\d+") as info:
        trace(fn, x=torch.ones(3))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_math_of_traced_ints():
    def fn(x, y, n):
        return x * math.sqrt(x.shape[-1])

    result = trace(fn, x=torch.ones(4))
    assert math.sqrt in targets(result)
    assert torch.equal(graph_module(fn, result)(torch.ones(9)), torch.full((9,), 3.0))
