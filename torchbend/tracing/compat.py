"""The torch names torchbend relies on that torch does not promise to keep, in one place.

Checked on torch 2.13.0. Each name used here is either private (underscored) or marked
``@compatibility(is_backward_compatible=False)`` by torch.fx. Nothing else in torchbend touches
them: a torch upgrade that changes one needs a change here only, and
``tests/tracing/test_compat.py`` checks each of them by name, so such an upgrade fails there
rather than somewhere inside a trace.

What is used, and why:

- ``Graph._codegen`` (private) and ``Graph.set_codegen`` (not backward-compatible): copying a
  graph must keep its calling convention (a graph traced with pytree inputs unflattens them).
- ``Node._pretty_print_target`` (private): the names tables and errors print for a target
  (``operator.add``, ``torch.relu``), as torch.fx prints graphs.
- ``torch.fx.node.has_side_effect`` (not backward-compatible): keeps the checks of
  data-dependent decisions, which return nothing, from being removed as dead code.
- ``torch.fx.proxy.Attribute._node`` (private): whether ``x.attr`` was recorded as a node yet.
- ``Tracer.create_args_for_root`` and ``Tracer.getattr`` (not backward-compatible), overridden
  by :class:`RootCallTracer`: torch.fx has no documented hook for making the placeholders of
  the traced method, nor for reading module attributes as plain values while concrete code
  runs.
- ``torch.fx``'s patcher (``torch.fx._symbolic_trace._new_patcher``, behaviour, not a name):
  while ``Tracer.trace`` runs, ``nn.Module.__call__`` and ``__getattr__`` are replaced for the
  whole process by functions bound to that tracer, and put back by position when it ends, so
  two ``trace`` calls in two threads would record each other's modules and leave a patch
  behind. :class:`RootCallTracer` runs ``trace`` under one process lock
  (:data:`FX_TRACE_LOCK`), and its hooks run module code plainly when they are called from
  another thread than the tracing one (eager code running meanwhile elsewhere).
- ``torch._check_with`` (private): the function ``torch._check`` and its kin call; swapped
  while tracing (:data:`CHECK_WITH`) so that a traced condition becomes a decision of the graph.
  ``torch._check_tensor_all_with`` (private): a PyTorch function checking a tensor on behalf of
  user code (:data:`USER_CHECKS`).
- ``torch.utils._pytree`` (private): flattening and rebuilding nested outputs like torch.export
  does (:data:`pytree`).
- ``torch._export.converter.TS2EPConverter`` (private): torch's TorchScript-to-export
  converter (:func:`ts_converter`).
- ``GraphModule._guards_fn`` (private attribute of ``ExportedProgram.module()``): torch.export's
  check of the sizes it left symbolic, which the export backend keeps as the graph's guard
  (:func:`export_guards`).
- TorchScript internals (``torch._C._jit_pass_inline``, ``_jit_pass_peephole``,
  ``_jit_pass_constant_propagation``, ``_jit_pass_dce``, ``torch._C._freeze_module``,
  ``torch.jit._recursive.wrap_cpp_module``): inlining, freezing and simplifying a scripted
  module's graph before the converter sees it (:func:`inline`, :func:`freeze_keeping_tensors`,
  :func:`simplify`).
- ``torch._C.parse_schema`` (private): the ATen op and overload a TorchScript node calls, so
  that :mod:`torchbend.tracing.specialize` runs it through ``torch.ops`` (:func:`node_op`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.node import has_side_effect

__all__ = [
    "CHECKED_ON",
    "CHECK_WITH",
    "FX_TRACE_LOCK",
    "USER_CHECKS",
    "RootCallTracer",
    "copy_codegen",
    "export_guards",
    "freeze_keeping_tensors",
    "has_side_effect",
    "inline",
    "node_op",
    "pytree",
    "recorded_node",
    "simplify",
    "target_name",
    "ts_converter",
]

CHECKED_ON = ("2.13.0",)
"""torch versions this module was checked on."""


def copy_codegen(source: torch.fx.Graph, target: torch.fx.Graph) -> None:
    """Give ``target`` the calling convention of ``source``: how generated code takes its
    inputs and returns its outputs (both graphs share it; nothing changes it once traced)."""
    target.set_codegen(source._codegen)


def target_name(target: Any) -> str:
    """How torch.fx prints a node's target: ``operator.add``, ``torch.relu``, ``conv``."""
    return torch.fx.Node._pretty_print_target(target)


def recorded_node(attribute: torch.fx.proxy.Attribute) -> torch.fx.Node | None:
    """The node of ``proxy.attr`` if something recorded it already, else ``None`` (torch.fx
    records attribute reads lazily: ``x.sum()`` is one ``call_method``, not a ``getattr``)."""
    return attribute._node


