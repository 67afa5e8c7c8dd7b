"""The torch.fx names torchbend relies on that torch does not promise to keep, in one place.

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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx
from torch.fx.node import has_side_effect

__all__ = [
    "CHECKED_ON",
    "RootCallTracer",
    "copy_codegen",
    "has_side_effect",
    "recorded_node",
    "target_name",
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


class RootCallTracer(torch.fx.Tracer):
    """A :class:`torch.fx.Tracer` whose two not-backward-compatible hooks call plain ones.

    ``create_args_for_root`` (the placeholders of the traced method, and the function torch.fx
    calls with them) becomes :meth:`root_call`; ``getattr`` (how ``module.attr`` reads while
    tracing) returns plain values while :attr:`executing` is positive.
    """

    executing: int = 0
    """Positive while concrete code runs inside the trace: module attributes read then are
    values, not proxies (else reading a parameter would record its read anew)."""

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
        if self.executing:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)
