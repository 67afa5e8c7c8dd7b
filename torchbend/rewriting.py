"""Graph rewriting: insert activation bending slots into a copy of a traced graph."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn

from .callbacks.base import BendingCallback

__all__ = ["SLOTS", "ActivationSlot", "build_graph_module", "install_view"]

SLOTS = "_tb_slots"
"""Name of the submodule of bended GraphModules that holds activation slots."""


class ActivationSlot(nn.Module):
    """Insertion point after one activation: applies its callbacks in order.

    An empty slot is the identity; slots are only inserted where something is bent.
    """

    def __init__(self, name: str, callbacks: Sequence[BendingCallback]) -> None:
        super().__init__()
        self.name = name
        self.callbacks = nn.ModuleList(callbacks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for cb in self.callbacks:
            x = cb(x, self.name)
        return x

    def extra_repr(self) -> str:
        return repr(self.name)


def _slot_name(node: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", node)


def bent_graph(graph: torch.fx.Graph, targets: Mapping[str, Any]) -> torch.fx.Graph:
    """Copy ``graph`` and route every node named in ``targets`` through its slot."""
    new = torch.fx.Graph()
    new._codegen = graph._codegen  # keeps the calling convention (pytree in/out) of the trace
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out = new.graph_copy(graph, env)
    new.output(out)
    for old, node in env.items():
        node.meta = old.meta
    for node in list(new.nodes):
        if node.name not in targets:
            continue
        users = [u for u in node.users if not u.meta.get("tb_guard")]
        with new.inserting_after(node):
            slot = new.call_module(f"{SLOTS}.{_slot_name(node.name)}", (node,))
        slot.meta = dict(node.meta, tb_slot=True)
        for user in users:
            user.replace_input_with(node, slot)
    new.lint()
    return new


def build_graph_module(
    graph: torch.fx.Graph,
    view: nn.Module,
    constants: Mapping[str, torch.Tensor],
    slots: Mapping[str, ActivationSlot],
    class_name: str,
) -> torch.fx.GraphModule:
    """Compile ``graph`` once, its slots inserted, reading modules and weights from ``view``.

    Modules and weights of ``view`` are attached under flat names (``encoder.0.weight`` as
    ``encoder_0_weight``) so that the generated code reaches each in one attribute lookup
    instead of one per level of nesting; ``gm.meta["tb_paths"]`` maps them back.
    """
    graph = bent_graph(graph, slots)
    root: dict[str, Any] = {}
    paths: dict[str, str] = {}
    flat_of: dict[str, str] = {}
    for node in graph.nodes:
        target = str(node.target)
        if node.op == "call_module" and target.startswith(SLOTS + "."):
            root[target] = slots[_node_of_slot(graph, node)]
            continue
        if node.op not in ("call_module", "get_attr"):
            continue
        if node.op == "get_attr" and target in constants:
            root[target] = constants[target]
            continue
        if target not in flat_of:
            flat = "_tb_" + re.sub(r"[^0-9a-zA-Z_]", "_", target)
            while flat in paths:
                flat += "_"
            flat_of[target], paths[flat] = flat, target
            root[flat] = (
                view.get_submodule(target) if node.op == "call_module" else _fetch(view, target)
            )
        node.target = flat_of[target]
    gm = torch.fx.GraphModule(root, graph, class_name=class_name)
    gm.meta["tb_paths"] = paths
    return gm


def _node_of_slot(graph: torch.fx.Graph, slot: torch.fx.Node) -> str:
    source = slot.args[0]
    assert isinstance(source, torch.fx.Node)
    return source.name


def _fetch(module: nn.Module, target: str) -> Any:
    obj: Any = module
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def install_view(gm: torch.fx.GraphModule, view: nn.Module) -> None:
    """Point ``gm``'s modules and weights at ``view`` (after weight bending changed)."""
    for flat, path in gm.meta["tb_paths"].items():
        current = gm._modules.get(flat)
        value = view.get_submodule(path) if current is not None else _fetch(view, path)
        _assign(gm, flat, value)


def _assign(gm: nn.Module, target: str, value: Any) -> None:
    prefix, _, name = target.rpartition(".")
    owner = gm.get_submodule(prefix) if prefix else gm
    if isinstance(value, (nn.Module, nn.Parameter)):
        setattr(owner, name, value)
    else:
        owner._buffers[name] = value
