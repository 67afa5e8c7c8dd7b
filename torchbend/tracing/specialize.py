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

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import TracingError
from .facts import Fact

__all__ = ["Specialized", "specialize"]

DATA = ("", "data", None)
"""The taint of a value computed from tensor data: no fact of the inputs decides it."""

GRAD = ("", "grad", None)
"""The taint of ``torch.is_grad_enabled()``: the backend guards the grad mode."""

MAX_TURNS = 4096
"""The most turns of a loop unrolled; a longer loop is refused."""

Taint = frozenset[Fact]

# Ops reading a tensor's metadata, not its data: their result holds while the facts of the
# tensor's metadata hold.
_META = frozenset(
    {
        "aten::size", "aten::dim", "aten::len", "aten::numel", "aten::is_floating_point",
        "aten::is_complex", "aten::stride", "aten::is_contiguous", "aten::sym_size",
        "prim::dtype", "prim::device", "prim::layout", "prim::is_cuda", "prim::is_nested",
        "prim::is_sparse", "prim::is_mkldnn", "prim::is_quantized", "prim::is_meta",
        "prim::requires_grad", "aten::get_device",
    }
)  # fmt: skip
_LAYOUT = frozenset({"aten::stride", "aten::is_contiguous"})
_TENSOR_PROPERTIES = {
    "prim::dtype": lambda t: _DTYPE_CODES[t.dtype],
    "prim::device": lambda t: t.device,
    "prim::layout": lambda t: t.layout,
    "prim::is_cuda": lambda t: t.is_cuda,
    "prim::is_nested": lambda t: t.is_nested,
    "prim::is_sparse": lambda t: t.is_sparse,
    "prim::is_mkldnn": lambda t: t.is_mkldnn,
    "prim::is_quantized": lambda t: t.is_quantized,
    "prim::is_meta": lambda t: t.is_meta,
    "prim::requires_grad": lambda t: t.requires_grad,
}
_DTYPES = (
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128,
    torch.bool, torch.qint8, torch.quint8, torch.qint32, torch.bfloat16,
)  # fmt: skip
_DTYPE_CODES = {dtype: code for code, dtype in enumerate(_DTYPES)}  # TorchScript's ScalarType


class _Refused(Exception):
    """A node :func:`specialize` cannot run: the graph is left to the converter as it was."""


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
        """Decisions on tensor data left in the graph, as ``"prim::If at file:line"``."""

    def read(self, taint: Taint) -> None:
        self.settled += 1
        self.grad_mode |= GRAD in taint
        self.facts |= {f for f in taint if f[0]}


def specialize(
    graph: torch.Graph, module: Any, names: Sequence[str], inputs: Sequence[Any]
) -> Specialized:
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
    try:
        with torch.no_grad():  # the grad mode the method reads is the caller's (run.grad)
            run.block(graph.block(), edit=True)
    except _Refused as e:
        run.result.refused = str(e)
        return run.result
    run.result.dropped = _narrow_inputs(graph, inputs)
    _drop_dead_mutations(graph)
    return run.result


def _drop_dead_mutations(graph: torch.Graph) -> None:
    """Remove the mutations of lists nothing reads any more (their reads were folded)."""
    changed = True
    while changed:
        changed = False
        for node in list(_all_nodes(graph.block())):
            if node.kind() not in _MUTATING and node.kind() != "aten::pop":
                continue
            target = list(node.inputs())[0]
            readers = [u.user for u in target.uses()]
            if any(r.kind() not in _MUTATING and r.kind() != "aten::pop" for r in readers):
                continue
            if any(o.uses() for o in node.outputs()):
                continue
            node.destroy()
            changed = True


def _narrow_inputs(graph: torch.Graph, inputs: Sequence[Any]) -> list[int]:
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
    for node in list(_all_nodes(graph.block())):
        if node.kind() == "prim::unchecked_cast":
            source = list(node.inputs())[0]
            if source.type() == node.output().type():
                node.output().replaceAllUsesWith(source)
                node.destroy()
    for i in reversed(dropped):
        graph.eraseInput(i + 1)
    return dropped


