"""Reading a torch.export program (exported, or converted from TorchScript) into the graph
the rest of torchbend reads: weights as ``get_attr`` of their paths in the wrapped module, one
record per node, node names taken from the modules that ran them, and torch.export's guards.
"""

from __future__ import annotations

import contextlib
import io
import logging
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, cast

import torch
import torch.fx
from torch import nn

from ..compat import export_guards, pytree
from ..facts import Fact
from ..objects import attribute_at, class_key, rebuild_object, rebuilt
from ..records import NodeRecord, set_record

__all__ = ["program_guards", "quiet", "rebuild_program", "signature_facts", "summary"]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Without what torch prints while exporting (the partial graph of a failure, the sizes
    it fixed): a failure is an error of its own, and what was fixed is in the guards."""
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logging.disable(before)


def summary(e: BaseException) -> str:
    """``"Type: first line"`` of an error torch raised (its later lines are its own dumps)."""
    first = str(e).strip().split("\n")[0][:300]
    return f"{type(e).__name__}: {first}"


def signature_facts(names: list[str]) -> tuple[Fact, ...]:
    return tuple((name, "sig", None) for name in names)


def program_guards(
    gm: torch.fx.GraphModule, names: list[str], leaves: list[str]
) -> tuple[tuple[Fact, ...], Callable[[Mapping[str, Any]], bool] | None]:
    """The facts of an exported graph's inputs (dtype, rank, the sizes torch.export
    specialized; values of other arguments, ``None`` of those in ``names`` but not in
    ``leaves``) and its guards on the sizes it left symbolic."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    check = export_guards(gm)  # without it, every size is a fact
    facts: list[Fact] = [(name, "sig", None) for name in names if name not in leaves]
    symbolic = False
    for name, node in zip(leaves, placeholders):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            facts.append((name, "sig", None))
            continue
        facts += [(name, "dtype", None), (name, "ndim", None)]
        for d, size in enumerate(value.shape):
            if isinstance(size, int) or check is None:
                facts.append((name, "shape", d))
            else:
                symbolic = True
    if not symbolic or check is None:
        return tuple(facts), None

    def accepts(inputs: Mapping[str, Any]) -> bool:
        try:
            check(*(inputs[n] for n in leaves))
        except Exception:  # a guard failed: the graph does not hold for these sizes
            return False
        return True

    return tuple(facts), accepts


def rebuild_program(
    gm: torch.fx.GraphModule,
    root: nn.Module,
    out_spec: Any,
    inputs: list[str] | None = None,
    examples: list[Any] | None = None,
    unpack: Callable[[dict[Any, Any]], Any] | None = None,
) -> tuple[torch.fx.Graph, dict[str, torch.Tensor]]:
    """The exported graph with plain placeholders (named ``inputs`` in order, if given) and
    output, named and recorded nodes, and weights read from ``root``'s paths; returns it and
    the constants it reads. With the ``examples`` of ``inputs``, an input that is a tuple or
    list (flattened into several placeholders by the program) is one placeholder, indexed.
    ``unpack`` turns a dict of the output back into the object it stands for (objects the
    export packed into dicts), as :func:`rebuilt` takes it."""
    graph = torch.fx.Graph()
    names = iter(inputs or []) if examples is None else _flat_inputs(graph, inputs, examples)
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    constants: dict[str, torch.Tensor] = {}
    activation_names = _names(list(gm.graph.nodes))

    def arg(a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: env[n])

    for node in gm.graph.nodes:
        if node.op == "call_module":  # torch.export's own input checks (_guards_fn)
            continue
        if node.op == "placeholder":
            name = next(names, str(node.target))
            used = any(u.op != "call_module" for u in node.users)
            if not used and not isinstance(node.meta.get("val"), torch.Tensor):
                continue  # a Python value export baked in (the guards read it)
            new = graph.placeholder(name) if isinstance(name, str) else name
        elif node.op == "output":
            flat = node.args[0]
            flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
            value = pytree.tree_unflatten([arg(v) for v in flat], out_spec)
            graph.output(rebuilt(value, partial(_object_node, graph), unpack))
            continue
        elif node.op == "get_attr":
            target = _strip_root(str(node.target))
            if not _has_attribute(root, target):
                target = re.sub(r"\W", "_", target)
                constants[target] = attribute_at(gm, str(node.target))
            env[node] = graph.get_attr(target)  # weights and constants: not activations
            continue
        else:
            name = activation_names[node]
            # The packet (``aten.linear``), not one overload (``aten.linear.default``): it
            # picks the overload from the arguments, and TorchScript compiles calls to it.
            target = getattr(node.target, "overloadpacket", node.target)
            new = graph.create_node(node.op, target, arg(node.args), arg(node.kwargs), name)
        _record(new, node.meta.get("val"))
        env[node] = new
    graph.lint()
    return graph, constants


