"""The tracer: torch.fx symbolic tracing with concrete execution running alongside."""

from __future__ import annotations

import inspect
import linecache
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

import torch
import torch.fx
from torch.fx.node import Argument, Node

from ..errors import TracingError
from .assignments import assigned_since, identity_guards, in_leaf, record_assignments, snapshot
from .attributes import module_state, runs_user_code
from .compat import RootCallTracer, recorded_node, target_name
from .factories import generator_at, held_across_calls, traced_factories
from .facts import Fact
from .flow import READERS, FlowStep, check_decision
from .introspection import decision_file, user_inspection
from .objects import check_object_input, class_key, holds_node, object_fields, rebuild_object
from .operations import SHAPE_ATTRIBUTES, returns_none
from .placeholders import root_call
from .propagation import finalize, input_record, record_call
from .proxy import ConcreteAttribute, ConcreteProxy
from .records import NodeRecord, TracedGraph, record_of, set_record
from .state import restore_state
from .values import has_proxy, is_proxied_input, map_values

__all__ = ["BendingTracer"]


class BendingTracer(RootCallTracer):
    """A :class:`torch.fx.Tracer` that also runs the module on example inputs.

    Each node's concrete value is kept while tracing, so that shapes, lengths and booleans can
    be handed back to Python. Every such decision is recorded as a :class:`FlowStep` and
    guarded: by a fact of the input signature when it only depends on shapes or scalar
    arguments, or by a check inserted in the graph when it depends on data. What tracing found
    out about each node is in its :class:`NodeRecord` (``record_of(node)``).

    Args:
        leaves: module types, or qualified module names, kept as ``call_module`` leaves in
            addition to the standard ``torch.nn`` layers.
        on_value: called with each node and its concrete value; returns the value tracing
            continues with (``BendedModule`` bends activations there, so decisions see bent
            values).
        numbers_as_values: int and float arguments, and numbers computed while tracing (a
            size, a length), are handed to the code as the numbers they are, each guarded (a
            fact of the inputs, or a check in the graph) instead of traced: for code that
            passes them where only a real number goes (``Generator.manual_seed``).
    """

    proxy_buffer_attributes = True

    def __init__(
        self,
        leaves: Iterable[type | str] = (),
        on_value: Callable[[Node, Any], Any] | None = None,
        numbers_as_values: bool = False,
    ) -> None:
        super().__init__(autowrap_modules=(math,))
        self.on_value = on_value
        self.numbers_as_values = numbers_as_values
        leaves = tuple(leaves)
        self.leaf_types = tuple(x for x in leaves if isinstance(x, type))
        self.leaf_names = frozenset(x for x in leaves if isinstance(x, str))
        self.executing = 0
        self._inputs: dict[str, Any] = {}
        self._values: dict[Node, Any] = {}
        self._steps: list[FlowStep] = []
        self._facts: set[Fact] = set()
        self._constants: dict[str, torch.Tensor] = {}
        self._concrete_inputs: list[str] = []
        self._runtime_guards = 0
        self._modules: dict[int, torch.nn.Module] = {}
        self.grad_mode_read = False

    # -- entry point -------------------------------------------------------------------------

    def trace_method(
        self, root: torch.nn.Module, method: str, inputs: dict[str, Any]
    ) -> TracedGraph:
        """Trace ``root.<method>`` on ``inputs`` (a mapping of argument name to value)."""
        self.traced_func_name = method
        self._inputs, self._values = inputs, {}
        self._steps, self._facts, self._constants = [], set(), {}
        self._concrete_inputs, self._runtime_guards = [], 0
        self._modules, self.grad_mode_read = {id(root): root}, False
        try:
            with restore_state(root), traced_factories(self), user_inspection(self):
                before = snapshot(root, in_leaf(self, root))
                graph = self.trace(root)
                record_assignments(self, graph, assigned_since(before))
            outputs = self._finalize(graph)
        finally:
            self._values = {}  # graphs keep no example values
        traced = TracedGraph(
            graph,
            constants=self._constants,
            flow_steps=list(self._steps),
            guard_facts=tuple(sorted(self._facts, key=repr)),
            concrete_inputs=tuple(self._concrete_inputs),
            outputs=outputs,
            runtime_guards=self._runtime_guards,
        )
        traced.module_state = module_state(self._modules.values()) + identity_guards(root.modules())
        traced.grad_mode = torch.is_grad_enabled() if self.grad_mode_read else None
        return traced

    # -- torch.fx hooks ----------------------------------------------------------------------

    def root_call(
        self, root_fn: Callable[..., Any], is_module: bool
    ) -> tuple[Callable[..., Any], list[Any]]:
        return root_call(self, root_fn, is_module, list(self._inputs))

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
        if self.executing or self.elsewhere():
            return forward(*args, **kwargs)
        path = self._path_of(m)
        if runs_user_code(m) and not self.is_leaf_module(m, path):
            self._modules.setdefault(id(m), m)  # its code may read ``self.training``
        if not has_proxy((args, kwargs)):
            return forward(*args, **kwargs)
        if not path and m is not self.root:
            # A module made in forward (``ACT2FN[name](x)`` builds an activation per call):
            # no node can name it, so its operations join the graph of its caller.
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def _path_of(self, m: torch.nn.Module) -> str:
        try:
            return self.path_of_module(m)
        except NameError:  # a module made in forward, no attribute of the root
            return ""

    def create_arg(self, a: Any) -> Argument:
        if isinstance(a, torch.fx.Proxy):
            return a.node
        if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter):
            if a not in self.tensor_attrs and not any(a is b for _, b in self.root.named_buffers()):
                return self._constant(a)
        if isinstance(a, torch.Generator) and not held_across_calls(a, self.root, self._inputs):
            # Made in forward (it is no attribute, no input): each call makes it anew, in the
            # state the draw found it in (its seed, when traced, is a fact of the graph).
            state = self._constant(a.get_state())
            return self.create_node("call_function", generator_at, (str(a.device), state), {})
        fields = None if isinstance(a, torch.nn.Module) else object_fields(a)
        if fields is not None and holds_node(fields, _is_proxy):
            items, attributes = fields
            args = (class_key(type(a)), items, attributes)
            return self.create_proxy("call_function", rebuild_object, args, {}).node
        if type(a).__module__ == "numpy" and isinstance(a, numbers.Number):
            a = a.item()  # type: ignore[attr-defined]  # a NumPy scalar (np.prod of a config)
        try:
            return super().create_arg(a)
        except NotImplementedError:
            where = self._user_location()[0]
            raise TracingError(
                f"while tracing {type(self.root).__name__}.{self.traced_func_name}, code at "
                f"{where} passes a {type(a).__name__} to a traced operation: graphs cannot hold "
                "such an object. Pass inputs that avoid it, or make the module using it a leaf "
                "(torchbend_leaf = True)."
            ) from None

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
        self._values[node] = value
        if kind == "get_attr":
            static = str(target) in self._constants
            set_record(node, NodeRecord(static=static, shape_deps=frozenset()))
        else:
            record_call(node, kind, target, args, value, self._values.get)
        if (value is None or type(value) is str) and not returns_none(kind, target):
            # Code tests ``is None`` on what a call returned (``d.get("mask")``) or compares a
            # string (``cfg["mode"]``): hand it the value itself, guarding that it stays so.
            self._decide(proxy, "none" if value is None else "str", "value")
            return value
        if self.numbers_as_values and type(value) in (int, float):
            return self._decide(proxy, type(value).__name__, "value")  # a guarded number
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

    # -- concrete values (what ConcreteProxy asks for) ---------------------------------------

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
        if issubclass(type(proxy), ConcreteAttribute):  # ``type``: see ConcreteProxy.__class__
            attribute = cast(ConcreteAttribute, proxy)
            node = recorded_node(attribute)
            if node is None:  # not recorded yet: read it without recording it
                return getattr(self.value_of(attribute.root), attribute.attr)
            return self._values[node]
        return self._values.get(proxy.node)

    def escape(self, proxy: torch.fx.Proxy, how: str) -> Any:
        """Hand the concrete value of ``proxy`` to Python as ``how`` (len, int, float)."""
        line = self._user_location()[2]
        kind = "loop" if "range(" in line else "value"
        return self._decide(proxy, how, kind)

    def _concrete(self, value: Any) -> Any:
        return map_values(value, lambda v: self.value_of(v) if isinstance(v, torch.fx.Proxy) else v)

    def _placeholder(self, proxy: torch.fx.Proxy) -> Any:
        node = proxy.node
        name = str(node.target)
        if name in self._inputs:
            value = self._inputs[name]
        elif node.args:
            value = node.args[0]
        else:
            raise TracingError(
                f"{type(self.root).__name__}.{self.traced_func_name} is traced without a value "
                f"for its argument {name!r}"
            )
        if self.on_value is not None and isinstance(value, torch.Tensor):
            value = self._concrete_hook(node, value)
        self._values[node] = value
        if not is_proxied_input(value) or (self.numbers_as_values and type(value) in (int, float)):
            check_object_input(f"{type(self.root).__name__}.{self.traced_func_name}", name, value)
            # A default (the call did not give it) is no input of the call: nothing to guard.
            deps = frozenset({(name, "value", None)}) if name in self._inputs else frozenset()
            self._concrete_inputs.append(name)
            self._facts.update(deps)
            set_record(node, NodeRecord(static=True, deps=deps, shape_deps=frozenset()))
            return value
        set_record(node, input_record(name, value))
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

    # -- decisions ---------------------------------------------------------------------------

    def _decide(self, proxy: torch.fx.Proxy, how: str, kind: str) -> Any:
        node = proxy.node
        got = READERS[how](self._values[node])
        record = record_of(node)
        deps: frozenset[Fact] | None
        if how == "len":
            deps = record.shape_deps
            if record.input is not None:
                deps = frozenset({(record.input, "shape", 0)})
            static = deps is not None
        else:
            static, deps = record.static, record.deps
        file, function, _ = self._user_location()
        index = len(self._steps)
        if static:
            checked = "signature" if deps else "constant"
            self._facts.update(deps or ())
        else:
            checked = "runtime"
            guard = self.create_node("call_function", check_decision, (node, how, got, index), {})
            set_record(guard, NodeRecord(static=True, shape_deps=frozenset()))
            self._runtime_guards += 1
        self._steps.append(FlowStep(kind, node.name, got, file, function, checked))
        return got

    def _decide_keys(self, proxy: torch.fx.Proxy) -> Any:
        keys = list(self.value_of(proxy).keys())
        self._decide(proxy, "len", "loop")
        return keys

    def _user_location(self) -> tuple[str, str, str]:
        frame = inspect.currentframe()
        while frame is not None and not decision_file(frame.f_code.co_filename):
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
        self._values[node] = tensor
        set_record(node, NodeRecord(static=True, shape_deps=frozenset()))
        return node

    # -- after tracing -------------------------------------------------------------------------

    def _finalize(self, graph: torch.fx.Graph) -> Any:
        return finalize(graph, self._values.get)


def _is_proxy(value: Any) -> bool:
    return isinstance(value, torch.fx.Proxy)
