"""Facts about the nodes of a traced graph that the streaming pass reads: what they pad, along
which axis they work, what they are called."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import TensorMetadata

__all__ = [
    "declared_latency",
    "dim_argument",
    "flat_args",
    "input_channels",
    "is_conv",
    "node_delay",
    "node_place",
    "node_rank",
    "node_shape",
    "target_name",
    "zero_pad",
]


def flat_args(args: Any, kwargs: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for value in [*args, *kwargs.values()]:
        out.extend(flat_args(value, {}) if isinstance(value, (list, tuple)) else [value])
    return out


def node_delay(value: Any) -> int | None:
    return value.meta.get("tb_delay") if isinstance(value, torch.fx.Node) else None


def node_shape(node: torch.fx.Node) -> tuple[int, ...]:
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if isinstance(meta, TensorMetadata) else ()


def node_rank(node: torch.fx.Node) -> int:
    return len(node_shape(node)) or 3


def dim_argument(node: torch.fx.Node) -> Any:
    """The positional ``dim`` of the reductions and splits that take one second."""
    name = target_name(node.target)
    methods = {"sum", "mean", "cumsum", "softmax", "flip", "roll", "chunk", "split", "narrow"}
    position = 2 if name in ("chunk", "split", "roll") else 1
    if name not in methods:
        return None
    if len(node.args) > position:
        return node.args[position]
    return 0 if name in ("chunk", "split") else None


def zero_pad(node: torch.fx.Node) -> tuple[torch.fx.Node, tuple[int, int]] | None:
    """``(input, (left, right))`` if ``node`` pads the last axis only, with zeros."""
    if node.op != "call_function" or node.target is not F.pad:
        return None
    source, pad = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("pad")
    mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
    value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value", None)
    if (
        not isinstance(source, torch.fx.Node)
        or not isinstance(pad, (list, tuple))
        or len(pad) != 2
        or not all(isinstance(p, int) and p >= 0 for p in pad)
        or mode != "constant"
        or value not in (None, 0, 0.0)
    ):
        return None
    return source, (int(pad[0]), int(pad[1]))  # type: ignore[arg-type]


def is_conv(graph: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    return node.op == "call_module" and isinstance(graph.get_submodule(str(node.target)), nn.Conv1d)


def target_name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def node_place(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        return f"layer {node.target!r}"
    return f"{target_name(node.target)} ({node.name})"


def input_channels(module: nn.Module, graph: torch.fx.GraphModule) -> int:
    for name in ("channels", "n_channels", "in_channels"):
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    for node in graph.graph.nodes:
        if node.op == "call_module" and isinstance(
            graph.get_submodule(str(node.target)), nn.Conv1d
        ):
            conv = graph.get_submodule(str(node.target))
            assert isinstance(conv, nn.Conv1d)
            return conv.in_channels
    return 1


def declared_latency(module: nn.Module) -> int:
    value = getattr(module, "latency", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
