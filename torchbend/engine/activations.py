"""Activations in and out: run a traced method up to some activations, or from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from ..errors import SelectionError, TracingError, did_you_mean
from ..tracing import DecisionChanged, TracedGraph
from ..tracing.facts import describe_fact, kind_of
from ..tracing.surgery import cut_from, keep_until
from .dispatch import Entry, Method
from .methods import MethodTable
from .rewriting import build_graph_module
from .selection import select
from .selfcheck import RandomState

__all__ = ["from_activations", "get_activations"]


def get_activations(
    table: MethodTable,
    patterns: Sequence[str],
    fn: str,
    inputs: dict[str, Any],
    bended: bool = True,
    save_as: str | None = None,
) -> dict[str, Any]:
    """Activations of ``fn`` matched by ``patterns`` on ``inputs``, by node name (see
    :meth:`BendedModule.get_activations`)."""
    method = table.method(fn)
    inputs = method.signature.bind((), inputs)  # defaults of the method filled in
    entry = table.entry_for(method, inputs)
    state = RandomState(table.hooks.generators())  # a retry draws what the first run drew
    for retry in (False, True):
        names = _names(method, entry, patterns)
        try:
            result: dict[str, Any] = _run(
                table, method, entry, keep_until(entry.graph, names), inputs, bended, save_as
            )
            break
        except DecisionChanged as e:
            if retry:
                raise table.unstable(method, entry, e) from None
            state.restore()
            # A decision on the values of these inputs (not on their kinds or shapes)
            # differs from the graph's: trace the graph these inputs take, and run that one.
            # Unbent, they may take other decisions than bent (a bent weight flips a test):
            # then the graph is the module's own, traced without bendings.
            entry = (
                table.trace_decisions(method, inputs)
                if bended or save_as is not None
                else table.tracer.trace_unbent(method, inputs)
            )
    return result


def from_activations(
    table: MethodTable,
    names: Sequence[str],
    fn: str,
    values: dict[str, Any],
    bended: bool = True,
    save_as: str | None = None,
) -> Any:
    """Run ``fn`` from activations ``names`` given in ``values`` (see
    :meth:`BendedModule.from_activations`)."""
    method = table.method(fn)
    if not names:
        raise SelectionError("from_activations() needs the names of the activations to inject")
    if method.current is None:
        raise TracingError(f"trace {fn!r} first: bended.trace({fn!r}, <example inputs>)")
    names = tuple(_names(method, table.current(fn), [f"{n}$" for n in names], exact=names))
    # A graph that read sizes of the inputs (facts) may have baked them in after the
    # activations too: run one traced with activations of the given shapes, else any graph;
    # newest first, and the next one if a decision on their values differs.
    tried: list[str] = []
    state = RandomState(table.hooks.generators())  # each graph tried draws what the first drew
    for entry in [method.current, *(e for e in method.entries if e is not method.current)]:
        if any(n not in entry.shapes for n in names):  # a graph of other decisions
            continue
        read = {what for _, what, _ in entry.facts}
        seen = {n: entry.shapes[n] for n in names}
        if not all(_fits(values.get(n), seen[n], read) for n in names):
            tried.append(", ".join(f"{n}: {' or '.join(map(str, sorted(seen[n])))}" for n in names))
            continue
        graph = cut_from(entry.graph, names)
        needed = [str(n.target) for n in graph.nodes if n.op == "placeholder"]
        missing = [n for n in needed if n not in values]
        unknown = [v for v in values if v not in needed]
        if missing or unknown:
            raise TracingError(
                f"from_activations({', '.join(map(repr, names))}) of {fn} takes {needed}; "
                f"missing {missing}, unknown {unknown}"
            )
        # The inputs still read past the activations take the graph's decisions too (a
        # length baked in after them): only a graph traced for inputs like these runs them.
        mismatch = _inputs_mismatch(entry, {n: values[n] for n in needed if n not in names})
        if mismatch is not None:
            tried.append(mismatch)
            continue
        try:
            state.restore()
            return _run(table, method, entry, graph, values, bended, save_as)
        except DecisionChanged:
            tried.append("a graph that took other decisions on these values")
    given = ", ".join(f"{n}: {_shape(v)}" for n, v in values.items() if _shape(v) is not None)
    raise TracingError(
        f"from_activations of {table.owner}.{fn}: no traced graph of {fn} was traced with "
        f"activations and inputs like these ({given}); traced with: {'; '.join(tried)}. "
        f"Trace {fn} on inputs that give such activations first (bended.trace({fn!r}, ...)), "
        "so that what follows them is traced for their shape and values."
    )


def _inputs_mismatch(entry: Entry, inputs: dict[str, Any]) -> str | None:
    """What of ``inputs`` (some of the method's arguments) differs from every call ``entry``
    was traced or kept for: their kinds and the facts of them its decisions read; ``None``
    if they fit one."""
    positions = {name: i for i, name in enumerate(entry.names)}
    kinds = {name: kind_of(value) for name, value in inputs.items() if name in positions}
    read = [
        (i, fact, reader(inputs))
        for i, (fact, reader) in enumerate(zip(entry.facts, entry.readers))
        if fact[0] in inputs
    ]
    problem = None
    for key in entry.keys:
        if any(key[0][positions[name]] != kind for name, kind in kinds.items()):
            problem = problem or ", ".join(f"{n}: a {type(v).__name__}" for n, v in inputs.items())
            continue
        differs = [(fact, now, key[3 + i]) for i, fact, now in read if key[3 + i] != now]
        if not differs:
            return None
        fact, now, then = differs[0]
        problem = problem or f"{describe_fact(fact)} {then!r} (given {now!r})"
    return problem


def _fits(value: Any, seen: set[tuple[int, ...]], read: set[str]) -> bool:
    """Whether ``value`` may stand for an activation a graph had the ``seen`` shapes for,
    when its decisions read ``read`` of its inputs: a shape it was traced with if sizes were
    read (a loop as long as a size is unrolled), a rank it was traced with if ranks were."""
    shape = _shape(value)
    if shape is None or not seen:
        return True
    if "shape" in read:
        return shape in seen
    return "ndim" not in read or any(len(shape) == len(s) for s in seen)


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _names(
    method: Method, entry: Entry, patterns: Sequence[str], exact: Sequence[str] = ()
) -> list[str]:
    available = [n.name for n in entry.nodes(tensors_only=True)]
    for name in exact:
        if name not in available:
            raise SelectionError(
                f"{method.name} has no activation {name!r}" + did_you_mean(name, available, 3)
            )
    if not patterns:
        raise SelectionError(f"name the activations to get, e.g. {available[-2:]}")
    return select(patterns, [], {method.name: available}, owner=method.name).activations[
        method.name
    ]


def _run(
    table: MethodTable,
    method: Method,
    entry: Entry,
    graph: torch.fx.Graph,
    inputs: dict[str, Any],
    bended: bool,
    save_as: str | None,
) -> Any:
    """Run a graph derived from ``entry`` (kept as method ``save_as`` if given)."""
    placeholders = [str(n.target) for n in graph.nodes if n.op == "placeholder"]
    if save_as is not None or bended:
        _, derived = table.derived(method, entry, graph, inputs, save_as)
        gm = derived.gm
    else:
        traced = TracedGraph(graph, entry.result.constants, entry.result.flow_steps, ())
        gm = build_graph_module(traced, table.module, {}, "Unbent")
    assert gm is not None
    return gm(**{p: inputs[p] for p in placeholders})


def to_tensordict(values: dict[str, Any]) -> Any:
    """``values`` as a TensorDict whose batch size is the activations' common first size."""
    try:
        from tensordict import TensorDict
    except ImportError as e:
        raise ImportError(
            "as_tensordict=True needs tensordict: pip install torchbend[tensordict]"
        ) from e
    sizes = {v.shape[0] for v in values.values() if isinstance(v, torch.Tensor) and v.dim()}
    return TensorDict(values, batch_size=[sizes.pop()] if len(sizes) == 1 else [])