def _flat_inputs(
    graph: torch.fx.Graph, names: list[str] | None, examples: list[Any]
) -> Iterator[str | torch.fx.Node]:
    """For each placeholder of a program whose inputs ``names`` had ``examples``: the name of
    a plain input, or the node indexing the placeholder of a tuple (made here) for one of
    its items, in the order the program flattened them."""
    for name, example in zip(names or [], examples):
        if not isinstance(example, (tuple, list)):
            yield name
            continue
        node = graph.placeholder(name)
        for path, _ in pytree.tree_flatten_with_path(example)[0]:
            item = node
            for key in path:
                item = graph.call_function(operator.getitem, (item, cast(Any, key).idx))
            yield item


def _object_node(
    graph: torch.fx.Graph, cls: type, items: dict[Any, Any] | None, attributes: dict[str, Any]
) -> torch.fx.Node:
    """A node building an object of ``cls`` (a ModelOutput, a dataclass) from nodes."""
    return graph.call_function(rebuild_object, (class_key(cls), items, attributes))


def _strip_root(path: str) -> str:
    return path.removeprefix("root.") if path != "root" else ""


def _module_path(node: torch.fx.Node) -> str:
    """The path of the innermost module that ran ``node`` (``""`` outside any). Where the
    module stack does not say (converted TorchScript), that of the weights it reads."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [_strip_root(str(path)) for path, _ in stack.values()]
    path = next((p for p in reversed(paths) if p), "")
    if not path:
        read = [str(a.target) for a in node.all_input_nodes if a.op == "get_attr"]
        path = next((_strip_root(t).rpartition(".")[0] for t in read if "." in t), "")
    return path


def _names(nodes: list[torch.fx.Node]) -> dict[torch.fx.Node, str]:
    """Activation names: ``layers_0`` for the output of module ``layers.0`` (the last operation
    of a run of operations it ran, as a module call is named in the concrete tracer's graphs),
    ``layers_0_<op>`` for the operations before it; operations outside any module keep
    torch.export's names."""
    calls = [n for n in nodes if n.op in ("call_function", "call_method")]
    paths = [_module_path(n) for n in calls]
    names: dict[torch.fx.Node, str] = {}
    for i, (node, path) in enumerate(zip(calls, paths)):
        if not path:
            names[node] = node.name
            continue
        base = re.sub(r"\W", "_", path)
        last = i + 1 == len(calls) or paths[i + 1] != path
        op = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        names[node] = base if last else f"{base}_{op}"
    return names


def _record(node: torch.fx.Node, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        sizes = [_example(d) for d in value.shape]
        set_record(
            node,
            NodeRecord(
                # A size known only at run time (after ``nonzero``): the shape is unknown.
                shape=None if None in sizes else torch.Size(sizes),  # type: ignore[arg-type]
                dtype=value.dtype,
                device=value.device,
                is_tensor=True,
            ),
        )


def _example(size: int | torch.SymInt) -> int | None:
    """The size a symbolic dimension had on the example inputs (what tables show), or ``None``
    for a size that depends on data."""
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return int(hint) if hint is not None else None


def _has_attribute(root: nn.Module, path: str) -> bool:
    try:
        attribute_at(root, path)
    except AttributeError:
        return False
    return True
