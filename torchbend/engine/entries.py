"""Tracing new graphs of methods for the method table: backends tried in order, new decisions
refused (strict) or kept, each new graph attached, compiled and checked."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
import torch.fx
from torch import nn

from ..errors import GuardError, TracingError
from ..tracing import FlowStep, TracedGraph
from ..tracing.backends import AutoBackend, Backend, TracingBackend
from ..tracing.facts import describe_fact
from .dispatch import Entry, Method
from .protocols import EntryHooks, ModuleSource
from .selfcheck import GraphCheck, RandomState, own_error

__all__ = ["EntryTracer"]

_Traced = TypeVar("_Traced")


def _unbent(node: torch.fx.Node, value: Any) -> Any:
    return value


class EntryTracer:
    """Makes the :class:`Entry` of a method for new inputs (see :class:`MethodTable`, whose
    arguments of the same names these are).

    Args:
        module: the wrapped module.
        backend: what traces, unless a trace names another.
        hooks: what is done with each new graph (bendings attached, compiled).
        weights: the module graphs read their weights from.
        strict: raise :class:`GuardError` instead of keeping a graph of new decisions.
        max_graphs: graphs per method before warning that inputs keep changing decisions.
        check: run each new graph next to the module (see :mod:`torchbend.engine.selfcheck`).
    """

    def __init__(
        self,
        module: nn.Module,
        backend: Backend,
        hooks: EntryHooks,
        weights: ModuleSource,
        strict: bool,
        max_graphs: int,
        check: bool,
    ) -> None:
        self.module = module
        self.backend = backend
        self.hooks = hooks
        self.weights = weights
        self.strict = strict
        self.max_graphs = max_graphs
        self.check = check

    @property
    def owner(self) -> str:
        return type(self.module).__name__

    def trace_unbent(self, method: Method, inputs: dict[str, Any]) -> Entry:
        """A graph of ``method`` traced on the wrapped module itself, nothing bent, and not
        kept: for unbent activations of inputs whose decisions a bending changes (a bent
        weight that flips a test on values takes the other branch in every kept graph)."""
        backend = self.backend
        backends = backend.backends if isinstance(backend, AutoBackend) else (backend,)

        def trace(each: TracingBackend) -> Entry:
            with RandomState(self.hooks.generators()).replayed():
                result = each.trace(self.module, method.name, inputs, _unbent)
            entry = Entry(result, self.module.training, method.signature.order(inputs))
            entry.backend = each.name
            return entry

        return self.first_that_traces(method, backends, trace, "could not trace it unbent")

    def first_that_traces(
        self,
        method: Method,
        backends: Sequence[TracingBackend],
        trace: Callable[[TracingBackend], _Traced],
        failed: str,
    ) -> _Traced:
        """``trace(backend)`` of the first of ``backends`` that traces ``method``, or a
        :class:`TracingError` (``failed``) listing what each said; a :class:`GuardError`
        (a strict table's refusal) passes through."""
        failures = []
        for each in backends:
            try:
                return trace(each)
            except GuardError:
                raise
            except Exception as e:
                failures.append(f"{each.name} backend: {type(e).__name__}: {e}")
        raise TracingError(f"{self.owner}.{method.name}: {failed}.\n- " + "\n- ".join(failures))

    def trace(
        self,
        method: Method,
        inputs: dict[str, Any],
        keep: bool = True,
        backend: Backend | None = None,
    ) -> tuple[Entry, TracedGraph]:
        backend = backend or self.backend
        try:
            if not isinstance(backend, AutoBackend):
                return self._trace_with(backend, method, inputs, keep)
            return self.first_that_traces(
                method,
                backend.backends,
                lambda each: self._trace_with(each, method, inputs, keep),
                "no tracing backend could trace it",
            )
        except GuardError:
            raise
        except Exception:
            # The module may refuse these inputs itself: then say so with its own message,
            # which a trace formats with proxies (`got [Proxy(getitem), ...]`).
            own = None
            if method.source is None and not isinstance(self.module, torch.jit.ScriptModule):
                own = own_error(
                    self.weights.synced_module(), method.name, inputs, self.hooks.generators()
                )
            if own is None:
                raise
            raise TracingError(
                f"{self.owner}.{method.name} itself raises on these inputs (run without "
                f"torchbend): {type(own).__name__}: {own}"
            ) from own

    def _trace_with(
        self, backend: TracingBackend, method: Method, inputs: dict[str, Any], keep: bool
    ) -> tuple[Entry, TracedGraph]:
        def on_value(node: torch.fx.Node, value: Any) -> Any:
            return self.hooks.bend_value(method.name, node, value)

        # A trace draws from the generators (seeded bendings, random ops) like a call would:
        # it is put back, so that a new graph leaves what later calls draw as it was.
        state = RandomState(self.hooks.generators())
        with state.replayed():
            result = backend.trace(self.weights.synced_module(), method.name, inputs, on_value)
        training = self.module.training
        for entry in method.entries:
            if entry.same_decisions(result, training):
                if keep:
                    entry.keys.add(entry.key(inputs))
                    entry.remember(result)
                return entry, result
        entry = Entry(result, training, method.signature.order(inputs))
        entry.backend = backend.name
        entry.keys.add(entry.key(inputs))
        entry.example = dict(inputs)
        if method.entries and self.strict:
            raise GuardError(self._describe_change(method, result, inputs))
        self.hooks.attach(method, entry)
        self.hooks.build(method, entry, self.weights.bent_module)
        if self.check:
            GraphCheck(
                backend, self.hooks, self.weights.synced_module(), method, entry, inputs, state
            ).run()
        if not keep:
            return entry, result
        method.entries.insert(0, entry)
        if len(method.entries) > self.max_graphs:
            change = self._describe_change(method, result, inputs)
            warnings.warn(
                f"{self.owner}.{method.name} now has {len(method.entries)} traced graphs: its "
                f"inputs keep taking new decisions ({change}). Each new one costs a trace.",
                stacklevel=4,
            )
        if method.current is None:
            method.current = entry
        return entry, result

    def _describe_change(self, method: Method, result: TracedGraph, inputs: dict[str, Any]) -> str:
        old = method.current or method.entries[0]
        label = f"{self.owner}.{method.name}"
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
        mismatch = old.mismatch(inputs)
        if mismatch:
            return f"{label} traced a different graph for these inputs: {mismatch}"
        facts = ", ".join(describe_fact(f) for f in old.facts) or "none"
        return f"{label} traced a different graph for these inputs (facts read: {facts})"


def _step(step: FlowStep) -> str:
    return f"{step.kind} '{step.name}' = {step.value!r} at {step.file} ({step.function})"
