"""How a node's value depends on the inputs: fixed by facts of their signature, or by data.

Each recorded node gets a :class:`NodeRecord` computed from the records of its arguments, so
that a decision read from its value is known to be checkable before the call (it is a function
of shapes, dtypes or scalar arguments) or to need a check inside the graph.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .facts import Fact
from .flow import is_guard
from .operations import (
    DATA_SHAPED_FUNCTIONS,
    DATA_SHAPED_METHODS,
    FACTORIES,
    PURE_FUNCTIONS,
    RANDOM_FACTORIES,
    RANDOM_METHODS,
    SHAPE_ATTRIBUTES,
    SHAPE_METHODS,
)
from .records import NodeRecord, describe, record_of, set_record
from .values import holds_tensor, leaves, map_values

__all__ = ["finalize", "input_record", "record_call"]


def input_record(name: str, value: Any) -> NodeRecord:
    """The record of the placeholder of input ``name``, a proxy valued ``value``."""
    if isinstance(value, torch.Tensor):
        return NodeRecord(shape_deps=frozenset({(name, "shape", None)}), input=name)
    if isinstance(value, (int, float)):
        return NodeRecord(
            static=True, deps=frozenset({(name, "value", None)}), shape_deps=frozenset()
        )
    return NodeRecord(shape_deps=frozenset({(name, "sig", None)}))


def record_call(
    node: torch.fx.Node,
    kind: str,
    target: Any,
    args: Any,
    value: Any,
    value_of: Callable[[torch.fx.Node], Any],
) -> None:
    """Record in ``node`` whether its value (``value``) is fixed by facts of the inputs.

    ``node`` calls ``target`` on ``args`` (``kind`` is ``call_function``, ``call_method`` or
    ``call_module``); ``value_of`` gives the values of the nodes of proxies in ``args``.
    """
    proxies = [a for a in leaves((args,)) if isinstance(a, torch.fx.Proxy)]
    records = [record_of(p.node) for p in proxies]
    first = records[0] if records else None
    shape_kind = None
    if kind == "call_function" and target is getattr and len(args) > 1:
        shape_kind = SHAPE_ATTRIBUTES.get(args[1])
    elif kind == "call_method":
        shape_kind = SHAPE_METHODS.get(target)
    if shape_kind is not None and first is not None and first.shape_deps is not None:
        set_record(node, _shape_record(first, shape_kind, target, args, value))
        return
    if (
        kind == "call_function"
        and target is operator.getitem
        and first is not None
        and first.shape_of is not None
        and isinstance(args[1], int)
    ):
        dim = frozenset({(first.shape_of, "shape", args[1])})
        set_record(node, NodeRecord(static=True, deps=dim, shape_deps=frozenset()))
        return
    random = (kind == "call_function" and target in RANDOM_FACTORIES) or (
        kind == "call_method" and target in RANDOM_METHODS
    )
    static = not random and all(r.static for r in records)
    deps: frozenset[Fact] = frozenset().union(*(r.deps for r in records))
    shape_deps: frozenset[Fact] | None = frozenset()
    makes_tensors = holds_tensor(value)
    for p, r in zip(proxies, records):
        v = value_of(p.node)
        own: frozenset[Fact] | None
        if _size_tensor(kind, target, v, p is proxies[0]):
            own = r.deps if r.static else None  # ``torch.arange(n)``: sized by its value
        elif holds_tensor(v):
            own = r.shape_deps
        elif not r.static:
            own = None
        elif isinstance(v, (tuple, list)) and not makes_tensors:
            own = r.shape_deps  # a sequence's length shapes sequences made of it
        else:
            own = r.deps  # sizes and numbers shape tensors by their values
        if own is None or shape_deps is None:
            shape_deps = None
        else:
            shape_deps = shape_deps | own
        if (
            kind == "call_function"
            and target is operator.getitem
            and p is not proxies[0]
            and isinstance(v, torch.Tensor)
            and v.dtype == torch.bool
        ):
            shape_deps = None  # a boolean mask selects as many elements as it holds True
    if (
        (kind == "call_function" and target in DATA_SHAPED_FUNCTIONS)
        or (kind == "call_method" and target in DATA_SHAPED_METHODS)
        or (kind == "call_function" and target is torch.where and len(args) == 1)
    ):
        shape_deps = None  # ``torch.where(mask)`` is ``nonzero(mask, as_tuple=True)``
    set_record(
        node,
        NodeRecord(static=static, deps=deps if static else frozenset(), shape_deps=shape_deps),
    )
    in_place = (kind == "call_function" and target is operator.setitem) or (
        kind == "call_method" and target.endswith("_") and not target.startswith("_")
    )
    if in_place and isinstance(args[0], torch.fx.Proxy):
        # The mutated tensor now holds what was written into it: a value fixed by the
        # signature before may depend on data (or on random draws) now.
        written = args[0].node
        before = record_of(written)
        still = static and before.static
        set_record(
            written,
            dataclasses.replace(before, static=still, deps=deps if still else frozenset()),
        )


def _size_tensor(kind: str, target: Any, value: Any, first: bool) -> bool:
    """Whether ``value`` is a one-number integer tensor given as a size: to a factory
    (``torch.arange(n)``), or after the tensor to a method (``x.expand(2, n)``)."""
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        return False
    if value.is_floating_point() or value.is_complex():
        return False
    return (kind == "call_function" and target in FACTORIES) or (
        kind == "call_method" and not first
    )


def _shape_record(
    first: NodeRecord, shape_kind: str, target: Any, args: Any, value: Any
) -> NodeRecord:
    """The record of a shape, dtype or device read (``x.shape``, ``x.size(1)``, ``x.dim()``)
    from a value whose record is ``first``."""
    assert first.shape_deps is not None
    deps = first.shape_deps
    if first.input is not None:
        index = None
        if target == "size" and len(args) > 1 and isinstance(args[1], int):
            index = args[1]
        deps = frozenset({(first.input, shape_kind, index)})
    # The length of a shape (what ``len`` and unpacking read) is the number of dims.
    read = {(first.input, "shape", None)} if first.input is not None else first.shape_deps
    length_deps = frozenset(
        (name, "ndim", None) if what == "shape" else (name, what, index)
        for name, what, index in read
    )
    shape_of = (
        first.input
        if shape_kind == "shape" and isinstance(value, torch.Size) and first.input is not None
        else None
    )
    return NodeRecord(static=True, deps=deps, shape_deps=length_deps, shape_of=shape_of)


def finalize(graph: torch.fx.Graph, value_of: Callable[[torch.fx.Node], Any]) -> Any:
    """Drop the unused static nodes of pure reads, describe each node's value in its record,
    and return the outputs' values."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    outputs = map_values(
        output.args[0], lambda a: value_of(a) if isinstance(a, torch.fx.Node) else a
    )
    for node in reversed(list(graph.nodes)):
        if (
            not node.users
            and record_of(node).static
            and not is_guard(node)
            and (
                (node.op == "call_function" and node.target in PURE_FUNCTIONS)
                or (node.op == "call_method" and node.target in SHAPE_METHODS)
            )
        ):
            graph.erase_node(node)
    for node in graph.nodes:
        set_record(node, describe(record_of(node), value_of(node)))
    graph.lint()
    return outputs
