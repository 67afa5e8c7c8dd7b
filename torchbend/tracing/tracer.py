"""The tracer: torch.fx symbolic tracing with concrete execution running alongside."""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.fx.node import Argument, Node
from torch.overrides import TorchFunctionMode

from ..errors import TracingError
from .facts import Fact
from .flow import FlowStep, check_decision
from .proxy import ConcreteAttribute, ConcreteProxy

__all__ = ["BendingTracer", "TraceResult", "rebuild_object"]

_RANDOM_FACTORIES: frozenset[Callable[..., Any]] = frozenset(
    {
        torch.rand,
        torch.randn,
        torch.randint,
        torch.randperm,
        torch.normal,
        torch.bernoulli,
        torch.multinomial,
        torch.poisson,
        torch.rand_like,
        torch.randn_like,
        torch.randint_like,
    }
)
# Factories are recorded as graph calls even without traced arguments, so that each call
# builds its tensors anew (and random ones draw new values) as eager code does.
_FACTORIES: frozenset[Callable[..., Any]] = _RANDOM_FACTORIES | {
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.arange,
    torch.linspace,
    torch.logspace,
    torch.eye,
    torch.tensor,
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
}
_RANDOM_METHODS = frozenset(
    {"normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_"}
)
# Operations whose output shape depends on tensor values, not only on input shapes.
_DATA_SHAPED_FUNCTIONS: frozenset[Callable[..., Any]] = frozenset(
    {
        torch.nonzero,
        torch.masked_select,
        torch.unique,
        torch.unique_consecutive,
        torch.argwhere,
        torch.repeat_interleave,
    }
)
_DATA_SHAPED_METHODS = frozenset(
    {"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "repeat_interleave",
     "tolist", "item"}
)
_SHAPE_ATTRIBUTES = {"shape": "shape", "dtype": "dtype", "ndim": "ndim", "device": "device",
                     "is_cuda": "device", "layout": "dtype", "is_sparse": "dtype"}
_SHAPE_METHODS = {"size": "shape", "dim": "ndim", "ndimension": "ndim", "numel": "shape",
                  "nelement": "shape", "is_floating_point": "dtype", "is_complex": "dtype",
                  "element_size": "dtype", "get_device": "device"}
# Static nodes computing these are pure: when nothing uses them they are dropped from graphs.
_PURE_FUNCTIONS: frozenset[Any] = frozenset(
    {getattr, operator.getitem, operator.gt, operator.ge, operator.lt, operator.le, operator.eq,
     operator.ne, operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
     operator.mod, operator.neg, operator.not_, len}
)

_SKIPPED_FILES = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.dirname(__file__)) + os.sep,
)


def rebuild_object(cls: type, items: dict[Any, Any] | None, attributes: dict[str, Any]) -> Any:
    """Rebuild an object of ``cls`` (a dataclass, a distribution...) from its fields."""
    obj = cls.__new__(cls)
    if items is not None:
        dict.update(obj, items)
    obj.__dict__.update(attributes)
    return obj


@dataclass
class TraceResult:
    """What one trace produced: the graph, its constants, its guards and its outputs."""

    graph: torch.fx.Graph
    constants: dict[str, torch.Tensor]
    flow_steps: list[FlowStep]
    facts: tuple[Fact, ...]
    concrete_inputs: tuple[str, ...]
    outputs: Any = None
    runtime_guards: int = 0
    notes: list[str] = field(default_factory=list)


