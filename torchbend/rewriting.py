"""Graph rewriting: compile a traced graph, its activation slots inserted, into a GraphModule."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn

from .callbacks.base import BendingCallback
from .tracing.surgery import SLOTS, insert_slots, is_slot

__all__ = ["SLOTS", "ActivationSlot", "build_graph_module", "install_view"]


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
    graph = insert_slots(graph, slots)
    root: dict[str, Any] = {}
    paths: dict[str, str] = {}
    flat_of: dict[str, str] = {}
    for node in graph.nodes:
        target = str(node.target)
        if is_slot(node):
            root[target] = slots[_node_of_slot(node)]
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


def _node_of_slot(slot: torch.fx.Node) -> str:
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
