"""The tracing backend protocol: what turns a method of a module into a graph, and a chain
of backends tried in order."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.fx
from torch import nn

from ..binding import spread
from ..records import TracedGraph
from ..tensordict import TensorDictProgram, is_tensordict_module

__all__ = ["AutoBackend", "Backend", "TracingBackend", "ValueHook", "call_method"]

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


class AutoBackend:
    """Several backends tried in order: the first whose graph passes the check traces."""

    name = "auto"

    def __init__(self, *backends: TracingBackend) -> None:
        self.backends = backends


Backend = TracingBackend | AutoBackend
"""What a method table traces with: one backend, or several tried in order."""


def call_method(root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
    """``root.<method>`` called on ``inputs`` (by argument name, the items of ``*args`` and
    ``**kwargs`` named as :mod:`~torchbend.tracing.binding` says), as the user's code would."""
    if method == "forward" and is_tensordict_module(root):
        root = TensorDictProgram(root)
    fn = getattr(root, method)
    args, kwargs = spread(list(inspect.signature(fn).parameters.values()), inputs)
    return fn(*args, **kwargs)