def _map(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to the leaves of nested built-in containers."""
    if isinstance(value, tuple):
        mapped = tuple(_map(v, fn) for v in value)
        return type(value)(*mapped) if hasattr(value, "_fields") else mapped
    if isinstance(value, list):
        return [_map(v, fn) for v in value]
    if type(value) is dict:
        return {k: _map(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_map(value.start, fn), _map(value.stop, fn), _map(value.step, fn))
    return fn(value)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    elif type(value) is dict:
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, slice):
        yield from _leaves((value.start, value.stop, value.step))
    else:
        yield value


def _has_proxy(value: Any) -> bool:
    return any(isinstance(v, torch.fx.Proxy) for v in _leaves(value))


def _is_proxied_input(value: Any) -> bool:
    """Inputs that become proxies; the others (None, bools, strings...) stay concrete."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (torch.Tensor, int, float)):
        return True
    if hasattr(value, "batch_size") and hasattr(value, "items"):  # TensorDict
        return True
    return any(isinstance(v, torch.Tensor) for v in _leaves(value))


class _RecordFactories(TorchFunctionMode):
    """Records tensor factories called without traced arguments (``torch.randn(3)``)."""

    def __init__(self, tracer: BendingTracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in _FACTORIES and not self.tracer.executing and not _has_proxy((args, kwargs)):
            return self.tracer.create_proxy("call_function", func, args, kwargs)
        return func(*args, **kwargs)


class BendingTracer(torch.fx.Tracer):
    """A :class:`torch.fx.Tracer` that also runs the module on example inputs.

    Each node's concrete value is kept in ``node.meta["tb_value"]`` while tracing, so that
    shapes, lengths and booleans can be handed back to Python. Every such decision is recorded
    as a :class:`FlowStep` and guarded: by a fact of the input signature when it only depends
    on shapes or scalar arguments, or by a check inserted in the graph when it depends on data.

    Args:
        leaves: module types, or qualified module names, kept as ``call_module`` leaves in
            addition to the standard ``torch.nn`` layers.
    """

    proxy_buffer_attributes = True

    def __init__(self, leaves: Iterable[type | str] = ()) -> None:
        super().__init__(autowrap_modules=(math,))
        leaves = tuple(leaves)
        self.leaf_types = tuple(x for x in leaves if isinstance(x, type))
        self.leaf_names = frozenset(x for x in leaves if isinstance(x, str))
        self.executing = 0
        self._inputs: dict[str, Any] = {}
        self._steps: list[FlowStep] = []
        self._facts: set[Fact] = set()
        self._constants: dict[str, torch.Tensor] = {}
        self._concrete_inputs: list[str] = []
        self._runtime_guards = 0

    # -- entry point -------------------------------------------------------------------------

    def trace_method(self, root: torch.nn.Module, method: str, inputs: dict[str, Any]) -> TraceResult:
        """Trace ``root.<method>`` on ``inputs`` (a mapping of argument name to value)."""
        self.traced_func_name = method
        self._inputs = inputs
        self._steps, self._facts, self._constants = [], set(), {}
        self._concrete_inputs, self._runtime_guards = [], 0
        with _RecordFactories(self):
            graph = self.trace(root)
        outputs = self._finalize(graph)
        return TraceResult(
            graph=graph,
            constants=self._constants,
            flow_steps=list(self._steps),
            facts=tuple(sorted(self._facts, key=repr)),
            concrete_inputs=tuple(self._concrete_inputs),
            outputs=outputs,
            runtime_guards=self._runtime_guards,
        )

    # -- torch.fx hooks ----------------------------------------------------------------------

    def proxy(self, node: Node) -> torch.fx.Proxy:
        return ConcreteProxy(node, self)

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        if isinstance(m, self.leaf_types) or module_qualified_name in self.leaf_names:
            return True
        return super().is_leaf_module(m, module_qualified_name)

    def call_module(
        self,
        m: torch.nn.Module,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if self.executing or not _has_proxy((args, kwargs)):
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if self.executing:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_arg(self, a: Any) -> Argument:
        if isinstance(a, torch.fx.Proxy):
            return super().create_arg(a)
        if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter):
            if a not in self.tensor_attrs and not any(a is b for _, b in self.root.named_buffers()):
                return self._constant(a)
        if isinstance(a, dict) and type(a) is not dict and _has_proxy(dict(a)):
            return self._rebuild(a, dict(a))
        if (
            not isinstance(a, (tuple, list, dict, slice, torch.nn.Module, type))
            and hasattr(a, "__dict__")
            and _has_proxy(dict(vars(a)))
        ):
            return self._rebuild(a, None)
        return super().create_arg(a)

    def create_proxy(
        self,
        kind: str,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str | None = None,
        type_expr: Any | None = None,
        proxy_factory_fn: Callable[[Node], torch.fx.Proxy] | None = None,
    ) -> Any:
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        node = proxy.node
        if kind == "placeholder":
            return self._placeholder(proxy)
        if kind == "output":
            return proxy
        value = self._execute(node, kind, target, args, kwargs)
        self._annotate(node, kind, target, args, value)
        return proxy

    def to_bool(self, obj: torch.fx.Proxy) -> bool:
        return bool(self._decide(obj, "bool", "logical"))

    def iter(self, obj: torch.fx.Proxy) -> Iterator[Any]:
        value = self.value_of(obj)
        if isinstance(value, Mapping):
            return iter(list(self._decide_keys(obj)))
        if not hasattr(value, "__getitem__"):
            obj = self.create_proxy("call_function", list, (obj,), {})
        n = self._decide(obj, "len", "loop")
        return iter([obj[i] for i in range(n)])

    def keys(self, obj: torch.fx.Proxy) -> Any:
        return self._decide_keys(obj)

    # -- concrete values ---------------------------------------------------------------------

    def value_of(self, proxy: torch.fx.Proxy) -> Any:
        """The concrete value of ``proxy`` on the example inputs."""
        if isinstance(proxy, ConcreteAttribute) and proxy._node is None:
            return getattr(self.value_of(proxy.root), proxy.attr)
        return proxy.node.meta["tb_value"]

    def _concrete(self, value: Any) -> Any:
        return _map(value, lambda v: self.value_of(v) if isinstance(v, torch.fx.Proxy) else v)

    def _placeholder(self, proxy: torch.fx.Proxy) -> Any:
        node = proxy.node
        name = str(node.target).lstrip("*")
        if name in self._inputs:
            value = self._inputs[name]
        elif node.args:
            value = node.args[0]
        else:
            value = () if str(node.target).startswith("*") and not str(node.target).startswith("**") else {}
        node.meta["tb_value"] = value
        if not _is_proxied_input(value):
            self._concrete_inputs.append(name)
            self._facts.add((name, "value", None))
            node.meta.update(tb_static=True, tb_deps=frozenset({(name, "value", None)}),
                             tb_shape_deps=frozenset())
            return value
        if isinstance(value, torch.Tensor):
            node.meta.update(tb_static=False, tb_deps=frozenset(),
                             tb_shape_deps=frozenset({(name, "shape", None)}), tb_input=name)
        elif isinstance(value, (int, float)):
            node.meta.update(tb_static=True, tb_deps=frozenset({(name, "value", None)}),
                             tb_shape_deps=frozenset())
        else:
            node.meta.update(tb_static=False, tb_deps=frozenset(),
                             tb_shape_deps=frozenset({(name, "sig", None)}))
        return proxy

    def _execute(self, node: Node, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
        if kind == "get_attr":
            if target in self._constants:
                return self._constants[target]
            obj: Any = self.root
            for atom in str(target).split("."):
                obj = getattr(obj, atom)
            return obj
        cargs, ckwargs = self._concrete(args), self._concrete(kwargs)
        self.executing += 1
        try:
            if kind == "call_function":
                return target(*cargs, **ckwargs)
            if kind == "call_method":
                return getattr(cargs[0], target)(*cargs[1:], **ckwargs)
            return self.root.get_submodule(target)(*cargs, **ckwargs)
        except Exception as e:
            where = self._user_location()
            raise TracingError(
                f"while tracing {type(self.root).__name__}.{self.traced_func_name}, node "
                f"'{node.name}' ({node.op} {node._pretty_print_target(target)}) at "
                f"{where[0]} failed: {type(e).__name__}: {e}"
            ) from e
        finally:
            self.executing -= 1

    def _annotate(self, node: Node, kind: str, target: Any, args: Any, value: Any) -> None:
        """Record in ``node.meta`` whether the value is fixed by the input signature."""
        node.meta["tb_value"] = value
        proxies = [a for a in _leaves((args,)) if isinstance(a, torch.fx.Proxy)]
        metas = [p.node.meta for p in proxies]
        if kind == "get_attr":
            static = str(target) in self._constants
            node.meta.update(tb_static=static, tb_deps=frozenset(), tb_shape_deps=frozenset())
            return
        first = metas[0] if metas else {}
        shape_kind = None
        if kind == "call_function" and target is getattr and len(args) > 1:
            shape_kind = _SHAPE_ATTRIBUTES.get(args[1])
        elif kind == "call_method":
            shape_kind = _SHAPE_METHODS.get(target)
        if shape_kind is not None and first.get("tb_shape_deps") is not None:
            deps = first["tb_shape_deps"]
            if "tb_input" in first:
                index = None
                if target == "size" and len(args) > 1 and isinstance(args[1], int):
                    index = args[1]
                deps = frozenset({(first["tb_input"], shape_kind, index)})
            node.meta.update(tb_static=True, tb_deps=deps, tb_shape_deps=frozenset())
            if shape_kind == "shape" and isinstance(value, torch.Size) and "tb_input" in first:
                node.meta["tb_shape_of"] = first["tb_input"]
            return
        if (
            kind == "call_function"
            and target is operator.getitem
            and "tb_shape_of" in first
            and isinstance(args[1], int)
        ):
            deps = frozenset({(first["tb_shape_of"], "shape", args[1])})
            node.meta.update(tb_static=True, tb_deps=deps, tb_shape_deps=frozenset())
            return
        random = (kind == "call_function" and target in _RANDOM_FACTORIES) or (
            kind == "call_method" and target in _RANDOM_METHODS
        )
        static = not random and all(m.get("tb_static", False) for m in metas)
        deps = frozenset().union(*(m.get("tb_deps", frozenset()) for m in metas))
        shape_deps: frozenset[Fact] | None = frozenset()
        for p, m in zip(proxies, metas):
            v = m.get("tb_value")
            own = m.get("tb_shape_deps") if isinstance(v, (torch.Tensor, list, tuple, dict)) else (
                m.get("tb_deps") if m.get("tb_static") else None
            )
            if own is None or shape_deps is None:
                shape_deps = None
            else:
                shape_deps = shape_deps | own
            if (
                kind == "call_function"
                and target is operator.getitem
                and p is not proxies[0]
                and isinstance(v, torch.Tensor)
                and v.dtype == torch.bool
            ):
                shape_deps = None
        if (kind == "call_function" and target in _DATA_SHAPED_FUNCTIONS) or (
            kind == "call_method" and target in _DATA_SHAPED_METHODS
        ):
            shape_deps = None
        node.meta.update(tb_static=static, tb_deps=deps if static else frozenset(),
                         tb_shape_deps=shape_deps)

    # -- decisions ---------------------------------------------------------------------------

    def escape(self, proxy: torch.fx.Proxy, how: str) -> Any:
        """Hand the concrete value of ``proxy`` to Python as ``how`` (len, int, float)."""
        line = self._user_location()[2]
        kind = "loop" if "range(" in line else "value"
        return self._decide(proxy, how, kind)

    def _decide(self, proxy: torch.fx.Proxy, how: str, kind: str) -> Any:
        node = proxy.node
        value = node.meta["tb_value"]
        got = {"bool": bool, "len": len, "int": int, "float": float}[how](value)
        if how == "len":
            deps = node.meta.get("tb_shape_deps")
            if "tb_input" in node.meta:
                deps = frozenset({(node.meta["tb_input"], "shape", 0)})
            static = deps is not None
        else:
            static = node.meta.get("tb_static", False)
            deps = node.meta.get("tb_deps", frozenset())
        file, function, _ = self._user_location()
        index = len(self._steps)
        if static:
            checked = "signature" if deps else "constant"
            self._facts.update(deps or ())
        else:
            checked = "runtime"
            guard = self.create_node("call_function", check_decision, (node, how, got, index), {})
            guard.meta.update(tb_value=None, tb_static=True, tb_deps=frozenset(),
                              tb_shape_deps=frozenset(), tb_guard=True)
            self._runtime_guards += 1
        self._steps.append(FlowStep(kind, node.name, got, file, function, checked))
        return got

    def _decide_keys(self, proxy: torch.fx.Proxy) -> Any:
        keys = list(self.value_of(proxy).keys())
        self._decide(proxy, "len", "loop")
        return keys

    def _user_location(self) -> tuple[str, str, str]:
        frame = inspect.currentframe()
        while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED_FILES):
            frame = frame.f_back
        if frame is None:
            return ("<unknown>", "<unknown>", "")
        file, lineno = frame.f_code.co_filename, frame.f_lineno
        return (f"{file}:{lineno}", frame.f_code.co_name, linecache.getline(file, lineno))

    # -- objects the graph must build or hold --------------------------------------------------

    def _constant(self, tensor: torch.Tensor) -> Node:
        name = f"_tb_constant{len(self._constants)}"
        self._constants[name] = tensor
        node = self.create_node("get_attr", name, (), {})
        node.meta.update(tb_value=tensor, tb_static=True, tb_deps=frozenset(),
                         tb_shape_deps=frozenset())
        return node

    def _rebuild(self, obj: Any, items: dict[Any, Any] | None) -> Argument:
        attributes = dict(vars(obj))
        if dataclasses.is_dataclass(obj) and items is None:
            attributes = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)} | attributes
        proxy = self.create_proxy("call_function", rebuild_object, (type(obj), items, attributes), {})
        return proxy.node

    # -- after tracing -------------------------------------------------------------------------

    def _finalize(self, graph: torch.fx.Graph) -> Any:
        output = next(n for n in reversed(graph.nodes) if n.op == "output")
        outputs = torch.fx.node.map_arg(output.args[0], lambda n: n.meta.get("tb_value"))
        for node in reversed(list(graph.nodes)):
            if (
                not node.users
                and node.meta.get("tb_static")
                and not node.meta.get("tb_guard")
                and (
                    (node.op == "call_function" and node.target in _PURE_FUNCTIONS)
                    or (node.op == "call_method" and node.target in _SHAPE_METHODS)
                )
            ):
                graph.erase_node(node)
        for node in graph.nodes:
            value = node.meta.pop("tb_value", None)
            node.meta["tb_shape"] = describe_shape(value)
            node.meta["tb_dtype"] = describe_dtype(value)
            node.meta["tb_tensor"] = isinstance(value, torch.Tensor)
            node.meta["tb_device"] = value.device if isinstance(value, torch.Tensor) else None
            node.meta["tb_type"] = type(value).__name__
        graph.flow_steps = list(self._steps)  # type: ignore[attr-defined]
        graph.guard_facts = tuple(sorted(self._facts, key=repr))  # type: ignore[attr-defined]
        graph.lint()
        return outputs


def describe_shape(value: Any) -> Any:
    """The shape of a tensor, or the nested shapes of a tuple of tensors."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in _leaves(value)):
        return tuple(describe_shape(v) for v in value)
    return None


def describe_dtype(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in _leaves(value)):
        return tuple(describe_dtype(v) for v in value)
    return None
