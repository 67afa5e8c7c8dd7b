"""Graph surgery on traced graphs: copy, insert bending slots, keep until, cut from, unguard.

Every function here leaves the graph it is given as it was and works on a copy, whose nodes
keep their names and their records (``node.meta``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Collection, Iterable

import torch.fx

from .compat import copy_codegen
from .flow import check_decision, is_guard

__all__ = [
    "SLOTS",
    "copy_graph",
    "cut_from",
    "decisions_only",
    "insert_slots",
    "is_slot",
    "keep_until",
    "slot_name",
    "strip_guards",
]

SLOTS = "_tb_slots"
"""Name of the submodule of bended GraphModules that holds activation slots."""


def copy_graph(
    graph: torch.fx.Graph, with_output: bool = True, into: torch.fx.Graph | None = None
) -> tuple[torch.fx.Graph, dict[str, torch.fx.Node]]:
    """A copy of ``graph`` (made in the empty graph ``into`` if given), and its nodes by name.

    The copy keeps the calling convention of ``graph``, its node names and each node's
    ``meta`` (records included). Its output is left out with ``with_output=False``; else it
    returns what ``graph`` returns, without annotating a type: generated code then leaves the
    return type to TorchScript, and a return annotation written as a string
    (``from __future__ import annotations``) names nothing the generated code can resolve.
    """
    new = torch.fx.Graph() if into is None else into
    copy_codegen(graph, new)
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out = new.graph_copy(graph, env)
    if with_output:
        old = next(n for n in reversed(graph.nodes) if n.op == "output")
        new.output(out).meta = dict(old.meta)
    return new, {n.name: n for n in new.nodes}


def slot_name(node: str) -> str:
    """The name of the slot of activation ``node`` in the ``SLOTS`` submodule."""
    return re.sub(r"[^0-9a-zA-Z_]", "_", node)


def is_slot(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls an activation slot (see :func:`insert_slots`)."""
    return node.op == "call_module" and str(node.target).startswith(SLOTS + ".")


def insert_slots(graph: torch.fx.Graph, names: Iterable[str]) -> torch.fx.Graph:
    """A copy of ``graph`` routing each activation named in ``names`` through a slot: a
    ``call_module`` of ``SLOTS.<slot_name(name)>`` whose users are the activation's, checks
    of decisions aside (they check the traced value, before any bending). Names of no node
    of ``graph`` are ignored."""
    wanted = set(names)
    new, _ = copy_graph(graph)
    for node in [n for n in new.nodes if n.name in wanted]:
        users = [u for u in node.users if not is_guard(u)]
        with new.inserting_after(node):
            slot = new.call_module(f"{SLOTS}.{slot_name(node.name)}", (node,))
        slot.meta = dict(node.meta)
        for user in users:
            user.replace_input_with(node, slot)
    new.lint()
    return new


def _has_effect(node: torch.fx.Node) -> bool:
    """Checks of decisions and in-place writes, which run for their effect, not their value."""
    if is_guard(node):
        return True
    if node.op == "call_function":
        return node.target is operator.setitem
    return node.op == "call_method" and str(node.target).endswith("_")


def keep_until(graph: torch.fx.Graph, names: Collection[str]) -> torch.fx.Graph:
    """A copy of ``graph`` returning ``{name: activation}`` and stopping after the last one.

    Nodes after the last activation needed are dropped, so nothing past it is computed.
    """
    new, nodes = copy_graph(graph, with_output=False)
    order = {n: i for i, n in enumerate(new.nodes)}
    last = max(order[nodes[name]] for name in names)
    for node in reversed(list(new.nodes)):
        if order[node] > last:
            new.erase_node(node)
    new.output({name: nodes[name] for name in names})
    new.lint()
    return new


def cut_from(graph: torch.fx.Graph, names: Collection[str]) -> torch.fx.Graph:
    """A copy of ``graph`` where activations ``names`` become inputs (placeholders whose
    argument name is the activation's name).

    What only fed those activations is dropped; checks of data-dependent decisions are kept
    only where they read values the cut graph still computes.
    """
    new, nodes = copy_graph(graph)
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
    needed = _inputs_of([output])
    # Values the cut graph can compute from what it needs anyway (no other input): checks of
    # decisions on them (``if z.mean() > 0`` after the cut) stay, with what they read.
    computable = set(needed)
    for node in new.nodes:
        if node.op not in ("placeholder", "output") and all(
            i in computable for i in node.all_input_nodes
        ):
            computable.add(node)
    needed |= _inputs_of([n for n in computable if _has_effect(n)])
    for node in reversed(list(new.nodes)):
        if node not in needed:
            new.erase_node(node)
    new.lint()
    return new


def _inputs_of(nodes: Iterable[torch.fx.Node]) -> set[torch.fx.Node]:
    """``nodes`` and every node they read, transitively."""
    found: set[torch.fx.Node] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node not in found:
            found.add(node)
            stack.extend(node.all_input_nodes)
    return found


def decisions_only(graph: torch.fx.Graph, name: str) -> list[torch.fx.Node] | None:
    """If node ``name`` only reaches what ``graph`` returns through checks of decisions (an
    ``if`` on its sum), those checks: bending it changes nothing, since checks read traced
    values. ``None`` if its value reaches the output or an in-place write."""
    start = next((n for n in graph.nodes if n.name == name), None)
    if start is None:
        return None
    guards: list[torch.fx.Node] = []
    seen: set[torch.fx.Node] = set()
    stack = [start]
    while stack:
        for user in stack.pop().users:
            if user in seen:
                continue
            seen.add(user)
            if is_guard(user):
                guards.append(user)
            elif user.op == "output" or _has_effect(user):
                return None
            else:
                stack.append(user)
    return guards


def strip_guards(graph: torch.fx.Graph) -> tuple[int, list[str]]:
    """Remove from ``graph`` itself the checks of data-dependent decisions, so that it always
    takes the branches taken when traced (exported programs cannot branch on tensor values),
    and the attributes it assigns (a file holds no module of the user's to update). Returns
    how many checks were removed, and the attributes no longer assigned."""
    guards = [n for n in graph.nodes if is_guard(n)]
    assigned = [str(n.args[1]) for n in guards if n.target is not check_decision]
    for node in reversed(guards):
        graph.erase_node(node)
    return len(guards) - len(assigned), assigned
