"""The method table: traced methods, their graphs, dispatch of calls to them, and their guards.

It has the one place that traces (its :class:`~torchbend.engine.entries.EntryTracer`, which
asks a tracing backend for a graph of a method on example inputs), keeps one :class:`Entry`
per set of decisions, and routes each call to the entry whose guards its inputs pass (tracing
again, once, for inputs that take other decisions).
What happens to a new entry (bendings attached, a GraphModule compiled) is left to the
:class:`EntryHooks` it is given, so that the table knows nothing of bending.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn

from ..errors import GuardError, TracingError, did_you_mean
from ..tracing import DecisionChanged, TracedGraph
from ..tracing.backends import Backend, TorchScriptBackend
from ..tracing.tensordict import TensorDictProgram, is_tensordict_module, keyword_call
from ..tracing.values import clone_inputs
from .dispatch import Entry, Method, Signature, signature_of
from .entries import EntryTracer
from .protocols import EntryHooks, ModuleSource
from .rewriting import install_module
from .selfcheck import RandomState, untouched

__all__ = ["MethodTable", "runnable"]


class MethodTable:
    """The traced methods of one wrapped module.

    Args:
        module: the wrapped module (its type names methods in messages, its ``training`` flag
            is part of every guard).
        backend: what traces.
        hooks: what is done with each new graph (the bending set).
        weights: the module graphs read their weights from (the weight bank).
        strict: raise :class:`GuardError` instead of tracing again when a call takes another
            decision.
        max_graphs: graphs per method before warning that inputs keep changing decisions.
        check: run each new graph on the inputs it was traced with and compare its outputs
            with those of the concrete run (see :mod:`torchbend.engine.selfcheck`).
        reserved: names a derived method cannot take (the facade's own attributes).
    """

    def __init__(
        self,
        module: nn.Module,
        backend: Backend,
        hooks: EntryHooks,
        weights: ModuleSource,
        strict: bool = False,
        max_graphs: int = 16,
        check: bool = True,
        reserved: Collection[str] = (),
    ) -> None:
        self.module = module
        self.tensordict = is_tensordict_module(module)
        """Whether the module is a tensordict module (called by TensorDict or by its keys)."""
        self.backend = backend
        self.hooks = hooks
        self.weights = weights
        self.strict = strict
        self.reserved = frozenset(reserved)
        """Names a derived method cannot take (the facade's own attributes)."""
        self.tracer = EntryTracer(module, backend, hooks, weights, strict, max_graphs, check)
        self._methods: dict[str, Method] = {}

    @property
    def owner(self) -> str:
        return type(self.module).__name__

    # -- the table -------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Methods traced so far (derived ones included)."""
        return list(self._methods)

    def get(self, fn: str) -> Method | None:
        return self._methods.get(fn)

    def __iter__(self) -> Iterator[Method]:
        return iter(list(self._methods.values()))

    def entries(self) -> Iterator[tuple[Method, Entry]]:
        """Every graph of every method."""
        for method in list(self._methods.values()):
            for entry in list(method.entries):
                yield method, entry

    def is_method(self, name: str) -> bool:
        """Whether ``name`` is a traced method or a public method of the wrapped module."""
        if name in self._methods:
            return True
        attr = getattr(self.module, name, None) if not name.startswith("_") else None
        return callable(attr) and not isinstance(attr, nn.Module)

    def method(self, fn: str) -> Method:
        """The method ``fn``, added to the table (without a graph) if new."""
        if not isinstance(fn, str):
            raise TracingError(
                f"a method is named by a string, got {type(fn).__name__} "
                f"{_short(fn)}; inputs follow the method's name, e.g. "
                f"bended.trace('forward', {self._first_argument()}=...) or "
                "bended.trace('forward', x, y)"
            )
        method = self._methods.get(fn)
        if method is None:
            impl = getattr(self.module, fn, None)
            if not callable(impl) or isinstance(impl, nn.Module):
                names = [n for n in dir(type(self.module)) if not n.startswith("_")]
                raise TracingError(f"{self.owner} has no method {fn!r}" + did_you_mean(fn, names))
            if fn == "forward" and self.tensordict:
                impl = TensorDictProgram.forward.__get__(self.module)
            method = Method(fn, Signature(self.owner, fn, signature_of(impl)))
            self._methods[fn] = method
        return method

    def _first_argument(self) -> str:
        try:
            names = list(signature_of(self.module.forward).parameters)
        except (TypeError, ValueError):
            names = []
        return names[0] if names else "x"

    def current(self, fn: str) -> Entry:
        """The last graph traced for ``fn``."""
        method = self._methods.get(fn)
        if method is None or method.current is None:
            raise TracingError(
                f"method {fn!r} of {self.owner} is not traced (traced: "
                f"{self.names() or 'none'}); call bended.trace({fn!r}, <inputs>) first."
            )
        return method.current

    def bendable(self) -> dict[str, list[str]]:
        """Activation names of each traced (not derived) method, over all its graphs."""
        return {
            m.name: list(dict.fromkeys(n.name for e in m.entries for n in e.nodes(True)))
            for m in self._methods.values()
            if m.source is None
        }

    # -- tracing ---------------------------------------------------------------------------------

    def trace(
        self,
        fn: str,
        inputs: dict[str, Any],
        backend: Backend | None = None,
        args: Sequence[Any] = (),
    ) -> tuple[Entry, TracedGraph]:
        """Trace ``fn`` on ``args`` (by position) and ``inputs`` (by name), with ``backend``
        rather than the table's if given; the new graph becomes ``fn``'s current one."""
        by_keys = keyword_call(self.module, inputs) if self.tensordict and fn == "forward" else None
        method = self.method(fn)
        try:
            bound = method.signature.bind(args, by_keys[0] if by_keys else inputs)
            entry, result = self.tracer.trace(method, bound, backend=backend)
        except Exception:
            if not method.entries:
                del self._methods[fn]
            raise
        method.current = entry
        method.example = dict(bound)
        return entry, result

    def running(self, method: Method, inputs: dict[str, Any]) -> tuple[Entry, Any]:
        """The graph a call of ``method`` on bound ``inputs`` runs now, and what it gives,
        without autograd (as streams and exports run), leaving no trace (generators, buffers
        and attributes put back): unlike :meth:`entry_for`, which looks at the inputs' kinds
        and shapes only, it runs the graphs whose decisions read tensor values (a bent weight
        may flip one since they were traced). A graph traced for it is not kept."""
        training = self.module.training
        entries = [e for e in method.entries if e.training is training and e.key(inputs) in e.keys]
        if method.source is not None:  # a graph cut from another method's cannot be traced
            entries = entries or method.entries[:1]
        for entry in entries:
            try:
                return entry, self._run_untouched(entry, inputs)
            except DecisionChanged as e:
                if method.source is not None:
                    raise self.unstable(method, entry, e) from None
        entry = self.tracer.trace(method, inputs, keep=False)[0]
        try:
            return entry, self._run_untouched(entry, inputs)
        except DecisionChanged as e:
            raise self.unstable(method, entry, e) from None

    def flips(self, method: Method, entry: Entry) -> bool:
        """Whether ``entry``'s graph, bent as it is now, takes another decision on the inputs
        it was traced with than when traced (leaving no trace); ``True`` if it has none."""
        if entry.example is None:
            return True
        try:
            self._run_untouched(entry, entry.example)
        except Exception:  # DecisionChanged; or the bent graph fails, which changes it too
            return True
        return False

    def _run_untouched(self, entry: Entry, inputs: dict[str, Any]) -> Any:
        """``entry``'s graph run on copies of ``inputs`` (by name) without autograd, as a call
        runs it, with the generators, buffers and attributes it moves put back after."""
        args = clone_inputs([inputs[n] for n in entry.input_names])
        root = self.weights.synced_module()
        with torch.no_grad(), untouched(root, RandomState(self.hooks.generators())):
            return runnable(entry).forward(*args)

    def entry_for(self, method: Method, inputs: dict[str, Any], keep: bool = True) -> Entry:
        """The graph that runs for bound ``inputs``, traced if none fits.

        With ``keep=False`` a graph traced here is not added to the table, so that a caller
        that only looks (an exporter) leaves the table as it found it.
        """
        found = self.lookup(method, inputs)
        if found is not None:
            return found
        return self.tracer.trace(method, inputs, keep=keep)[0]

    def trace_decisions(self, method: Method, inputs: dict[str, Any]) -> Entry:
        """The graph of the decisions bound ``inputs`` take, traced if new: for inputs whose
        kinds and shapes select a graph that took other decisions on their values."""
        return self.tracer.trace(method, inputs)[0]

    def lookup(self, method: Method, inputs: dict[str, Any]) -> Entry | None:
        training = self.module.training
        for entry in method.entries:
            if entry.training is training and entry.key(inputs) in entry.keys:
                return entry
        return None

    # -- calling ---------------------------------------------------------------------------------

    def call(self, fn: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Run ``fn``: the graph its inputs' guards select, or the module's own method (with
        the bent weights) if ``fn`` was never traced."""
        method = self._methods.get(fn)
        root = (
            self.weights.synced_module()
        )  # attributes set on the module since are seen by guards and graphs
        if method is None:
            if isinstance(self.backend, TorchScriptBackend):
                return self.backend.call(root, fn, tuple(args), kwargs)
            return getattr(root if hasattr(root, fn) else self.module, fn)(*args, **kwargs)
        by_keys = (
            keyword_call(self.module, kwargs)
            if self.tensordict and fn == "forward" and not args
            else None
        )
        if by_keys is not None:
            return by_keys[1](self.call(fn, (), by_keys[0]))
        inputs = method.signature.bind(args, kwargs)
        training = self.module.training
        changed: tuple[Entry, DecisionChanged] | None = None
        before: RandomState | None = None
        for entry in method.entries:
            if entry.training is training and entry.key(inputs) in entry.keys:
                # A run that a decision stops half-way has drawn from the generators (seeded
                # bendings, random ops): the graph that runs instead draws the same, so that a
                # seed and an input give one output whatever was traced before.
                if before is not None:
                    before.restore()
                elif entry.result.runtime_guards:
                    before = RandomState(self.hooks.generators())
                try:
                    # forward, not __call__: GraphModules carry no hooks, and this is the hot path.
                    return runnable(entry).forward(*[inputs[n] for n in entry.input_names])
                except DecisionChanged as e:
                    changed = (entry, e)
        if before is not None:
            before.restore()
        return self._call_new_graph(method, inputs, changed)

    def _call_new_graph(
        self,
        method: Method,
        inputs: dict[str, Any],
        changed: tuple[Entry, DecisionChanged] | None,
    ) -> Any:
        if changed is not None and self.strict:
            entry, e = changed
            step = entry.result.flow_steps[e.step]
            raise GuardError(
                f"{self.owner}.{method.name}: decision {step.kind} '{step.name}' at {step.file} "
                f"({step.function}) was {e.expected!r} when traced, now {e.got!r}. Set "
                "strict=False to trace a graph for these inputs."
            ) from None
        if method.source is not None:  # a graph cut from another method's cannot be traced
            entry = method.entries[0]
            if changed is not None:
                step = entry.result.flow_steps[changed[1].step]
                change = f"decision {step.kind} '{step.name}' at {step.file} differs"
            else:
                change = entry.mismatch(inputs) or "they differ from the traced ones"
            raise TracingError(
                f"{self.owner}.{method.name} was cut from a graph of {method.source} and runs "
                f"only for inputs like those it was saved with: {change}. Save it again from a "
                f"graph of {method.source} traced on inputs like these."
            )
        entry, _ = self.tracer.trace(method, inputs)
        try:
            return runnable(entry).forward(*[inputs[n] for n in entry.input_names])
        except DecisionChanged as e:
            raise self.unstable(method, entry, e) from None

    def unstable(self, method: Method, entry: Entry, e: DecisionChanged) -> TracingError:
        """The error for a graph just traced on inputs that takes another decision when run
        on them."""
        step = entry.result.flow_steps[e.step]
        return TracingError(
            f"{self.owner}.{method.name}: decision {step.kind} '{step.name}' at {step.file} "
            f"was {e.expected!r} while tracing these inputs and {e.got!r} when running "
            "them: it depends on values drawn anew at each call (a random constructor, or "
            "a Noise bending on an activation before it)."
        )

    # -- derived methods and graphs ----------------------------------------------------------------

    def derived(
        self,
        method: Method,
        entry: Entry,
        graph: torch.fx.Graph,
        inputs: dict[str, Any],
        name: str | None = None,
    ) -> tuple[Method, Entry]:
        """A method ``name`` running ``graph`` (cut from ``entry``), bent like ``method``; kept
        in the table only if it is named."""
        if name is not None and (name in self._methods or name in self.reserved):
            raise TracingError(f"a method named {name!r} exists already; pick another name")
        placeholders = [str(n.target) for n in graph.nodes if n.op == "placeholder"]
        facts = tuple(f for f in entry.facts if f[0] in placeholders)
        result = TracedGraph(graph, entry.result.constants, entry.result.flow_steps, facts, ())
        result.module_state, result.grad_mode = entry.result.module_state, entry.result.grad_mode
        params = [
            inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in placeholders
        ]
        label = name or method.name
        signature = Signature(self.owner, label, inspect.Signature(params))
        derived = Method(label, signature, source=method.key)
        saved = Entry(result, entry.training, placeholders)
        saved.keys.add(saved.key(inputs))
        saved.example = dict(inputs)
        derived.entries.append(saved)
        derived.current = saved
        derived.example = dict(inputs)
        self.hooks.build(derived, saved, self.weights.bent_module)
        if name is not None:
            self._methods[name] = derived
        return derived, saved

    def rebuild(self, keys: Sequence[str] | None = None) -> None:
        """Compile again the graphs of the methods whose bending key is in ``keys`` (all by
        default), after bendings changed."""
        for method, entry in self.entries():
            if keys is None or method.key in keys:
                self.hooks.build(method, entry, self.weights.bent_module)

    def install_module(self, module: nn.Module) -> None:
        """Point every compiled graph at ``module`` (after weight bending changed)."""
        for _, entry in self.entries():
            if entry.gm is not None:
                install_module(entry.gm, module)
            if entry.folded is not None:
                entry.folded.install(module)

    def map_constants(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply ``fn`` to the constants of every graph (a device or dtype move)."""
        for _, entry in self.entries():
            entry.result.constants = {k: fn(v) for k, v in entry.result.constants.items()}


def runnable(entry: Entry) -> torch.fx.GraphModule:
    """What a call runs for ``entry``: its folded twin without autograd when it has one that
    is ready (folded weights carry no gradient to the originals), else its GraphModule; the
    first call at new inputs as every later one, so that they give the same bits."""
    folded = entry.folded
    if folded is not None and not torch.is_grad_enabled() and folded.ready():
        return folded.gm
    assert entry.gm is not None
    return entry.gm


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
