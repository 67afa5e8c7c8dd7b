"""The concrete backend: torch.fx symbolic tracing run side by side with concrete values."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from torch import nn

from ..records import TracedGraph
from ..tensordict import TensorDictProgram, is_tensordict_module
from ..tracer import BendingTracer
from ..values import clone_inputs
from .protocol import ValueHook, call_method

__all__ = ["ConcreteBackend"]


class ConcreteBackend:
    """torch.fx symbolic tracing run side by side with concrete values (:class:`BendingTracer`)."""

    name = "concrete"

    def __init__(self, leaves: Sequence[type | str] = ()) -> None:
        self.leaves = tuple(leaves)
        self._numbers: weakref.WeakKeyDictionary[nn.Module, set[str]] = weakref.WeakKeyDictionary()
        """The methods, by module, traced with numbers as values (their code needs them)."""

    def trace(
        self,
        root: nn.Module,
        method: str,
        inputs: dict[str, Any],
        on_value: ValueHook,
    ) -> TracedGraph:
        if method == "forward" and is_tensordict_module(root):
            root = TensorDictProgram(root)
        numbers = self._numbers.setdefault(root, set())
        if method not in numbers:
            try:
                return BendingTracer(self.leaves, on_value).trace_method(
                    root, method, clone_inputs(inputs)
                )
            except Exception as e:
                # A traced number reached code that takes only a real one (C code refuses
                # the proxy: ``Generator().manual_seed(seed * 7 + 1)``): trace again, and
                # from now on, with numbers as the values they are, each a guarded fact.
                if "Proxy" not in str(e):
                    raise
        tracer = BendingTracer(self.leaves, on_value, numbers_as_values=True)
        traced = tracer.trace_method(root, method, clone_inputs(inputs))
        numbers.add(method)
        return traced

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        return call_method(root, method, inputs)