def _all_nodes(block: Any) -> Any:
    for node in list(block.nodes()):
        for inner in node.blocks():
            yield from _all_nodes(inner)
        yield node


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

    def __init__(self, graph: torch.Graph, module: Any) -> None:
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
        if edit and kind not in _MUTATING and kind != "aten::pop":
            inputs = self._fold_lists(node, inputs)
        args = [self.get(v) for v in inputs]
        taint = frozenset().union(*(self.taint(v) for v in inputs))
        outputs = _evaluate(self, node, args)
        if kind in _META and inputs:
            taint = self._meta_taint(node, inputs, taint)
        elif any(_holds_tensor(a) for a in args) and not all(
            _holds_tensor(o) for o in outputs
        ) and kind not in _STRUCTURAL:
            taint = taint | {DATA}
        if kind == "aten::is_grad_enabled":
            taint = taint | {GRAD}
        for value, concrete in zip(node.outputs(), outputs):
            self.set(value, concrete, taint)
        if edit and kind == "aten::pop" and DATA not in taint and not _holds_tensor(outputs):
            # what ``pop`` takes from a list of sizes, as a constant: the list goes
            with self.graph.insert_point_guard(node):
                constant = self.graph.insertConstant(outputs[0])
            self.set(constant, outputs[0], taint)
            self.result.read(taint)
            node.output().replaceAllUsesWith(constant)
        if kind in _MUTATING and inputs:  # the list now holds what was added
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
            if not isinstance(concrete, list) or _holds_tensor(concrete):
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
            if kind in _LAYOUT:
                return taint | {(name, "layout", None)}
            return taint
        if kind in _LAYOUT:  # an intermediate's strides follow its inputs' layouts
            return taint | {(n, "layout", None) for n, what, _ in taint if what == "shape"}
        return taint

    def branch(self, node: torch.Node, edit: bool) -> list[torch.Value]:
        condition = list(node.inputs())[0]
        taken = 0 if self.get(condition) else 1
        block = list(node.blocks())[taken]
        decided = DATA not in self.taint(condition)
        if not (edit and decided):
            if edit and not decided:
                self.result.kept.append(f"prim::If at {_where(node)}")
            self.block(block, edit=False)
            spread = self.taint(condition) | {DATA}
            for out, inner in zip(node.outputs(), block.outputs()):
                self.set(out, self.get(inner), self.taint(inner) | spread)
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
        body = list(node.blocks())[0]
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
                    f"a loop of the TorchScript method at {_where(node)} turns more than "
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
                raise _Refused(f"prim::Loop at {_where(node)} stops on tensor data")
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
            self.result.kept.append(f"prim::Loop at {_where(node)}")
        inputs = list(node.inputs())
        body = list(node.blocks())[0]
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


def _where(node: torch.Node) -> str:
    """``file:line`` of a node's source, as TorchScript recorded it, or its kind."""
    text = str(node).split("#", 1)
    return text[1].strip() if len(text) == 2 else node.kind()


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    return False


# Nodes that move values without reading them (a tuple of tensors unpacked).
_STRUCTURAL = frozenset(
    {
        "prim::TupleConstruct", "prim::TupleUnpack", "prim::ListConstruct", "prim::ListUnpack",
        "prim::TupleIndex", "prim::unchecked_cast", "prim::GetAttr", "aten::__getitem__",
        "prim::DictConstruct", "aten::append", "aten::pop", "aten::__is__", "aten::__isnot__",
        "prim::isinstance",
    }
)  # fmt: skip
_MUTATING = frozenset({"aten::append", "aten::insert", "aten::extend", "aten::_set_item"})
# The taint of what they add reaches the list itself (later reads of it depend on it).


def _evaluate(run: _Run, node: torch.Node, args: list[Any]) -> list[Any]:
    """The concrete outputs of one node (no ``prim::If``/``prim::Loop``) on ``args``."""
    kind = node.kind()
    special = _SPECIAL.get(kind)
    if special is not None:
        return _outputs(node, special(run, node, args))
    if kind in _TENSOR_PROPERTIES:
        return [_TENSOR_PROPERTIES[kind](args[0])]
    if kind == "prim::RaiseException":
        raise TracingError(f"the TorchScript method raised on the example inputs: {args[0]}")
    if not kind.startswith("aten::"):
        raise _Refused(f"{kind} at {_where(node)}")
    schema = torch._C.parse_schema(node.schema()) if node.schema() != "(no schema)" else None
    if schema is None:
        raise _Refused(f"{kind} at {_where(node)}")
    packet = getattr(torch.ops.aten, schema.name.removeprefix("aten::"))
    op = getattr(packet, schema.overload_name or "default")
    positional, keywords = [], {}
    for argument, value in zip(schema.arguments, args):
        if argument.kwarg_only:
            keywords[argument.name] = value
        else:
            positional.append(value)
    try:
        result = op(*positional, **keywords)
    except Exception as e:
        plain = _PLAIN.get(schema.name)
        if plain is None or _holds_tensor(args):
            raise _Refused(f"{kind} at {_where(node)}: {e}") from e
        result = plain(*args)
    return _outputs(node, result)


