"""The torchscript backend: TorchScript modules (``torch.jit.load``) converted to a
torch.export program by torch's converter, then read as exported programs are."""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import torch
from torch import nn

from ...errors import TracingError
from ..attributes import ModuleState
from ..objects import attribute_at
from ..records import TracedGraph
from ..script import Convertible, attribute_reader
from .program_graph import program_guards, quiet, rebuild_program, signature_facts, summary
from .protocol import ValueHook

__all__ = ["TorchScriptBackend"]


class TorchScriptBackend:
    """TorchScript modules (``torch.jit.load``) converted to a torch.export program by torch's
    converter, then read as :class:`ExportBackend` reads exported programs. Any method with
    tensor or scalar arguments converts (``forward``, ``encode``, ``decode``...); the check of
    a new graph runs the file's method on the weights as they are bent."""

    name = "torchscript"

    def __init__(self, module: torch.jit.ScriptModule) -> None:
        self.module = module

    def trace(
        self, root: nn.Module, method: str, inputs: dict[str, Any], on_value: ValueHook
    ) -> TracedGraph:
        # ``root`` holds the file's parameters and buffers, bent or not, by path: graphs read
        # those from it; other tensors the file holds become constants of the graph.
        owner = f"{self.module.original_name}.{method}"
        from ..compat import ts_converter as TS2EPConverter  # private: see tracing/compat.py

        try:
            prepared = Convertible(self.module, method)
            with warnings.catch_warnings(), quiet():
                warnings.simplefilter("ignore")  # "Manually populate ... into state_dict"
                program = TS2EPConverter(prepared.holder, tuple(inputs.values())).convert()
        except Exception as e:
            raise TracingError(
                f"torch could not convert TorchScript {owner} to a graph: {summary(e)}"
            ) from e
        gm = program.module()
        names = list(inputs)
        graph, constants = rebuild_program(gm, root, program.call_spec.out_spec, names)
        # The converter exports with symbolic sizes too: its guards say where the graph holds.
        plain = all(isinstance(v, (torch.Tensor, bool, int, float)) for v in inputs.values())
        facts, accepts = (
            program_guards(gm, names, names) if plain else (signature_facts(names), None)
        )
        traced = TracedGraph(graph, constants, [], facts)
        traced.accepts = accepts
        # The file's plain attributes the graph baked in (its setters may change them).
        traced.module_state = (_script_state(self.module, prepared.attributes),)
        return traced

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        return self.call(root, method, tuple(inputs.values()), {})

    def call(
        self, root: nn.Module, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The file's method, run on the weights of ``root`` (bent ones written into the
        file's module for the call, then put back)."""
        swapped = []
        for name, p in self.module.named_parameters():
            current = attribute_at(root, name)
            if current is not p:
                swapped.append((p, p.detach().clone()))
                with torch.no_grad():
                    p.copy_(current)
        try:
            return getattr(self.module, method)(*args, **kwargs)
        finally:
            with torch.no_grad():
                for p, saved in swapped:
                    p.copy_(saved)


def _script_state(module: torch.jit.ScriptModule, paths: tuple[str, ...]) -> ModuleState:
    """The guard on a TorchScript module's plain attributes at ``paths`` (its ``__dict__``,
    which :class:`ModuleState` hands to ``read``, does not hold them)."""
    reader = attribute_reader(module, paths)
    return ModuleState(weakref.ref(module), lambda _: reader(), reader())
