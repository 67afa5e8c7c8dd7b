"""BendedModule: the facade that traces, inspects, bends and runs a wrapped module."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch import nn

from .callbacks.base import BendingCallback
from .errors import BendingError, GuardError, SelectionError, TracingError, closest
from .rewriting import ActivationSlot, build_graph_module, install_view
from .selection import filter_names, matches, select
from .tables import Table, show
from .tracing import BendingTracer, DecisionChanged, FlowStep, TraceResult, fact_reader
from .tracing.facts import describe_fact
from .tracing.tensordict import TensorDictProgram, is_tensordict_module
from .weights import WeightBank

__all__ = ["ActivationInfo", "BendedModule", "Bending"]


@dataclass(frozen=True)
class ActivationInfo:
    """One activation of a traced method, as recorded at trace time."""

    name: str
    """Graph node name (what ``bend`` patterns match)."""
    op: str
    """Graph op: ``placeholder``, ``call_module``, ``call_function``, ``call_method``..."""
    target: str
    """The module path, function or method the node calls."""
    shape: Any
    """``torch.Size`` of a tensor, or a tuple of shapes for tuple outputs."""
    dtype: Any
    """``torch.dtype`` of a tensor, or a tuple of dtypes."""


@dataclass
class Bending:
    """One call of :meth:`BendedModule.bend`: a callback and the targets it bends."""

    callback: BendingCallback
    patterns: tuple[str, ...]
    fn: str | tuple[str, ...] | None
    weights: list[str]
    activations: dict[str, list[str]]
    registered: set[str] = field(default_factory=set)


class _Signature:
    """Binds call arguments of a method to its parameter names, quickly."""

    def __init__(self, owner: str, method: str, fn: Callable[..., Any]) -> None:
        sig = inspect.signature(fn)
        self.text = f"{owner}.{method}{sig}"
        params = list(sig.parameters.values())
        if any(p.kind is p.VAR_POSITIONAL for p in params):
            raise TracingError(
                f"{self.text} takes *args, which cannot be traced by name; wrap it in a method "
                "with named arguments."
            )
        self.positional = [
            p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        self.names = [p.name for p in params if p.kind is not p.VAR_KEYWORD]
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.known = frozenset(self.names)

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if not kwargs and len(args) == len(self.names) == len(self.positional):
            return dict(zip(self.names, args))
        if len(args) > len(self.positional):
            raise TracingError(
                f"{self.text} takes {len(self.positional)} positional argument(s), got {len(args)}"
            )
        inputs = dict(zip(self.positional, args))
        for k, v in kwargs.items():
            if k not in self.known:
                hint = closest(k, self.names)
                raise TracingError(
                    f"{self.text} has no argument {k!r}"
                    + (f"; did you mean {hint[0]!r}?" if hint else "")
                )
            if k in inputs:
                raise TracingError(f"{self.text} got argument {k!r} twice")
            inputs[k] = v
        if len(inputs) < len(self.names):
            for name in self.names:
                if name not in inputs:
                    if name not in self.defaults:
                        raise TracingError(f"{self.text} is missing argument {name!r}")
                    inputs[name] = self.defaults[name]
        return inputs


class _Entry:
    """One traced graph of one method, and the inputs it is valid for."""

    def __init__(self, result: TraceResult, training: bool, names: Sequence[str]) -> None:
        self.result = result
        self.graph = result.graph
        self.training = training
        self.facts = result.facts
        self.readers = tuple(fact_reader(f) for f in result.facts)
        self.keys: set[tuple[Any, ...]] = set()
        self.input_names = tuple(
            str(n.target)
            for n in result.graph.nodes
            if n.op == "placeholder" and not str(n.target).startswith("*")
        )
        assert set(self.input_names) <= set(names)
        self.gm: torch.fx.GraphModule | None = None

    def key(self, inputs: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(read(inputs) for read in self.readers)

    def same_decisions(self, result: TraceResult, training: bool) -> bool:
        return (
            training is self.training
            and result.facts == self.facts
            and [(s.kind, s.name, s.value) for s in result.flow_steps]
            == [(s.kind, s.name, s.value) for s in self.result.flow_steps]
            and result.graph.python_code("self").src == self.graph.python_code("self").src
        )

    def nodes(self, tensors_only: bool) -> list[torch.fx.Node]:
        return [
            n
            for n in self.graph.nodes
            if n.op != "output"
            and not n.meta.get("tb_guard")
            and (n.meta.get("tb_tensor") if tensors_only else n.meta.get("tb_shape") is not None)
        ]


class _Method:
    """The traced graphs of one method."""

    def __init__(self, name: str, signature: _Signature) -> None:
        self.name = name
        self.signature = signature
        self.entries: list[_Entry] = []
        self.current: _Entry | None = None


def _clone_inputs(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_clone_inputs(v) for v in value)
    if type(value) is dict:
        return {k: _clone_inputs(v) for k, v in value.items()}
    if hasattr(value, "batch_size") and hasattr(value, "clone"):  # TensorDict
        return value.clone()
    return value


class BendedModule(nn.Module):
    """Wraps a module to trace, inspect and bend its weights and activations.

    The wrapped module is never modified: bent weights live in copies, activation bendings in
    rewritten copies of the traced graphs. ``BendedModule`` is itself an ``nn.Module``:
    ``.to()``, ``.eval()``, ``state_dict()`` (the wrapped module under ``module.``, and the
    callbacks' state under ``callbacks.``) behave as usual.

    Args:
        module: the model to bend.
        leaves: module types or qualified names to keep as ``call_module`` leaves in graphs,
            besides the standard ``torch.nn`` layers (which always are).
        strict: when a call's inputs take a decision other than the traced one, raise a
            :class:`GuardError` naming it, instead of tracing a graph for those inputs.
        max_graphs: graphs kept per method before warning that inputs keep changing decisions.

    Example:
        >>> import torch, torchbend as tb
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 4, 3)))
        >>> bended.trace(input=torch.randn(1, 1, 16)).__class__.__name__
        'Graph'
        >>> bended.bend(tb.Scale(0.), "_0$")
        ['forward:_0']
        >>> bool((bended(torch.randn(1, 1, 16)) == 0).all())
        True

    Notes:
        Calls are matched to graphs by the facts of their inputs the traced decisions read
        (a dimension used by ``range``, a flag used by ``if``). A call with other facts is
        traced again once, which runs the model one more time; decisions read from tensor
        values are checked inside the graph, which costs a device synchronisation on GPU.
    """

    def __init__(
        self,
        module: nn.Module,
        *,
        leaves: Iterable[type | str] = (),
        strict: bool = False,
        max_graphs: int = 16,
    ) -> None:
        if not isinstance(module, nn.Module):
            raise TracingError(
                f"BendedModule wraps an nn.Module, got {type(module).__name__}; wrap plain "
                "functions in an nn.Module whose forward calls them."
            )
        super().__init__()
        self.module = module
        self.callbacks = nn.ModuleList()
        self.leaves = tuple(leaves)
        self.strict = strict
        self.max_graphs = max_graphs
        self._weights = WeightBank(module)
        self._methods: dict[str, _Method] = {}
        self._bendings: list[Bending] = []

    # -- tracing ---------------------------------------------------------------------------------

    def trace(
        self,
        fn: str = "forward",
        /,
        *,
        return_out: bool = False,
        _return_out: bool = False,
        **inputs: Any,
    ) -> Any:
        """Trace method ``fn`` on example ``inputs`` given by argument name.

        Returns the traced ``torch.fx.Graph`` (its ``flow_steps`` list the decisions baked in),
        or ``(graph, outputs)`` with ``return_out=True`` (``_return_out`` is the same flag, as
        spelled in the original torchbend notebooks). Bendings already set apply to the new
        graph as well.
        """
        method = self._method(fn)
        bound = method.signature.bind((), inputs)
        entry, result = self._trace_entry(method, bound)
        method.current = entry
        if return_out or _return_out:
            return entry.graph, result.outputs
        return entry.graph

    @property
    def traced_methods(self) -> list[str]:
        """Names of the methods traced so far."""
        return list(self._methods)

    def _method(self, fn: str) -> _Method:
        method = self._methods.get(fn)
        if method is None:
            impl = getattr(self.module, fn, None)
            if not callable(impl) or isinstance(impl, nn.Module):
                names = [n for n in dir(type(self.module)) if not n.startswith("_")]
                hint = closest(fn, names)
                raise TracingError(
                    f"{type(self.module).__name__} has no method {fn!r}"
                    + (f"; did you mean {hint[0]!r}?" if hint else "")
                )
            if fn == "forward" and is_tensordict_module(self.module):
                impl = TensorDictProgram.forward.__get__(self.module)
            method = _Method(fn, _Signature(type(self.module).__name__, fn, impl))
            self._methods[fn] = method
        return method

    def _trace_entry(self, method: _Method, inputs: dict[str, Any]) -> tuple[_Entry, TraceResult]:
        tracer = BendingTracer(self.leaves)
        tracer.on_value = functools.partial(self._bend_traced_value, method.name)
        root = self._weights.view
        if method.name == "forward" and is_tensordict_module(root):
            root = TensorDictProgram(root)
        result = tracer.trace_method(root, method.name, _clone_inputs(inputs))
        training = self.module.training
        for entry in method.entries:
            if entry.same_decisions(result, training):
                entry.keys.add(entry.key(inputs))
                return entry, result
        entry = _Entry(result, training, method.signature.names)
        entry.keys.add(entry.key(inputs))
        if method.entries and self.strict:
            raise GuardError(self._describe_change(method, result))
        method.entries.insert(0, entry)
        if len(method.entries) > self.max_graphs:
            warnings.warn(
                f"{type(self.module).__name__}.{method.name} now has {len(method.entries)} "
                "traced graphs: its inputs keep taking new decisions "
                f"({self._describe_change(method, result)}). Each new one costs a trace.",
                stacklevel=3,
            )
        self._attach_bendings(method, entry)
        self._build(method, entry)
        if method.current is None:
            method.current = entry
        return entry, result

    def _describe_change(self, method: _Method, result: TraceResult) -> str:
        old = method.current or method.entries[0]
        label = f"{type(self.module).__name__}.{method.name}"
        for i, new_step in enumerate(result.flow_steps):
            if i >= len(old.result.flow_steps):
                return f"{label} took a decision the traced graph does not have: {_step(new_step)}"
            old_step = old.result.flow_steps[i]
            if (old_step.name, old_step.value) != (new_step.name, new_step.value):
                return (
                    f"{label}: decision {old_step.kind} '{old_step.name}' at {old_step.file} "
                    f"({old_step.function}) was {old_step.value!r} when traced, "
                    f"now {new_step.value!r}"
                )
        facts = ", ".join(describe_fact(f) for f in old.facts) or "none"
        return f"{label} traced a different graph for these inputs (facts read: {facts})"

    # -- calling ---------------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("forward", args, kwargs)

    def call(self, fn: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call method ``fn``: its bended graph if traced, else the module's method with the
        bended weights."""
        return self._call(fn, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_modules", {}).get("module")
            attr = getattr(module, name, None) if not name.startswith("_") else None
            if attr is None or not callable(attr) or isinstance(attr, nn.Module):
                raise
            return functools.partial(self.call, name)

    def _call(self, fn: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        method = self._methods.get(fn)
        if method is None:
            return getattr(self._weights.view, fn)(*args, **kwargs)
        inputs = method.signature.bind(args, kwargs)
        training = self.module.training
        changed: tuple[_Entry, DecisionChanged] | None = None
        for entry in method.entries:
            if entry.training is training and entry.key(inputs) in entry.keys:
                assert entry.gm is not None
                try:
                    # forward, not __call__: GraphModules carry no hooks, and this is the hot path.
                    return entry.gm.forward(*[inputs[n] for n in entry.input_names])
                except DecisionChanged as e:
                    changed = (entry, e)
        return self._call_new_graph(method, inputs, changed)

    def _call_new_graph(
        self,
        method: _Method,
        inputs: dict[str, Any],
        changed: tuple[_Entry, DecisionChanged] | None,
    ) -> Any:
        if changed is not None and self.strict:
            entry, e = changed
            step = entry.result.flow_steps[e.step]
            raise GuardError(
                f"{type(self.module).__name__}.{method.name}: decision {step.kind} '{step.name}' "
                f"at {step.file} ({step.function}) was {e.expected!r} when traced, now "
                f"{e.got!r}. Set strict=False to trace a graph for these inputs."
            ) from None
        entry, _ = self._trace_entry(method, inputs)
        assert entry.gm is not None
        try:
            return entry.gm(*[inputs[n] for n in entry.input_names])
        except DecisionChanged as e:
            step = entry.result.flow_steps[e.step]
            raise TracingError(
                f"{type(self.module).__name__}.{method.name}: decision {step.kind} '{step.name}' "
                f"at {step.file} was {e.expected!r} while tracing these inputs and {e.got!r} when "
                "running them: it depends on values drawn anew at each call (a random "
                "constructor, or a Noise bending on an activation before it)."
            ) from None

    # -- bending ---------------------------------------------------------------------------------

    def bend(
        self,
        callback: BendingCallback,
        *patterns: str,
        fn: str | Sequence[str] | None = None,
    ) -> list[str]:
        """Bend the weights and activations matched by ``patterns`` with ``callback``.

        Patterns are regular expressions matched (``re.match``) against weight names
        (``weight_names``) and activation names of traced methods (``activation_names(fn)``);
        ``"encode:conv$"`` scopes a pattern to the activations of ``encode``; ``fn`` restricts
        unscoped patterns to some methods. Several callbacks on one target apply in the order
        they were given. Returns the bent keys: weight names, and ``"<method>:<node>"``.
        """
        if isinstance(callback, type) and issubclass(callback, BendingCallback):
            raise BendingError(
                f"bend() takes a callback instance, got the class {callback.__name__}; "
                f"call it: {callback.__name__}(...)"
            )
        if not isinstance(callback, BendingCallback):
            raise BendingError(
                f"bend() takes a BendingCallback (tb.Mask(), tb.Scale()...), got "
                f"{type(callback).__name__}: {callback!r}"
            )
        if not patterns:
            raise SelectionError(
                "bend() needs at least one pattern, e.g. bended.bend(tb.Mask(0.3), 'conv$'); "
                f"weights: {self.weight_names[:5]}..."
            )
        fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
        selection = select(
            patterns,
            self._weights.names(),
            self._bendable(),
            fns,
            owner=type(self.module).__name__,
        )
        bending = Bending(callback, tuple(patterns), fns, selection.weights, selection.activations)
        for name in bending.weights:
            w = self._weights.original(name)
            callback.register_target(name, w.shape, w.dtype, w.device)
        self._bendings.append(bending)
        if not any(cb is callback for cb in self.callbacks):
            self.callbacks.append(callback)
        for method in self._methods.values():
            for entry in method.entries:
                self._attach_bending(bending, method, entry)
        if bending.weights:
            self._update_weights(bending.weights)
        for name in bending.activations:
            method = self._methods[name]
            for entry in method.entries:
                self._build(method, entry)
        return selection.keys()

    def bended_keys(self) -> list[str]:
        """Every bent target: weight names, then ``"<method>:<node>"`` activations."""
        keys: list[str] = []
        for b in self._bendings:
            for key in b.weights + [f"{m}:{n}" for m, ns in b.activations.items() for n in ns]:
                if key not in keys:
                    keys.append(key)
        return keys

    @property
    def bendings(self) -> list[Bending]:
        """The bendings applied, in order."""
        return list(self._bendings)

    def reset(self) -> None:
        """Remove every bending: outputs are again those of the wrapped module, bit for bit."""
        self._bendings.clear()
        self.callbacks = nn.ModuleList()
        self._weights.set({})
        for method in self._methods.values():
            for entry in method.entries:
                self._build(method, entry)

    def _bendable(self) -> dict[str, list[str]]:
        return {
            name: _unique(n.name for e in m.entries for n in e.nodes(tensors_only=True))
            for name, m in self._methods.items()
        }

    def _attach_bendings(self, method: _Method, entry: _Entry) -> None:
        for bending in self._bendings:
            self._attach_bending(bending, method, entry)

    def _applies(self, bending: Bending, method: str, node: str) -> bool:
        fns = None if bending.fn is None else {bending.fn} if isinstance(bending.fn, str) else set(bending.fn)
        return matches(bending.patterns, method, node, fns)

    def _register(self, bending: Bending, method: str, node: str, value: Any) -> None:
        key = f"{method}:{node}"
        if key not in bending.registered:
            shape, dtype, device = value
            bending.callback.register_target(key, shape, dtype, device)
            bending.registered.add(key)
        matched = bending.activations.setdefault(method, [])
        if node not in matched:
            matched.append(node)

    def _attach_bending(self, bending: Bending, method: _Method, entry: _Entry) -> None:
        """Match ``bending``'s patterns on a graph traced before or after it."""
        for node in entry.nodes(tensors_only=True):
            if self._applies(bending, method.name, node.name):
                meta = (node.meta["tb_shape"], node.meta["tb_dtype"], node.meta["tb_device"])
                self._register(bending, method.name, node.name, meta)

    def _bend_traced_value(self, method: str, node: torch.fx.Node, value: Any) -> Any:
        """Bend concrete values while tracing, so decisions are taken on bent activations."""
        if not isinstance(value, torch.Tensor):
            return value
        for bending in self._bendings:
            if self._applies(bending, method, node.name):
                self._register(bending, method, node.name, (value.shape, value.dtype, value.device))
                value = bending.callback(value, f"{method}:{node.name}")
        return value

    def _build(self, method: _Method, entry: _Entry) -> None:
        slots: dict[str, list[BendingCallback]] = {}
        present = {n.name for n in entry.nodes(tensors_only=True)}
        for bending in self._bendings:
            for name in bending.activations.get(method.name, []):
                if name in present:
                    slots.setdefault(name, []).append(bending.callback)
        modules = {n: ActivationSlot(f"{method.name}:{n}", cbs) for n, cbs in slots.items()}
        entry.gm = build_graph_module(
            entry.graph,
            self._weights.view,
            entry.result.constants,
            modules,
            class_name=f"Bended{type(self.module).__name__}_{method.name}",
        )

    def _update_weights(self, names: Iterable[str]) -> None:
        bent: dict[str, torch.Tensor] = dict(self._weights.bent)
        with torch.no_grad():
            for name in names:
                weight: torch.Tensor = self._weights.original(name).detach()
                for b in self._bendings:
                    if name in b.weights:
                        weight = b.callback.bend_weight(weight, name)
                bent[name] = weight
        self._weights.set(bent)
        self._install_view()

    def _install_view(self) -> None:
        for method in self._methods.values():
            for entry in method.entries:
                if entry.gm is not None:
                    install_view(entry.gm, self._weights.view)

    # -- nn.Module behaviour -----------------------------------------------------------------------

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        super()._apply(fn, recurse)
        self._weights.set({k: fn(v.detach()) for k, v in self._weights.bent.items()})
        for method in self._methods.values():
            for entry in method.entries:
                entry.result.constants = {k: fn(v) for k, v in entry.result.constants.items()}
                self._build(method, entry)
        return self

    def train(self, mode: bool = True) -> BendedModule:
        super().train(mode)
        self._weights.refresh()
        self._install_view()
        return self

    def bended_state_dict(self) -> dict[str, torch.Tensor]:
        """The wrapped module's state dict with bent weights in place of the originals."""
        state: dict[str, torch.Tensor] = dict(self.module.state_dict())
        for name, t in self._weights.bent.items():
            state[name] = t.detach()
        return state

    # -- inspection --------------------------------------------------------------------------------

    @property
    def weight_names(self) -> list[str]:
        """Dotted names of the wrapped module's parameters."""
        return self._weights.names()

    def weight_shape(self, name: str) -> torch.Size:
        """Shape of weight ``name``."""
        return self._weight(name).shape

    def _weight(self, name: str) -> torch.Tensor:
        if name not in self._weights.names():
            hint = closest(name, self._weights.names())
            raise SelectionError(
                f"{type(self.module).__name__} has no weight {name!r}"
                + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
            )
        return self._weights.current(name)

    def print_weights(
        self,
        flt: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
        out: str | Path | None = None,
    ) -> Table:
        """Table of weights (current values: bent where bent) with their statistics."""
        rows = []
        bent = set(self._weights.bent)
        for name in filter_names(self._weights.names(), flt, exclude):
            w = self._weights.current(name).detach()
            f = w.float()
            std = f.std().item() if w.numel() > 1 else 0.0
            rows.append(
                [
                    name,
                    list(w.shape),
                    str(w.dtype).removeprefix("torch."),
                    f.min().item(),
                    f.max().item(),
                    f.mean().item(),
                    std,
                    "yes" if name in bent else "",
                ]
            )
        table = Table(rows, ["name", "shape", "dtype", "min", "max", "mean", "std", "bent"])
        return show(table, out)

    def _traced(self, fn: str) -> _Entry:
        method = self._methods.get(fn)
        if method is None or method.current is None:
            raise TracingError(
                f"method {fn!r} of {type(self.module).__name__} is not traced (traced: "
                f"{self.traced_methods or 'none'}); call bended.trace({fn!r}, <inputs>) first."
            )
        return method.current

    def activations(
        self,
        fn: str = "forward",
        op: str | Sequence[str] | None = None,
        flt: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
    ) -> list[ActivationInfo]:
        """Activations of the last graph traced for ``fn`` (tensor-valued nodes)."""
        entry = self._traced(fn)
        ops = {op} if isinstance(op, str) else set(op or ())
        nodes = {n.name: n for n in entry.nodes(tensors_only=False)}
        return [
            ActivationInfo(
                n.name,
                n.op,
                n._pretty_print_target(n.target),
                n.meta["tb_shape"],
                n.meta["tb_dtype"],
            )
            for name in filter_names(nodes, flt, exclude)
            for n in [nodes[name]]
            if not ops or n.op in ops
        ]

    def activation_names(self, fn: str = "forward") -> list[str]:
        """Names of the activations of ``fn`` (what ``bend`` patterns match)."""
        return [a.name for a in self.activations(fn)]

    def activation_shape(self, name: str, fn: str = "forward") -> Any:
        """Shape of activation ``name`` of ``fn``, as traced."""
        for a in self.activations(fn):
            if a.name == name:
                return a.shape
        hint = closest(name, self.activation_names(fn))
        raise SelectionError(
            f"{fn} of {type(self.module).__name__} has no activation {name!r}"
            + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
        )

    def print_activations(
        self,
        fn: str = "forward",
        op: str | Sequence[str] | None = None,
        flt: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
        out: str | Path | None = None,
    ) -> Table:
        """Table of the activations of ``fn``: name, op, shape, dtype."""
        rows = [
            [a.name, a.op, _fmt(a.shape), _fmt(a.dtype)]
            for a in self.activations(fn, op, flt, exclude)
        ]
        return show(Table(rows, ["name", "op", "shape", "dtype"]), out)

    def graph(self, fn: str = "forward") -> torch.fx.Graph:
        """The last graph traced for ``fn`` (unbent; ``graph.flow_steps`` lists decisions)."""
        return self._traced(fn).graph

    def graph_module(self, fn: str = "forward") -> torch.fx.GraphModule:
        """The bended GraphModule that runs for ``fn`` on inputs like the last traced ones."""
        gm = self._traced(fn).gm
        assert gm is not None
        return gm

    def flow_steps(self, fn: str = "forward") -> list[FlowStep]:
        """The decisions baked into the last graph traced for ``fn``."""
        return list(self._traced(fn).result.flow_steps)

    def print_graph(self, fn: str = "forward", out: str | Path | None = None) -> str:
        """Print the bended graph of ``fn`` (bending slots included)."""
        text = str(self.graph_module(fn).graph)
        if out is None:
            print(text)
        else:
            Path(out).write_text(text + "\n")
        return text


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _fmt(value: Any) -> str:
    if isinstance(value, torch.Size):
        return f"torch.Size({list(value)})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value)


def _step(step: FlowStep) -> str:
    return f"{step.kind} '{step.name}' = {step.value!r} at {step.file} ({step.function})"
