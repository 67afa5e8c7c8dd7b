"""What a trace records: one frozen record per node, and the traced graph with its decisions."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from .attributes import ModuleState
from .facts import Fact
from .flow import FlowStep
from .surgery import copy_graph
from .values import leaves

__all__ = [
    "META_KEY",
    "NodeRecord",
    "TracedGraph",
    "describe",
    "describe_dtype",
    "describe_shape",
    "record_of",
    "set_record",
]

META_KEY = "torchbend"
"""The ``node.meta`` key of a node's :class:`NodeRecord` (read it with :func:`record_of`)."""


@dataclass(frozen=True)
class NodeRecord:
    """What tracing found out about one node, kept in ``node.meta["torchbend"]``.

    While tracing, the fields that say how the value depends on the inputs (``static``,
    ``deps``, ``shape_deps``, ``input``, ``shape_of``) are filled as nodes are recorded; the
    fields that describe the value (``shape``, ``dtype``, ``device``, ``is_tensor``) when the
    trace ends. Graphs do not keep the concrete values themselves.
    """

    shape: Any = None
    """``torch.Size`` of a tensor value, a tuple of those for a sequence holding tensors, else
    ``None``."""
    dtype: Any = None
    """``torch.dtype`` of a tensor value, or a tuple of those like ``shape``."""
    device: torch.device | None = None
    """Device of a tensor value."""
    is_tensor: bool = False
    """Whether the value is a tensor (what activation bendings can apply to)."""
    static: bool = False
    """Whether the value is fixed by facts of the inputs (shapes, dtypes, scalar arguments)
    rather than by tensor data: a decision read from it is checked before each call."""
    deps: frozenset[Fact] = frozenset()
    """The facts of the inputs a static value is a function of."""
    shape_deps: frozenset[Fact] | None = None
    """The facts of the inputs the value's shape (or length) is a function of; ``None`` when
    it depends on tensor data (``nonzero``, boolean masks) or is unknown."""
    input: str | None = None
    """For the placeholder of a tensor input: the argument's name."""
    shape_of: str | None = None
    """For ``x.shape`` of a tensor input: the input's name, so ``x.shape[i]`` reads one dim."""


_NONE = NodeRecord()


def record_of(node: torch.fx.Node) -> NodeRecord:
    """The record of ``node``; an empty one for nodes tracing did not record (the output)."""
    record: NodeRecord = node.meta.get(META_KEY, _NONE)
    return record


def set_record(node: torch.fx.Node, record: NodeRecord) -> None:
    """Attach ``record`` to ``node``."""
    node.meta[META_KEY] = record


def describe(record: NodeRecord, value: Any) -> NodeRecord:
    """``record`` with the fields describing ``value`` (shape, dtype, device) filled."""
    tensor = isinstance(value, torch.Tensor)
    return dataclasses.replace(
        record,
        shape=describe_shape(value),
        dtype=describe_dtype(value),
        device=value.device if tensor else None,
        is_tensor=tensor,
    )


def describe_shape(value: Any) -> Any:
    """The shape of a tensor, or the nested shapes of a tuple or list holding tensors."""
    return _describe(value, "shape")


def describe_dtype(value: Any) -> Any:
    """The dtype of a tensor, or the nested dtypes of a tuple or list holding tensors."""
    return _describe(value, "dtype")


def _describe(value: Any, attr: str) -> Any:
    if isinstance(value, torch.Tensor):
        return getattr(value, attr)
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in leaves(value)):
        return tuple(_describe(v, attr) for v in value)
    return None


class TracedGraph(torch.fx.Graph):
    """A graph traced on example inputs, and what it depends on: a :class:`torch.fx.Graph`
    with the decisions baked into it, the facts of the inputs they read, and its constants.

    Each node's :class:`NodeRecord` is in ``node.meta["torchbend"]`` (see :func:`record_of`).
    Inputs taking other decisions get another graph: ``flow_steps`` says which were taken,
    ``guard_facts`` what of the inputs they read.

    Args:
        graph: the nodes to copy (``graph`` itself is left as it is).
        constants, flow_steps, guard_facts, concrete_inputs, outputs, runtime_guards: the
            attributes below.
    """

    constants: dict[str, torch.Tensor]
    """Tensors the graph reads by ``get_attr`` that are no attribute of the module (tensors
    the traced code made from no input), by target name."""
    flow_steps: list[FlowStep]
    """The decisions taken on concrete values and baked into the graph, in order."""
    guard_facts: tuple[Fact, ...]
    """The facts of the inputs that signature-checked decisions read: calls whose inputs agree
    on them take the same decisions."""
    concrete_inputs: tuple[str, ...]
    """Inputs that were no proxies (``None``, bools, strings): their values are in the graph."""
    outputs: Any
    """What the method returned on the example inputs."""
    runtime_guards: int
    """How many decisions are checked inside the graph (they read tensor data)."""
    module_state: tuple[ModuleState, ...] = ()
    """The plain attributes (``training``, flags, modes) of the modules whose Python code the
    trace ran: their reads are baked in."""
    grad_mode: bool | None = None
    """Whether gradients were enabled while tracing, if the traced code asked
    (``torch.is_grad_enabled()``); ``None`` if it did not."""
    accepts: Callable[[Mapping[str, Any]], bool] | None = None
    """Guards the facts do not express (the ranges of sizes torch.export left symbolic):
    whether the graph holds for a call's inputs; ``None`` if the facts say it all."""

    def __init__(
        self,
        graph: torch.fx.Graph,
        constants: dict[str, torch.Tensor],
        flow_steps: list[FlowStep],
        guard_facts: tuple[Fact, ...],
        concrete_inputs: tuple[str, ...] = (),
        outputs: Any = None,
        runtime_guards: int = 0,
    ) -> None:
        super().__init__()
        copy_graph(graph, into=self)
        self.constants = constants
        self.flow_steps = flow_steps
        self.guard_facts = guard_facts
        self.concrete_inputs = concrete_inputs
        self.outputs = outputs
        self.runtime_guards = runtime_guards

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> TracedGraph:
        # torch.fx.Graph's own deepcopy makes a plain Graph: the records would be lost.
        memo = {} if memo is None else memo
        new = TracedGraph(
            self,
            copy.deepcopy(self.constants, memo),
            list(self.flow_steps),
            self.guard_facts,
            self.concrete_inputs,
            None,  # the example outputs stay with the graph they were traced for
            self.runtime_guards,
        )
        new.module_state = copy.deepcopy(self.module_state, memo)
        new.grad_mode, new.accepts = self.grad_mode, self.accepts
        return new

    def __repr__(self) -> str:
        return (
            f"TracedGraph(nodes={len(self.nodes)}, flow_steps={self.flow_steps!r}, "
            f"guard_facts={self.guard_facts!r})"
        )
