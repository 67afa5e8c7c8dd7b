"""TorchScript methods made ready for torch's TorchScript-to-export converter.

The converter (``torch._export.converter.TS2EPConverter``) converts a scripted module's
``forward`` and stops at control flow it cannot turn into ``torch.cond``. Files written for
nn~ are full of it: cached convolutions branch on plain attributes (``if self.padding:``,
``if not self.initialized:``) and on optional biases (``if self.bias is not None:``), which
are decided once the file is loaded. :class:`Convertible` settles those decisions before the
converter sees them:

- a scripted holder's ``forward`` calls the wanted method (``encode``, ``decode``...), or the
  graph inside the FIFO of a torchbend nn~ file;
- the holder is frozen keeping every tensor attribute (weights stay bendable, streaming
  caches stay buffers the graph updates), so plain attributes become constants;
- an optional attribute that holds a tensor is typed as a tensor, so ``is not None`` folds;
- constants are propagated, which removes the branches they decided;
- nn~'s ``<method>_params`` buffers (the method's channels and ratios, which nn~ reads once
  when it loads the file) become constants, and the size arithmetic done with them becomes
  integer arithmetic (:mod:`torchbend.tracing.sizes`): RAVE's ``decode`` trims its output
  by ``z.shape[-1] * self.decode_params[1]``;
- slices of sizes (``batch_size = x.shape[:-2]``, in RAVE's methods) become the sizes of
  views, which the converter takes.

The plain attributes folded in are returned by path: a graph holds only while they keep the
values it was converted with (a file's setters change them), and callers guard on them.

The private TorchScript functions this needs (inlining, freezing, simplifying a graph) are
in :mod:`torchbend.tracing.compat`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from .compat import freeze_keeping_tensors, inline, simplify
from .objects import attribute_at
from .sizes import numbers_from_scalar_tensors, size_slices_as_views
from .specialize import Specialized, specialize

__all__ = ["Convertible", "attribute_reader", "attribute_value"]

_HOLDERS = itertools.count()


class _Holder(nn.Module):
    """Holds a TorchScript module as ``root``: scripted, it gets a ``forward`` calling one of
    the module's methods, which torch's converter (``forward`` only) can then convert."""

    def __init__(self, root: torch.jit.ScriptModule) -> None:
        super().__init__()
        self.root = root


class Convertible:
    """A scripted module whose ``forward`` runs ``method`` of a TorchScript module, ready for
    torch's converter, and the plain attributes of that module its graph baked in."""

    def __init__(self, module: torch.jit.ScriptModule, method: str) -> None:
        holder = _holder(module, method)
        graph = holder.graph.copy()
        inline(graph)
        self.attributes = tuple(sorted(set(_plain_attributes(holder, graph))))
        """Paths (from ``module``) of the plain attributes the method reads."""
        self.holder = _settled(holder)
        """The holder to convert: frozen and simplified if TorchScript could, else as is."""

    def settle_flow(self, names: Sequence[str], inputs: Sequence[Any]) -> Specialized | None:
        """The branches and loops left in the holder's graph settled as the example
        ``inputs`` (of the arguments ``names``) take them (:mod:`torchbend.tracing.specialize`);
        ``None`` where none is left (the graph is then as it was)."""
        graph = self.holder.graph
        if not any(n.kind() in ("prim::If", "prim::Loop") for n in _nodes(graph)):
            return None
        done = specialize(graph, self.holder, names, inputs)
        if done.refused is None:
            simplify(graph)
        return done


def attribute_reader(
    module: torch.jit.ScriptModule, paths: Sequence[str]
) -> Callable[[], tuple[Any, ...]]:
    """A function giving the attributes at ``paths`` of ``module`` as they are now, hashable
    (lists become tuples). Their owners are found once: a read is one C++ lookup each, cheap
    enough for every call of a bended module."""
    owners = []
    for path in paths:
        owner, _, name = path.rpartition(".")
        owners.append((attribute_at(module, owner)._c, name))

    def read() -> tuple[Any, ...]:
        return tuple(_hashable(c.getattr(name)) for c, name in owners)

    return read


