"""Graph surgery for activations in and out: keep a graph up to some nodes, or start it there."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch.fx

__all__ = ["cut_from", "keep_until"]


def _copy(
    graph: torch.fx.Graph, with_output: bool = False
) -> tuple[torch.fx.Graph, dict[str, torch.fx.Node]]:
    new = torch.fx.Graph()
    new._codegen = graph._codegen
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out = new.graph_copy(graph, env)
    if with_output:
        new.output(out)
    for old, node in env.items():
        node.meta = old.meta
    return new, {n.name: n for n in new.nodes}


def _has_effect(node: torch.fx.Node) -> bool:
    """Checks of decisions and in-place writes, which run for their effect, not their value."""
    if node.meta.get("tb_guard"):
        return True
    if node.op == "call_function":
        return node.target is operator.setitem
    return node.op == "call_method" and str(node.target).endswith("_")


def keep_until(graph: torch.fx.Graph, names: Sequence[str]) -> torch.fx.Graph:
    """A copy of ``graph`` returning ``{name: activation}`` and stopping after the last one.

    Nodes after the last activation needed are dropped, so nothing past it is computed.
    """
    new, nodes = _copy(graph)
    order = {n: i for i, n in enumerate(new.nodes)}
    last = max(order[nodes[name]] for name in names)
    for node in reversed(list(new.nodes)):
        if order[node] > last:
            new.erase_node(node)
    new.output({name: nodes[name] for name in names})
    new.lint()
    return new


def cut_from(graph: torch.fx.Graph, names: Sequence[str]) -> torch.fx.Graph:
    """A copy of ``graph`` where activations ``names`` become inputs (placeholders whose
    argument name is the activation's name).

    What only fed those activations is dropped; checks of data-dependent decisions are kept
    only where they read values the cut graph still computes.
    """
    new, nodes = _copy(graph, with_output=True)
    output = next(n for n in new.nodes if n.op == "output")
    placeholders = [n for n in new.nodes if n.op == "placeholder"]
    anchor = placeholders[-1] if placeholders else None
    for name in names:
        node = nodes[name]
        if node.op == "placeholder":
            continue
        if anchor is None:
            with new.inserting_before(next(iter(new.nodes))):
                placeholder = new.placeholder(name)
        else:
            with new.inserting_after(anchor):
                placeholder = new.placeholder(name)
        anchor = placeholder
        placeholder.meta = dict(node.meta)
        node.replace_all_uses_with(placeholder)
    needed: set[torch.fx.Node] = set()
    stack = [output]
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    for node in reversed(list(new.nodes)):
        if node in needed:
            continue
        keep = _has_effect(node) and all(i in needed for i in node.all_input_nodes)
        if not keep and not node.users:
            new.erase_node(node)
    new.lint()
    return new
