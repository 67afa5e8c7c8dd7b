"""Graph rewriting: compile a traced graph, its activation slots inserted, into a GraphModule."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.fx
from torch import nn

from ..callbacks.base import BendingCallback
from ..callbacks.targets import static_product
from ..tracing import Fact, FlowStep, TracedGraph
from ..tracing.objects import attribute_at
from ..tracing.records import META_KEY
from ..tracing.surgery import SLOTS, insert_slots, is_slot

__all__ = [
    "SLOTS",
    "ActivationSlot",
    "GraphModuleRecord",
    "build_graph_module",
    "graph_module_record",
    "install_module",
]


class ActivationSlot(nn.Module):
    """Insertion point after one activation: applies its callbacks in order.

    An empty slot is the identity; slots are only inserted where something is bent.

    Args:
        name: the activation, as ``"<method>:<node>"``.
        callbacks: what bends it, in order.
        standing_for: the callbacks that ``callbacks`` are scripted copies of (an export's),
            which :meth:`static_factor` asks; ``callbacks`` by default.
        copy: give the callbacks a copy of the activation, for an activation that may share
            memory with the module's own weights (one computed from no input), so that a
            callback editing its input in place cannot change them.
    """

    # The bound ``bend`` methods are a Python shortcut; TorchScript compiles ``forward``.
    __jit_ignored_attributes__: ClassVar[list[str]] = ["_bends", "_standing_for"]

    def __init__(
        self,
        name: str,
        callbacks: Sequence[nn.Module],
        standing_for: Sequence[BendingCallback] | None = None,
        copy: bool = False,
    ) -> None:
        super().__init__()
        self.name = name
        self.copy = copy
        self.callbacks = nn.ModuleList(callbacks)
        # Scripted callbacks (an export's) have no bend of their own: they are called.
        self._bends = tuple(getattr(cb, "bend", cb) for cb in callbacks)
        eager = [cb for cb in callbacks if isinstance(cb, BendingCallback)]
        self._standing_for = tuple(eager if standing_for is None else standing_for)

    def originals(self) -> tuple[BendingCallback, ...]:
        """The eager callbacks this slot applies (those its scripted copies stand for)."""
        return self._standing_for

    def static_factor(self) -> torch.Tensor | None:
        """The tensor the slot multiplies its activation by on every call, if its callbacks
        only do that (see :meth:`BendingCallback.static_factor`); else ``None``."""
        return static_product(self._standing_for, self.name)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # A slot runs on every call of a bent graph (every streamed block): a callback's
        # forward is its bend, so calling the bends directly skips nn.Module's call machinery
        # twice per callback, which costs as much as a small bending itself. (A slot carries
        # no hooks; the graph's own code is what calls it.)
        name = self.name
        if self.copy:
            x = x.clone()
        for bend in self._bends:
            x = bend(x, name)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.copy:
            x = x.clone()
        for cb in self.callbacks:
            x = cb(x, self.name)
        return x

    def extra_repr(self) -> str:
        return repr(self.name)


@dataclass(frozen=True)
class GraphModuleRecord:
    """What a bended GraphModule was compiled from, kept in ``gm.meta["torchbend"]``."""

    flow_steps: tuple[FlowStep, ...]
    """The decisions baked into the graph (those of the trace it was compiled from)."""
    guard_facts: tuple[Fact, ...]
    """The facts of the inputs those decisions read."""
    paths: Mapping[str, str]
    """The dotted path, in the module the GraphModule reads from, of each module and weight
    attached to it under a flat name (``encoder_0_weight``: ``encoder.0.weight``)."""
    slots: Mapping[str, ActivationSlot]
    """The slot after each bent activation, by node name."""


def graph_module_record(gm: torch.fx.GraphModule) -> GraphModuleRecord:
    """The record of a GraphModule made by :func:`build_graph_module`."""
    record: GraphModuleRecord = gm.meta[META_KEY]
    return record


def build_graph_module(
    traced: TracedGraph,
    module: nn.Module,
    slots: Mapping[str, ActivationSlot],
    class_name: str,
    constants: Mapping[str, torch.Tensor] | None = None,
) -> torch.fx.GraphModule:
    """Compile ``traced`` once, its slots inserted, reading modules and weights from ``module``
    (and its constants from ``constants`` if given, else from ``traced.constants``).

    Modules and weights of ``module`` are attached under flat names (``encoder.0.weight`` as
    ``_tb_encoder_0_weight``) so that the generated code reaches each in one attribute lookup
    instead of one per level of nesting; :func:`graph_module_record` maps them back, and
    gives the flow steps of the trace.
    """
    graph = insert_slots(traced, slots)
    constants = traced.constants if constants is None else constants
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
            root[flat] = attribute_at(module, target)
        node.target = flat_of[target]
    gm = torch.fx.GraphModule(root, graph, class_name=class_name)
    inserted = {_node_of_slot(n): slots[_node_of_slot(n)] for n in graph.nodes if is_slot(n)}
    gm.meta[META_KEY] = GraphModuleRecord(
        tuple(traced.flow_steps), tuple(traced.guard_facts), paths, inserted
    )
    return gm


def _node_of_slot(slot: torch.fx.Node) -> str:
    source = slot.args[0]
    assert isinstance(source, torch.fx.Node)
    return source.name


def install_module(gm: torch.fx.GraphModule, module: nn.Module) -> None:
    """Point ``gm``'s modules and weights at ``module`` (after weight bending changed)."""
    for flat, path in graph_module_record(gm).paths.items():
        _assign(gm, flat, attribute_at(module, path))


def _assign(gm: nn.Module, target: str, value: Any) -> None:
    prefix, _, name = target.rpartition(".")
    owner = gm.get_submodule(prefix) if prefix else gm
    if isinstance(value, (nn.Module, nn.Parameter)):
        setattr(owner, name, value)
    else:
        owner._buffers[name] = value