def attribute_value(module: torch.jit.ScriptModule, path: str) -> Any:
    """The attribute at ``path`` of ``module``, hashable (lists become tuples)."""
    return attribute_reader(module, [path])()[0]


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def _holder(module: torch.jit.ScriptModule, method: str) -> torch.jit.ScriptModule:
    """A scripted :class:`_Holder` of ``module`` whose ``forward`` calls ``module.<method>``."""
    arguments = getattr(module, method).schema.arguments[1:]  # the first is self
    params = ", ".join(f"{a.name}: {a.type.annotation_str}" for a in arguments)
    names = ", ".join(a.name for a in arguments)
    # A class of its own per holder: TorchScript shares one compiled type between the
    # instances of a class, and a type's forward cannot be defined twice.
    cls = type(f"_Holder{next(_HOLDERS)}", (_Holder,), {})
    holder = torch.jit.script(cls(module))
    target = f"self.root.{method}"
    # A torchbend nn~ file whose model needs larger blocks than nn~ may give runs the method's
    # graph inside a FIFO (torchbend/export/fifo.py): queues and branches on how many samples
    # each call brings, which the converter cannot take and nothing needs bent. The graph in
    # it is converted (whole blocks pass through the FIFO unchanged; an export puts it back).
    inner = getattr(module, f"tb_method_{method}", None)
    if int(getattr(module, "fifo_block", 0) or 0) > 0 and hasattr(inner, "inner"):
        target = f"self.root.tb_method_{method}.inner"
    holder.define(f"def forward(self, {params}):\n    return {target}({names})\n")
    return holder


def _nodes(block: Any) -> Iterator[Any]:
    for node in block.nodes():
        for inner in node.blocks():
            yield from _nodes(inner)
        yield node


def _path(value: Any) -> list[str] | None:
    """The attribute path of a ``prim::GetAttr`` chain from the graph's ``self``, else None."""
    node = value.node()
    if node.kind() == "prim::Param":
        return []
    if node.kind() != "prim::GetAttr":
        return None
    head = _path(node.input())
    return None if head is None else [*head, node.s("name")]


def _is_plain_type(kind: Any) -> bool:
    return not isinstance(kind, (torch.TensorType, torch.ClassType)) and not (
        isinstance(kind, torch.OptionalType) and isinstance(kind.getElementType(), torch.TensorType)
    )


def _plain_attributes(holder: torch.jit.ScriptModule, graph: Any) -> Iterator[str]:
    for node in _nodes(graph):
        if node.kind() != "prim::GetAttr" or not _is_plain_type(node.output().type()):
            continue
        path = _path(node.output())
        if path and path[0] == "root" and len(path) > 1:
            yield ".".join(path[1:])


def _settled(holder: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """``holder`` frozen with its tensors kept, optional tensors typed as tensors and the
    decisions of plain attributes folded; ``holder`` itself where TorchScript cannot."""
    try:
        frozen = freeze_keeping_tensors(holder)
    except RuntimeError:  # a module freezing refuses (interfaces...): the converter decides
        return holder
    graph = frozen.graph
    for node in _nodes(graph):
        if node.kind() != "prim::GetAttr":
            continue
        kind = node.output().type()
        if isinstance(kind, torch.OptionalType):
            path = _path(node.output())
            if path is not None and isinstance(attribute_at(frozen, ".".join(path)), torch.Tensor):
                node.output().setType(kind.getElementType())
    _contract_constants(holder.root, graph)
    simplify(graph)
    if numbers_from_scalar_tensors(graph) + size_slices_as_views(graph):
        simplify(graph)
    return frozen


def _contract_constants(root: torch.jit.ScriptModule, graph: Any) -> None:
    """The reads of nn~'s ``<method>_params`` buffers of the file ``root`` made constants in
    the frozen holder's ``graph``: a method's ``[in_channels, in_ratio, out_channels,
    out_ratio]``, fixed by nn~'s contract."""
    for node in list(_nodes(graph)):
        if node.kind() != "prim::GetAttr" or not node.s("name").endswith("_params"):
            continue
        path = _path(node.output())
        if path is None or len(path) != 2 or path[0] != "root":
            continue
        method = path[1].removesuffix("_params")
        value = getattr(root, path[1], None)
        if not isinstance(value, torch.Tensor) or not _is_method_params(value):
            continue
        if hasattr(root, method):
            with graph.insert_point_guard(node):
                node.output().replaceAllUsesWith(graph.insertConstant(value.clone()))
            node.destroy()


def _is_method_params(value: torch.Tensor) -> bool:
    """Whether ``value`` is shaped as nn~'s params of a method: four integers."""
    return value.shape == (4,) and not value.is_floating_point() and value.dtype != torch.bool
