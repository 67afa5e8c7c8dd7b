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
from ..specialize import Specialized
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
        names = list(inputs)
        leaves, flow = names, None
        try:
            prepared = Convertible(self.module, method)
            program = _convert(prepared, tuple(inputs.values()))
        except Exception as e:
            # Branches and loops the converter could not take: settled as the example takes
            # them (the sizes they read become facts), then converted again. Files the
            # converter takes as they are keep their graphs and their symbolic sizes.
            prepared = Convertible(self.module, method)
            flow = prepared.settle_flow(names, tuple(inputs.values()))
            if flow is None or flow.refused is not None:
                raise TracingError(
                    f"torch could not convert TorchScript {owner} to a graph: {summary(e)}"
                    + _flow_note(flow)
                ) from e
            leaves = [n for i, n in enumerate(names) if i not in flow.dropped]  # None: gone
            try:
                program = _convert(prepared, tuple(inputs[n] for n in leaves))
            except Exception as again:
                raise TracingError(
                    f"torch could not convert TorchScript {owner} to a graph, even with its "
                    f"branches settled on the example: {summary(again)}" + _flow_note(flow)
                ) from again
        gm = program.module()
        graph, constants = rebuild_program(
            gm, root, program.call_spec.out_spec, leaves, [inputs[n] for n in leaves]
        )
        # The converter exports with symbolic sizes too: its guards say where the graph holds.
        plain = all(isinstance(inputs[n], (torch.Tensor, bool, int, float)) for n in leaves)
        facts, accepts = (
            program_guards(gm, names, leaves) if plain else (signature_facts(names), None)
        )
        if flow is not None:
            facts = (*facts, *sorted(flow.facts - set(facts), key=str))
        traced = TracedGraph(graph, constants, [], facts)
        traced.accepts = accepts
        if flow is not None and flow.grad_mode:
            traced.grad_mode = torch.is_grad_enabled()
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


def _convert(prepared: Convertible, values: tuple[Any, ...]) -> Any:
    """The program torch's converter makes of ``prepared`` on ``values``."""
    from ..compat import ts_converter  # private: see tracing/compat.py

    with warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")  # "Manually populate ... into state_dict"
        return ts_converter(prepared.holder, values).convert()


def _flow_note(flow: Specialized | None) -> str:
    """What of the method's control flow was left to the converter, for its error."""
    if flow is None:
        return " (no branch or loop is left in it to settle)"
    if flow.refused is not None:
        return f" (its branches could not be settled on the example: {flow.refused})"
    if flow.kept:
        return f" (left to the converter: {', '.join(flow.kept[:3])})"
    return ""


def _script_state(module: torch.jit.ScriptModule, paths: tuple[str, ...]) -> ModuleState:
    """The guard on a TorchScript module's plain attributes at ``paths`` (its ``__dict__``,
    which :class:`ModuleState` hands to ``read``, does not hold them)."""
    reader = attribute_reader(module, paths)
    return ModuleState(weakref.ref(module), lambda _: reader(), reader())