def _outputs(node: torch.Node, result: Any) -> list[Any]:
    """The result of an op as the list of its node's outputs."""
    count = node.outputsSize()
    return [] if count == 0 else [result] if count == 1 else list(result)


# Python's own operations on lists and numbers, where torch's op takes no Python list.
_PLAIN: dict[str, Callable[..., Any]] = {
    "aten::add": operator.add,
    "aten::mul": operator.mul,
    "aten::eq": operator.eq,
    "aten::ne": operator.ne,
    "aten::lt": operator.lt,
    "aten::gt": operator.gt,
    "aten::le": operator.le,
    "aten::ge": operator.ge,
    "aten::slice": lambda items, start=None, end=None, step=1: items[start:end:step],
    "aten::reverse": lambda items: items.reverse(),
    "aten::copy": lambda items: list(items),
    "aten::count": lambda items, x: items.count(x),
    "aten::index": lambda items, x: items.index(x),
    "aten::sum": sum,
}


def _constant(run: _Run, node: torch.Node, args: list[Any]) -> Any:
    return node.output().toIValue() if node.outputsSize() else None


def _get_attribute(run: _Run, node: torch.Node, args: list[Any]) -> Any:
    owner, name = args[0], node.s("name")
    key = (id(owner), name)
    if key in run.set_attributes:
        return run.set_attributes[key]
    value = getattr(owner, name)
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        return value.detach().clone()  # buffers the method updates in place stay as they are
    return value


def _set_attribute(run: _Run, node: torch.Node, args: list[Any]) -> None:
    run.set_attributes[(id(args[0]), node.s("name"))] = args[1]


def _append(run: _Run, node: torch.Node, args: list[Any]) -> Any:
    args[0].append(args[1])
    return args[0]


def _pop(run: _Run, node: torch.Node, args: list[Any]) -> Any:
    return args[0].pop(*args[1:])


def _format(run: _Run, node: torch.Node, args: list[Any]) -> Any:
    return str(args[0]).replace("{}", "%s") % tuple(args[1:]) if "{}" in args[0] else args[0]


_SPECIAL: dict[str, Callable[[_Run, torch.Node, list[Any]], Any]] = {
    "prim::Constant": _constant,
    "prim::GetAttr": _get_attribute,
    "prim::SetAttr": _set_attribute,
    "prim::ListConstruct": lambda r, n, a: list(a),
    "prim::TupleConstruct": lambda r, n, a: tuple(a),
    "prim::DictConstruct": lambda r, n, a: dict(zip(a[::2], a[1::2])),
    "prim::ListUnpack": lambda r, n, a: list(a[0]),
    "prim::TupleUnpack": lambda r, n, a: list(a[0]),
    "prim::TupleIndex": lambda r, n, a: a[0][a[1]],
    "prim::unchecked_cast": lambda r, n, a: a[0],
    "prim::Uninitialized": lambda r, n, a: None,
    "prim::NumToTensor": lambda r, n, a: torch.tensor(a[0]),
    "prim::min": lambda r, n, a: min(a) if len(a) > 1 else min(a[0]),
    "prim::max": lambda r, n, a: max(a) if len(a) > 1 else max(a[0]),
    "prim::abs": lambda r, n, a: abs(a[0]),
    "prim::type": lambda r, n, a: a[0].type,
    "aten::list": lambda r, n, a: list(a[0]),
    "aten::__is__": lambda r, n, a: a[0] is a[1],
    "aten::__isnot__": lambda r, n, a: a[0] is not a[1],
    "aten::__not__": lambda r, n, a: not a[0],
    "aten::__contains__": lambda r, n, a: a[1] in a[0],
    "aten::__getitem__": lambda r, n, a: a[0][a[1]],
    "aten::len": lambda r, n, a: len(a[0]),
    "aten::append": _append,
    "aten::pop": _pop,
    "aten::insert": lambda r, n, a: a[0].insert(a[1], a[2]),
    "aten::extend": lambda r, n, a: a[0].extend(a[1]),
    "aten::clear": lambda r, n, a: a[0].clear(),
    "aten::_set_item": lambda r, n, a: a[0].__setitem__(a[1], a[2]),
    "aten::format": _format,
    "aten::warn": lambda r, n, a: None,
    "prim::Print": lambda r, n, a: None,
    "aten::is_grad_enabled": lambda r, n, a: r.grad,
    "aten::ceil": lambda r, n, a: math.ceil(a[0]) if not isinstance(a[0], torch.Tensor) else torch.ceil(a[0]),
    "aten::floor": lambda r, n, a: math.floor(a[0]) if not isinstance(a[0], torch.Tensor) else torch.floor(a[0]),
    "aten::floordiv": lambda r, n, a: operator.floordiv(*a),
}  # fmt: skip