CHECK_WITH = "_check_with"
"""The attribute of ``torch`` that ``torch._check``, ``torch._check_value``... call."""

USER_CHECKS = frozenset({torch._check_tensor_all_with.__code__})
"""Code of PyTorch functions that check a traced tensor for user code
(``torch._check_tensor_all``)."""


def export_guards(gm: torch.fx.GraphModule) -> Callable[..., Any] | None:
    """The check torch.export put on the inputs of ``ExportedProgram.module()`` (the sizes it
    left symbolic), or ``None`` where it put none."""
    return getattr(gm, "_guards_fn", None)


def ts_converter(module: torch.jit.ScriptModule, inputs: tuple[Any, ...]) -> Any:
    """torch's TorchScript-to-export converter for ``module.forward`` on ``inputs`` (its
    ``convert()`` gives an ``ExportedProgram``). Imported on first use: it takes seconds."""
    from torch._export.converter import TS2EPConverter

    return TS2EPConverter(module, inputs)


def inline(graph: torch.Graph) -> None:
    """Inline the calls of a TorchScript graph, in place."""
    torch._C._jit_pass_inline(graph)


def freeze_keeping_tensors(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """``module`` frozen with every tensor attribute kept as an attribute (plain attributes
    become constants). Raises ``RuntimeError`` for a module TorchScript cannot freeze."""
    return torch.jit._recursive.wrap_cpp_module(torch._C._freeze_module(module._c, [], True, True))


def node_op(node: torch.Node) -> tuple[Any, list[str | None]] | None:
    """The ``torch.ops`` overload a TorchScript node calls and, per argument, its name if it
    is keyword-only (else ``None``), or ``None`` for a node without a schema."""
    text = node.schema()
    if text == "(no schema)":
        return None
    schema = torch._C.parse_schema(text)
    namespace, _, name = schema.name.partition("::")
    packet = getattr(getattr(torch.ops, namespace), name)
    keywords = [a.name if a.kwarg_only else None for a in schema.arguments]
    return getattr(packet, schema.overload_name or "default"), keywords


def simplify(graph: torch.Graph) -> None:
    """Peephole, constant propagation and dead code elimination on a TorchScript graph."""
    torch._C._jit_pass_peephole(graph)
    torch._C._jit_pass_constant_propagation(graph)
    torch._C._jit_pass_dce(graph)


FX_TRACE_LOCK = threading.RLock()
"""Held while torch.fx traces (``Tracer.trace``), whose patches of ``nn.Module`` are
process-wide; re-entrant, so a trace may run another inside it."""


class RootCallTracer(torch.fx.Tracer):
    """A :class:`torch.fx.Tracer` whose two not-backward-compatible hooks call plain ones.

    ``create_args_for_root`` (the placeholders of the traced method, and the function torch.fx
    calls with them) becomes :meth:`root_call`; ``getattr`` (how ``module.attr`` reads while
    tracing) returns plain values while :attr:`executing` is positive.
    """

    executing: int = 0
    """Positive while concrete code runs inside the trace: module attributes read then are
    values, not proxies (else reading a parameter would record its read anew)."""
    thread: int | None = None
    """The ident of the thread running :meth:`trace`: calls of the hooks from other threads
    (plain code running meanwhile) are not the trace's."""

    def trace(
        self,
        root: torch.nn.Module | Callable[..., Any],
        concrete_args: dict[str, Any] | None = None,
    ) -> torch.fx.Graph:
        with FX_TRACE_LOCK:
            outer, self.thread = self.thread, threading.get_ident()
            try:
                return super().trace(root, concrete_args)
            finally:
                self.thread = outer

    def elsewhere(self) -> bool:
        """Whether a hook is called from another thread than the one tracing: torch.fx's
        patches of ``nn.Module`` reach every thread while it traces."""
        return self.thread is not None and threading.get_ident() != self.thread

    def root_call(
        self, root_fn: Callable[..., Any], is_module: bool
    ) -> tuple[Callable[..., Any], list[Any]]:
        """The function torch.fx traces, and its arguments (``self`` first for a method)."""
        raise NotImplementedError

    def create_args_for_root(
        self,
        root_fn: Callable[..., Any],
        is_module: bool,
        concrete_args: dict[str, Any] | tuple[Any, ...] | None = None,
    ) -> tuple[Any, list[Any]]:
        if concrete_args is not None:
            return super().create_args_for_root(root_fn, is_module, concrete_args)
        return self.root_call(root_fn, is_module)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if self.executing or self.elsewhere():
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def call_module(
        self,
        m: torch.nn.Module,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if self.elsewhere():
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)
