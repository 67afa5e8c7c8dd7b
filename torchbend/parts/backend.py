"""Tracing backends: what turns a method of a module into a graph, and what the method table
needs of the bendings' owner while it does."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.fx
from torch import nn

from ..tracing import BendingTracer, TracedGraph
from ..tracing.tensordict import TensorDictProgram, is_tensordict_module
from .dispatch import Entry, Method, clone_inputs

__all__ = [
    "AutoBackend",
    "Backend",
    "ConcreteBackend",
    "EntryHooks",
    "TracingBackend",
    "ValueHook",
    "call_method",
]

ValueHook = Callable[[torch.fx.Node, Any], Any]
"""Called with each traced node and its concrete value; returns the value tracing goes on with."""


class TracingBackend(Protocol):
    """Traces one method of a module on example inputs into a graph with its guards."""

    name: str
    """Short name, as shown to users (``"concrete"``)."""

    def trace(
        self,
        root: nn.Module,
        method: str,
        inputs: dict[str, Any],
        on_value: ValueHook,
    ) -> TracedGraph:
        """Trace ``root.<method>`` on ``inputs`` (by argument name), bending concrete values
        through ``on_value`` as they are computed."""
        ...

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        """Call ``root.<method>`` itself on ``inputs`` (by argument name), as the user's code
        would: the truth graphs are checked against."""
        ...


class ConcreteBackend:
    """torch.fx symbolic tracing run side by side with concrete values (:class:`BendingTracer`)."""

    name = "concrete"

    def __init__(self, leaves: Sequence[type | str] = ()) -> None:
        self.leaves = tuple(leaves)

    def trace(
        self,
        root: nn.Module,
        method: str,
        inputs: dict[str, Any],
        on_value: ValueHook,
    ) -> TracedGraph:
        tracer = BendingTracer(self.leaves)
        tracer.on_value = on_value
        if method == "forward" and is_tensordict_module(root):
            root = TensorDictProgram(root)
        return tracer.trace_method(root, method, clone_inputs(inputs))

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        return call_method(root, method, inputs)


class AutoBackend:
    """Several backends tried in order: the first whose graph passes the check traces."""

    name = "auto"

    def __init__(self, *backends: TracingBackend) -> None:
        self.backends = backends


Backend = TracingBackend | AutoBackend
"""What a method table traces with: one backend, or several tried in order."""


def call_method(root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
    """``root.<method>`` called on ``inputs`` (by argument name), as the user's code would."""
    if method == "forward" and is_tensordict_module(root):
        root = TensorDictProgram(root)
    fn = getattr(root, method)
    params = inspect.signature(fn).parameters.values()
    only = [p.name for p in params if p.kind is p.POSITIONAL_ONLY]
    kwargs = {k: v for k, v in inputs.items() if k not in only}
    return fn(*[inputs[n] for n in only], **kwargs)


class Replayable(Protocol):
    """State a call moves on that a run made to trace or to check puts back: a generator, or
    the calls a window counted."""

    def get_state(self) -> Any: ...

    def set_state(self, state: Any, /) -> Any: ...


class EntryHooks(Protocol):
    """What the owner of bendings does with traced graphs (see :class:`BendingSet`)."""

    def bend_value(self, method: str, node: torch.fx.Node, value: Any) -> Any:
        """Bend a concrete value while tracing, so decisions are taken on bent activations."""
        ...

    def attach(self, method: Method, entry: Entry) -> None:
        """Match the bendings applied so far on a new graph."""
        ...

    def build(self, method: Method, entry: Entry) -> None:
        """Compile ``entry.gm``: the graph with its bending slots."""
        ...

    def generators(self) -> list[Replayable]:
        """The random generators bending draws from (besides torch's global one), and other
        state calls move on (calls counted by windows, the callbacks' buffers): what a trace
        puts back."""
        ...
