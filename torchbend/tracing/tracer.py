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
from .compat import RootCallTracer, recorded_node, target_name
from .facts import Fact
from .flow import READERS, FlowStep, check_decision
from .objects import class_key, rebuild_object
from .operations import (
    DATA_SHAPED_FUNCTIONS,
    DATA_SHAPED_METHODS,
    FACTORIES,
    PURE_FUNCTIONS,
    RANDOM_FACTORIES,
    RANDOM_METHODS,
    SHAPE_ATTRIBUTES,
    SHAPE_METHODS,
)
from .placeholders import root_call
from .proxy import ConcreteAttribute, ConcreteProxy
from .state import restore_state
from .values import has_proxy, holds_tensor, is_proxied_input, leaves, map_values

__all__ = ["BendingTracer", "TraceResult", "class_key", "rebuild_object"]

_SKIPPED_FILES = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.dirname(__file__)) + os.sep,
)


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
        if func in FACTORIES and not self.tracer.executing and not has_proxy((args, kwargs)):
            return self.tracer.create_proxy("call_function", func, args, kwargs)
        return func(*args, **kwargs)


class BendingTracer(RootCallTracer):
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
    on_value: Callable[[Node, Any], Any] | None = None
    """Called with each node and its concrete value; returns the value tracing continues with
    (``BendedModule`` bends activations there, so decisions see bent values)."""

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

    def trace_method(
        self, root: torch.nn.Module, method: str, inputs: dict[str, Any]
    ) -> TraceResult:
        """Trace ``root.<method>`` on ``inputs`` (a mapping of argument name to value)."""
        self.traced_func_name = method
        self._inputs = inputs
        self._steps, self._facts, self._constants = [], set(), {}
        self._concrete_inputs, self._runtime_guards = [], 0
        with restore_state(root), _RecordFactories(self):
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

    def root_call(
        self, root_fn: Callable[..., Any], is_module: bool
    ) -> tuple[Callable[..., Any], list[Any]]:
        return root_call(self, root_fn, is_module)

    def proxy(self, node: Node) -> torch.fx.Proxy:
        return ConcreteProxy(node, self)

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        if isinstance(m, self.leaf_types) or module_qualified_name in self.leaf_names:
            return True
        if getattr(m, "torchbend_leaf", False):
            return True
        return super().is_leaf_module(m, module_qualified_name)

    def call_module(
        self,
        m: torch.nn.Module,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if self.executing or not has_proxy((args, kwargs)):
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def create_arg(self, a: Any) -> Argument:
        if isinstance(a, torch.fx.Proxy):
            return super().create_arg(a)
        if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter):
            if a not in self.tensor_attrs and not any(a is b for _, b in self.root.named_buffers()):
                return self._constant(a)
        if isinstance(a, dict) and type(a) is not dict and has_proxy(dict(a)):
            return self._rebuild(a, dict(a))
        if (
            not isinstance(a, (tuple, list, dict, slice, torch.nn.Module, type))
            and hasattr(a, "__dict__")
            and has_proxy(dict(vars(a)))
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
        if self.on_value is not None:
            value = self._concrete_hook(node, value)
        self._annotate(node, kind, target, args, value)
        return proxy

    def _concrete_hook(self, node: Node, value: Any) -> Any:
        """Run ``on_value`` as concrete code: factories and module calls in it are not traced."""
        assert self.on_value is not None
        self.executing += 1
        try:
            return self.on_value(node, value)
        finally:
            self.executing -= 1

    def to_bool(self, obj: torch.fx.Proxy) -> bool:
        return bool(self._decide(obj, "bool", "logical"))

    def iter(self, obj: torch.fx.Proxy) -> Iterator[Any]:
        value = self.value_of(obj)
        if isinstance(value, Mapping):
            return iter(list(self._decide_keys(obj)))
        if not hasattr(value, "__getitem__"):
            obj = self.create_proxy("call_function", list, (obj,), {})
        n = self._decide(obj, "len", "loop")
        return iter([obj[i] for i in range(n)])  # type: ignore[index]  # Proxy defines __getitem__

    def keys(self, obj: torch.fx.Proxy) -> Any:
        return self._decide_keys(obj)

    # -- concrete values ---------------------------------------------------------------------

    def read_attribute(self, proxy: torch.fx.Proxy, attr: str) -> tuple[bool, Any]:
        """Read ``proxy.<attr>`` (a dtype, a device) as a value fixed by the input signature.

        Returns ``(False, None)`` when the concrete value has no such attribute. The dtypes or
        devices of all tensor inputs become facts the graph is guarded by.
        """
        value = self.value_of(proxy)
        if not hasattr(value, attr):
            return False, None
        what = "device" if SHAPE_ATTRIBUTES.get(attr) == "device" else "dtype"
        self._facts.update(
            (name, what, None) for name, v in self._inputs.items() if isinstance(v, torch.Tensor)
        )
        return True, getattr(value, attr)

    def value_of(self, proxy: torch.fx.Proxy) -> Any:
        """The concrete value of ``proxy`` on the example inputs."""
        if isinstance(proxy, ConcreteAttribute) and recorded_node(proxy) is None:
            return getattr(self.value_of(proxy.root), proxy.attr)
        return proxy.node.meta["tb_value"]

    def _concrete(self, value: Any) -> Any:
        return map_values(value, lambda v: self.value_of(v) if isinstance(v, torch.fx.Proxy) else v)

    def _placeholder(self, proxy: torch.fx.Proxy) -> Any:
        node = proxy.node
        name = str(node.target).lstrip("*")
        if name in self._inputs:
            value = self._inputs[name]
        elif node.args:
            value = node.args[0]
        else:
            value = (
                ()
                if str(node.target).startswith("*") and not str(node.target).startswith("**")
                else {}
            )
        if self.on_value is not None and isinstance(value, torch.Tensor):
            value = self._concrete_hook(node, value)
        node.meta["tb_value"] = value
        if not is_proxied_input(value):
            # ``*args``/``**kwargs`` left empty are no input of the call: nothing to guard.
            deps = frozenset({(name, "value", None)}) if name in self._inputs else frozenset()
            self._concrete_inputs.append(name)
            self._facts.update(deps)
            node.meta.update(tb_static=True, tb_deps=deps, tb_shape_deps=frozenset())
            return value
        if isinstance(value, torch.Tensor):
            node.meta.update(
                tb_static=False,
                tb_deps=frozenset(),
                tb_shape_deps=frozenset({(name, "shape", None)}),
                tb_input=name,
            )
        elif isinstance(value, (int, float)):
            node.meta.update(
                tb_static=True,
                tb_deps=frozenset({(name, "value", None)}),
                tb_shape_deps=frozenset(),
            )
        else:
            node.meta.update(
                tb_static=False, tb_deps=frozenset(), tb_shape_deps=frozenset({(name, "sig", None)})
            )
        return proxy

    def _execute(self, node: Node, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
        if target in self._constants and kind == "get_attr":
            return self._constants[target]
        cargs, ckwargs = self._concrete(args), self._concrete(kwargs)
        # While executing, module attributes read through torch.fx's patched ``__getattr__``
        # are plain values again (else reading a parameter would trace its read anew).
        self.executing += 1
        try:
            if kind == "get_attr":
                obj: Any = self.root
                for atom in str(target).split("."):
                    obj = getattr(obj, atom)
                return obj
            if kind == "call_function":
                return target(*cargs, **ckwargs)
            if kind == "call_method":
                return getattr(cargs[0], target)(*cargs[1:], **ckwargs)
            return self.root.get_submodule(target)(*cargs, **ckwargs)
        except Exception as e:
            where = self._user_location()
            raise TracingError(
                f"while tracing {type(self.root).__name__}.{self.traced_func_name}, node "
                f"'{node.name}' ({node.op} {target_name(target)}) at "
                f"{where[0]} failed: {type(e).__name__}: {e}"
            ) from e
        finally:
            self.executing -= 1

    def _annotate(self, node: Node, kind: str, target: Any, args: Any, value: Any) -> None:
        """Record in ``node.meta`` whether the value is fixed by the input signature."""
        node.meta["tb_value"] = value
        proxies = [a for a in leaves((args,)) if isinstance(a, torch.fx.Proxy)]
        metas = [p.node.meta for p in proxies]
        if kind == "get_attr":
            static = str(target) in self._constants
            node.meta.update(tb_static=static, tb_deps=frozenset(), tb_shape_deps=frozenset())
            return
        first = metas[0] if metas else {}
        shape_kind = None
        if kind == "call_function" and target is getattr and len(args) > 1:
            shape_kind = SHAPE_ATTRIBUTES.get(args[1])
        elif kind == "call_method":
            shape_kind = SHAPE_METHODS.get(target)
        if shape_kind is not None and first.get("tb_shape_deps") is not None:
            deps = first["tb_shape_deps"]
            if "tb_input" in first:
                index = None
                if target == "size" and len(args) > 1 and isinstance(args[1], int):
                    index = args[1]
                deps = frozenset({(first["tb_input"], shape_kind, index)})
            # The length of a shape (what ``len`` and unpacking read) is the number of dims.
            length_deps = frozenset(
                (name, "ndim", None) if what == "shape" else (name, what, index)
                for name, what, index in (
                    {(first["tb_input"], "shape", None)}
                    if "tb_input" in first
                    else first["tb_shape_deps"]
                )
            )
            node.meta.update(tb_static=True, tb_deps=deps, tb_shape_deps=length_deps)
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
        random = (kind == "call_function" and target in RANDOM_FACTORIES) or (
            kind == "call_method" and target in RANDOM_METHODS
        )
        static = not random and all(m.get("tb_static", False) for m in metas)
        deps = frozenset().union(*(m.get("tb_deps", frozenset()) for m in metas))
        shape_deps: frozenset[Fact] | None = frozenset()
        makes_tensors = holds_tensor(value)
        for p, m in zip(proxies, metas):
            v = m.get("tb_value")
            if holds_tensor(v):
                own = m.get("tb_shape_deps")
            elif not m.get("tb_static"):
                own = None
            elif isinstance(v, (tuple, list)) and not makes_tensors:
                own = m.get("tb_shape_deps")  # a sequence's length shapes sequences made of it
            else:
                own = m.get("tb_deps")  # sizes and numbers shape tensors by their values
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
        if (kind == "call_function" and target in DATA_SHAPED_FUNCTIONS) or (
            kind == "call_method" and target in DATA_SHAPED_METHODS
        ):
            shape_deps = None
        node.meta.update(
            tb_static=static, tb_deps=deps if static else frozenset(), tb_shape_deps=shape_deps
        )
        in_place = (kind == "call_function" and target is operator.setitem) or (
            kind == "call_method" and target.endswith("_") and not target.startswith("_")
        )
        if in_place and isinstance(args[0], torch.fx.Proxy):
            # The mutated tensor now holds what was written into it: a value fixed by the
            # signature before may depend on data (or on random draws) now.
            target_meta = args[0].node.meta
            target_meta["tb_static"] = static and target_meta.get("tb_static", False)
            target_meta["tb_deps"] = deps if target_meta["tb_static"] else frozenset()

    # -- decisions ---------------------------------------------------------------------------

    def escape(self, proxy: torch.fx.Proxy, how: str) -> Any:
        """Hand the concrete value of ``proxy`` to Python as ``how`` (len, int, float)."""
        line = self._user_location()[2]
        kind = "loop" if "range(" in line else "value"
        return self._decide(proxy, how, kind)

    def _decide(self, proxy: torch.fx.Proxy, how: str, kind: str) -> Any:
        node = proxy.node
        value = node.meta["tb_value"]
        got = READERS[how](value)
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
            guard.meta.update(
                tb_value=None,
                tb_static=True,
                tb_deps=frozenset(),
                tb_shape_deps=frozenset(),
                tb_guard=True,
            )
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
        node.meta.update(
            tb_value=tensor, tb_static=True, tb_deps=frozenset(), tb_shape_deps=frozenset()
        )
        return node

    def _rebuild(self, obj: Any, items: dict[Any, Any] | None) -> Argument:
        attributes = dict(vars(obj))
        if dataclasses.is_dataclass(obj) and items is None:
            attributes = {
                f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)
            } | attributes
        args = (class_key(type(obj)), items, attributes)
        proxy = self.create_proxy("call_function", rebuild_object, args, {})
        return proxy.node

    # -- after tracing -------------------------------------------------------------------------

    def _finalize(self, graph: torch.fx.Graph) -> Any:
        output = next(n for n in reversed(graph.nodes) if n.op == "output")
        outputs = _output_value(output.args[0])
        for node in reversed(list(graph.nodes)):
            if (
                not node.users
                and node.meta.get("tb_static")
                and not node.meta.get("tb_guard")
                and (
                    (node.op == "call_function" and node.target in PURE_FUNCTIONS)
                    or (node.op == "call_method" and node.target in SHAPE_METHODS)
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


def _output_value(arg: Any) -> Any:
    """The concrete value of an output argument, in the plain containers the graph returns
    (torch.fx stores node arguments in immutable lists and dicts)."""
    if isinstance(arg, Node):
        return arg.meta.get("tb_value")
    if isinstance(arg, tuple):
        values = [_output_value(a) for a in arg]
        return type(arg)(*values) if hasattr(arg, "_fields") else tuple(values)
    if isinstance(arg, list):
        return [_output_value(a) for a in arg]
    if isinstance(arg, dict):
        return {k: _output_value(v) for k, v in arg.items()}
    return arg


def describe_shape(value: Any) -> Any:
    """The shape of a tensor, or the nested shapes of a tuple of tensors."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in leaves(value)):
        return tuple(describe_shape(v) for v in value)
    return None


def describe_dtype(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in leaves(value)):
        return tuple(describe_dtype(v) for v in value)
    return None
