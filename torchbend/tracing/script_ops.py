"""How each TorchScript node runs on concrete values, for
:mod:`torchbend.tracing.specialize`: ATen ops through ``torch.ops``, TorchScript's own
(``prim::``) nodes and list operations in Python, and which ops read metadata only."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from ..errors import TracingError
from .compat import node_op

__all__ = [
    "LAYOUT",
    "META",
    "MUTATING",
    "STRUCTURAL",
    "Refused",
    "all_nodes",
    "evaluate",
    "holds_tensor",
    "where",
]

# Ops reading a tensor's metadata, not its data: their result holds while the facts of the
# tensor's metadata hold.
META = frozenset(
    {
        "aten::size", "aten::dim", "aten::len", "aten::numel", "aten::is_floating_point",
        "aten::is_complex", "aten::stride", "aten::is_contiguous", "aten::sym_size",
        "prim::dtype", "prim::device", "prim::layout", "prim::is_cuda", "prim::is_nested",
        "prim::is_sparse", "prim::is_mkldnn", "prim::is_quantized", "prim::is_meta",
        "prim::requires_grad", "aten::get_device",
    }
)  # fmt: skip
LAYOUT = frozenset({"aten::stride", "aten::is_contiguous"})
_DTYPES = (
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128,
    torch.bool, torch.qint8, torch.quint8, torch.qint32, torch.bfloat16,
)  # fmt: skip
_DTYPE_CODES = {dtype: code for code, dtype in enumerate(_DTYPES)}  # TorchScript's ScalarType
_TENSOR_PROPERTIES: dict[str, Callable[[torch.Tensor], Any]] = {
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


class Refused(Exception):
    """A node :func:`specialize` cannot run: the graph is left to the converter as it was."""


def all_nodes(block: Any) -> Any:
    for node in list(block.nodes()):
        for inner in node.blocks():
            yield from all_nodes(inner)
        yield node


def where(node: torch.Node) -> str:
    """``file:line`` of a node's source, as TorchScript recorded it, or its kind."""
    text = str(node).split("\n", 1)[0].split("#", 1)  # its first line: not its blocks
    return text[1].strip() if len(text) == 2 else node.kind()


def holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_tensor(v) for v in value)
    return False


# Nodes that move values without reading them (a tuple of tensors unpacked).
STRUCTURAL = frozenset(
    {
        "prim::TupleConstruct", "prim::TupleUnpack", "prim::ListConstruct", "prim::ListUnpack",
        "prim::TupleIndex", "prim::unchecked_cast", "prim::GetAttr", "aten::__getitem__",
        "prim::DictConstruct", "aten::append", "aten::pop", "aten::__is__", "aten::__isnot__",
        "prim::isinstance",
    }
)  # fmt: skip
MUTATING = frozenset({"aten::append", "aten::insert", "aten::extend", "aten::_set_item"})
# The taint of what they add reaches the list itself (later reads of it depend on it).


def evaluate(run: Any, node: torch.Node, args: list[Any]) -> list[Any]:
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
        raise Refused(f"{kind} at {where(node)}")
    found = node_op(node)
    if found is None:
        raise Refused(f"{kind} at {where(node)}")
    op, names = found
    positional, keywords = [], {}
    for keyword, value in zip(names, args):
        if keyword is None:
            positional.append(value)
        else:
            keywords[keyword] = value
    try:
        result = op(*positional, **keywords)
    except Exception as e:
        plain = _PLAIN.get(kind)
        if plain is None or holds_tensor(args):
            raise Refused(f"{kind} at {where(node)}: {e}") from e
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
    "aten::floordiv": operator.floordiv,
}


def _constant(run: Any, node: torch.Node, args: list[Any]) -> Any:
    return node.output().toIValue() if node.outputsSize() else None


def _get_attribute(run: Any, node: torch.Node, args: list[Any]) -> Any:
    owner, name = args[0], node.s("name")
    key = (id(owner), name)
    if key in run.set_attributes:
        return run.set_attributes[key]
    value = getattr(owner, name)
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        return value.detach().clone()  # buffers the method updates in place stay as they are
    return value


def _set_attribute(run: Any, node: torch.Node, args: list[Any]) -> None:
    run.set_attributes[(id(args[0]), node.s("name"))] = args[1]


def _append(run: Any, node: torch.Node, args: list[Any]) -> Any:
    args[0].append(args[1])
    return args[0]


def _pop(run: Any, node: torch.Node, args: list[Any]) -> Any:
    return args[0].pop(*args[1:])


def _format(run: Any, node: torch.Node, args: list[Any]) -> Any:
    return str(args[0]).replace("{}", "%s") % tuple(args[1:]) if "{}" in args[0] else args[0]


_SPECIAL: dict[str, Callable[[Any, torch.Node, list[Any]], Any]] = {
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
}  # fmt: skip
