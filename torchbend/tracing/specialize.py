"""TorchScript control flow settled on example inputs: the branches and loops a call's sizes
decide, taken as the example takes them, and the facts of the inputs they read.

torch's TorchScript-to-export converter stops at most ``prim::If`` and ``prim::Loop`` nodes
real files hold: a scripted LSTM cell branches on ``hx is None`` and on ``input.dim()``, a
scripted transformer layer on flags and sizes, julius loops over a tensor's dimensions.
:func:`specialize` runs the graph once on the example inputs, node by node, each value
carrying the facts of the inputs it was computed from (a size of an argument, the layout of
one, its device) or the mark that it read tensor data. A branch whose condition read no tensor
data is replaced by the block the example takes; a loop whose turns read no tensor data is
unrolled. Decisions on tensor data stay in the graph as they were (the converter turns what it
can into ``torch.cond``, else refuses). The facts the decisions read are returned: a call that
differs in one of them traces again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import TracingError
from .facts import Fact
from .script_ops import (
    LAYOUT,
    META,
    MUTATING,
    STRUCTURAL,
    Refused,
    all_nodes,
    evaluate,
    holds_tensor,
    where,
)

__all__ = ["Specialized", "specialize"]

DATA = ("", "data", None)
"""The taint of a value computed from tensor data: no fact of the inputs decides it."""

GRAD = ("", "grad", None)
"""The taint of ``torch.is_grad_enabled()``: the backend guards the grad mode."""

MAX_TURNS = 4096
"""The most turns of a loop unrolled; a longer loop is refused."""

Taint = frozenset[Fact]


class Specialized:
    """What :func:`specialize` did: how many decisions it settled, the facts they read, and
    whether one read the grad mode."""

    def __init__(self) -> None:
        self.settled = 0
        self.facts: set[Fact] = set()
        self.grad_mode = False
        self.refused: str | None = None
        """The node that could not run, if one could not (the graph is then half settled)."""
        self.dropped: list[int] = []
        """Positions of the arguments whose example is ``None``: removed from the graph."""
        self.kept: list[str] = []
        """Decisions on tensor data left in the graph (``"a branch on tensor data at f:12"``)."""

    def read(self, taint: Taint) -> None:
        self.settled += 1
        self.grad_mode |= GRAD in taint
        self.facts |= {f for f in taint if f[0]}


def specialize(graph: Any, module: Any, names: Sequence[str], inputs: Sequence[Any]) -> Specialized:
    """Settle, in place, the ``prim::If`` and ``prim::Loop`` nodes of ``graph`` (the inlined
    graph of a method of ``module``, whose arguments are ``names``) that the example
    ``inputs`` decide without reading tensor data. Raises :class:`TracingError` if the
    method raises on them or a loop turns more than :data:`MAX_TURNS` times; leaves the graph
    half settled where a node cannot run here (an op this interpreter does not know): then
    ``refused`` says which, and the caller converts a fresh copy."""
    run = _Run(graph, module)
    params = list(graph.inputs())
    run.set(params[0], module, frozenset())
    for name, param, value in zip(names, params[1:], inputs):
        run.set(param, _copy(value), _input_taint(name, value))
        run.inputs[param.unique()] = name
    cuda = sorted({v.device.index or 0 for v in inputs if _on_cuda(v)})
    try:
        # The caller's generators draw as if this run had not happened; the grad mode the
        # method reads is the caller's (``run.grad``).
        with torch.random.fork_rng(devices=cuda), torch.no_grad():
            run.block(graph.block(), edit=True)
    except Refused as e:
        run.result.refused = str(e)
        return run.result
    run.result.dropped = _narrow_inputs(graph, inputs)
    _drop_dead_mutations(graph)
    return run.result


def _drop_dead_mutations(graph: Any) -> None:
    """Remove the lists nothing reads any more (their reads were folded): every use of such a
    list is a mutation (``append``, ``pop``...) whose own result is unused."""
    changed = True
    while changed:
        changed = False
        for node in list(all_nodes(graph.block())):
            if node.kind() not in MUTATING and node.kind() != "aten::pop":
                continue
            target = next(iter(node.inputs()))
            users = [u.user for u in target.uses()]
            if all(_dead_mutation(u) for u in users):
                for user in users:
                    user.destroy()
                changed = True
                break


def _dead_mutation(node: Any) -> bool:
    mutation = node.kind() in MUTATING or node.kind() == "aten::pop"
    return mutation and not any(o.uses() for o in node.outputs())


def _narrow_inputs(graph: Any, inputs: Sequence[Any]) -> list[int]:
    """Type each optional argument of ``graph`` as its example is (every call is guarded on
    its arguments' kinds), casts to those types made no-ops, and the arguments that are
    ``None`` replaced by a constant and removed; returns the positions of those (from 0,
    after ``self``)."""
    params = list(graph.inputs())[1:]
    dropped = []
    for i, (param, value) in enumerate(zip(params, inputs)):
        kind = param.type()
        if value is None:
            with graph.insert_point_guard(next(graph.nodes())):
                none = graph.insertConstant(None)
            param.replaceAllUsesWith(none)
            dropped.append(i)
        elif isinstance(kind, torch.OptionalType):
            param.setType(kind.getElementType())
    for node in list(all_nodes(graph.block())):
        if node.kind() == "prim::unchecked_cast":
            source = next(iter(node.inputs()))
            if source.type() == node.output().type():
                node.output().replaceAllUsesWith(source)
                node.destroy()
    for i in reversed(dropped):
        graph.eraseInput(i + 1)
    return dropped


def _on_cuda(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cuda"


def _copy(value: Any) -> Any:
    """``value`` with its tensors cloned: the run must not change the caller's inputs."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    return value


def _input_taint(name: str, value: Any) -> Taint:
    """The facts of an argument that its metadata gives: its sizes and device (its kind,
    dtype and rank are guarded for every call)."""
    if isinstance(value, torch.Tensor):
        sizes = {(name, "shape", d) for d in range(value.ndim)}
        return frozenset({*sizes, (name, "device", None)})
    if value is None or isinstance(value, (bool, int, float, str)):
        return frozenset({(name, "value", None)})
    return frozenset({(name, "sig", None)})  # containers: shapes and dtypes of their tensors


class _Run:
    """One run of a TorchScript graph on concrete values, each with its taint."""

    def __init__(self, graph: Any, module: Any) -> None:
        self.graph = graph
        self.values: dict[int, Any] = {}
        self.taints: dict[int, Taint] = {}
        self.inputs: dict[int, str] = {}
        self.set_attributes: dict[tuple[int, str], Any] = {}
        self.result = Specialized()
        self.grad = torch.is_grad_enabled()

    def set(self, value: torch.Value, concrete: Any, taint: Taint) -> None:
        self.values[value.unique()] = concrete
        self.taints[value.unique()] = taint

    def get(self, value: torch.Value) -> Any:
        return self.values[value.unique()]

    def taint(self, value: torch.Value) -> Taint:
        return self.taints[value.unique()]

    def block(self, block: Any, edit: bool) -> None:
        for node in list(block.nodes()):
            self.node(node, edit)

    def node(self, node: torch.Node, edit: bool) -> list[torch.Value]:
        """Run ``node``; when ``edit``, settle it if it is a decision the example takes
        without reading data. Returns the values that stand for its outputs."""
        kind = node.kind()
        if kind == "prim::If":
            return self.branch(node, edit)
        if kind == "prim::Loop":
            return self.loop(node, edit)
        inputs = list(node.inputs())
        if edit and kind not in MUTATING and kind != "aten::pop":
            inputs = self._fold_lists(node, inputs)
        args = [self.get(v) for v in inputs]
        taint = frozenset().union(*(self.taint(v) for v in inputs))
        outputs = evaluate(self, node, args)
        if kind in META and inputs:
            taint = self._meta_taint(node, inputs, taint)
        elif (
            any(holds_tensor(a) for a in args)
            and not all(holds_tensor(o) for o in outputs)
            and kind not in STRUCTURAL
        ):
            taint = taint | {DATA}
        if kind == "aten::is_grad_enabled":
            taint = taint | {GRAD}
        for value, concrete in zip(node.outputs(), outputs):
            self.set(value, concrete, taint)
        if edit and kind == "aten::pop" and DATA not in taint and not holds_tensor(outputs):
            # what ``pop`` takes from a list of sizes, as a constant: the list goes
            with self.graph.insert_point_guard(node):
                constant = self.graph.insertConstant(outputs[0])
            self.set(constant, outputs[0], taint)
            self.result.read(taint)
            node.output().replaceAllUsesWith(constant)
        if kind in MUTATING and inputs:  # the list now holds what was added
            target = inputs[0]
            self.taints[target.unique()] = self.taint(target) | taint
        return list(node.outputs())

    def _fold_lists(self, node: torch.Node, inputs: list[torch.Value]) -> list[torch.Value]:
        """The lists of numbers ``node`` reads that no tensor data decides, as constants of
        their values at this point (the converter takes no list arithmetic: julius builds
        strides and shapes with ``append``); their taints are facts of the graph."""
        for i, value in enumerate(inputs):
            kind = value.type()
            concrete = self.get(value)
            if not isinstance(kind, torch.ListType) or DATA in self.taint(value):
                continue
            if not isinstance(concrete, list) or holds_tensor(concrete):
                continue
            if value.node().kind() in ("prim::Constant", "prim::ListConstruct"):
                continue
            with self.graph.insert_point_guard(node):
                constant = self.graph.insertConstant(list(concrete))
            constant.setType(kind)
            self.set(constant, list(concrete), self.taint(value))
            self.result.read(self.taint(value))
            node.replaceInput(i, constant)
            inputs[i] = constant
        return inputs

    def _meta_taint(self, node: torch.Node, inputs: list[torch.Value], taint: Taint) -> Taint:
        """The taint of a metadata read: one size of an argument where that is all it
        reads, else the metadata of the tensor, with its layout for strides."""
        tensor = inputs[0]
        name = self.inputs.get(tensor.unique())
        kind = node.kind()
        if name is not None:
            if kind == "aten::size" and len(inputs) == 2 and not self.taint(inputs[1]):
                return frozenset({(name, "shape", int(self.get(inputs[1])))})
            if kind in ("aten::dim", "prim::dtype"):
                return frozenset()
            if kind in LAYOUT:
                return taint | {(name, "layout", None)}
            return taint
        if kind in LAYOUT:  # an intermediate's strides follow its inputs' layouts
            return taint | {(n, "layout", None) for n, what, _ in taint if what == "shape"}
        return taint

    def branch(self, node: torch.Node, edit: bool) -> list[torch.Value]:
        condition = next(iter(node.inputs()))
        taken = 0 if self.get(condition) else 1
        block = list(node.blocks())[taken]
        decided = DATA not in self.taint(condition)
        if not (edit and decided):
            if edit and not decided:
                self.result.kept.append(f"a branch on tensor data at {where(node)}")
            self.block(block, edit=False)
            spread = self.taint(condition) | {DATA}
            for out, result in zip(node.outputs(), block.outputs()):
                self.set(out, self.get(result), self.taint(result) | spread)
            return list(node.outputs())
        self.result.read(self.taint(condition))
        env: dict[int, torch.Value] = {}
        for inner in list(block.nodes()):
            self._inline(inner, node, env)
        results = [env.get(v.unique(), v) for v in block.outputs()]
        for out, new in zip(node.outputs(), results):
            out.replaceAllUsesWith(new)
        node.destroy()
        return results

    def _inline(self, inner: torch.Node, anchor: torch.Node, env: dict[int, torch.Value]) -> None:
        """Clone ``inner`` before ``anchor`` (its inputs mapped by ``env``), run and settle
        the clone, and map the outputs of ``inner`` to what stands for the clone's."""
        clone = self.graph.createClone(inner, lambda v: env.get(v.unique(), v))
        clone.insertBefore(anchor)
        for old, new in zip(inner.outputs(), self.node(clone, edit=True)):
            env[old.unique()] = new

    def loop(self, node: torch.Node, edit: bool) -> list[torch.Value]:
        inputs = list(node.inputs())
        body = next(iter(node.blocks()))
        params, results = list(body.inputs()), list(body.outputs())
        turns, go = self.get(inputs[0]), self.get(inputs[1])
        taint = self.taint(inputs[0]) | self.taint(inputs[1])
        carried: list[torch.Value] = inputs[2:]
        if not edit or DATA in taint:
            return self._run_loop(node, edit)
        settled: Taint = taint
        turn = 0
        while go and turn < turns:
            if turn >= MAX_TURNS:
                raise TracingError(
                    f"a loop of the TorchScript method at {where(node)} turns more than "
                    f"{MAX_TURNS} times on these inputs: torchbend unrolls loops; call it "
                    "with smaller inputs"
                )
            with self.graph.insert_point_guard(node):
                index = self.graph.insertConstant(turn)
            self.set(index, turn, frozenset())
            env = {params[0].unique(): index}
            env.update({p.unique(): c for p, c in zip(params[1:], carried)})
            for inner in list(body.nodes()):
                self._inline(inner, node, env)
            mapped = [env.get(v.unique(), v) for v in results]
            go, carried = self.get(mapped[0]), mapped[1:]
            settled = settled | self.taint(mapped[0])
            if DATA in settled:  # a while loop on data: the clones so far stay correct
                raise Refused(f"prim::Loop at {where(node)} stops on tensor data")
            turn += 1
        self.result.read(settled)
        for out, new in zip(node.outputs(), carried):
            out.replaceAllUsesWith(new)
        node.destroy()
        return carried

    def _run_loop(self, node: torch.Node, edit: bool) -> list[torch.Value]:
        """Run a loop kept in the graph (its turns read tensor data, or it is inside a
        decision kept in the graph)."""
        if edit:
            self.result.kept.append(f"a loop counted by tensor data at {where(node)}")
        inputs = list(node.inputs())
        body = next(iter(node.blocks()))
        params, results = list(body.inputs()), list(body.outputs())
        turns, go = self.get(inputs[0]), self.get(inputs[1])
        values = [self.get(v) for v in inputs[2:]]
        spread = frozenset().union(*(self.taint(v) for v in inputs)) | {DATA}
        turn = 0
        while go and turn < turns:
            self.set(params[0], turn, spread)
            for p, v in zip(params[1:], values):
                self.set(p, v, spread)
            self.block(body, edit=False)
            go, values = self.get(results[0]), [self.get(v) for v in results[1:]]
            turn += 1
        for out, v in zip(node.outputs(), values):
            self.set(out, v, spread)
        return list(node.outputs())
