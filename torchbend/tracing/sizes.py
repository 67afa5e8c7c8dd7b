"""Size arithmetic in a TorchScript graph put in the forms torch's converter takes.

Two passes, each for a construct of RAVE's exported methods:

- :func:`numbers_from_scalar_tensors`: arithmetic of sizes with constant scalar tensors made
  integer arithmetic, so that the converter sees a decision on sizes, not on a tensor.

RAVE's exported ``decode`` trims its output with ``if y.shape[-1] > z.shape[-1] *
self.decode_params[1]: y = y[..., : z.shape[-1] * self.decode_params[1]]``: ``decode_params``
is a tensor (nn~'s contract keeps a method's ratios in a buffer), so TorchScript computes the
bound as a tensor and branches on a tensor, which the converter can only turn into a
``torch.cond`` that refuses the sizes the branch reads. Once the buffer is a constant, the
bound is a number: this pass rewrites such operations (``mul``, ``add``, comparisons...) on
ints and 0-dim integer constant tensors into the same operations on ints, and the
``aten::Bool`` or ``aten::Int`` that read them into the numbers themselves. The decision then
reads sizes only; torch.export guards on it as on any size it traces.

- :func:`size_slices_as_views`: RAVE's ``encode`` and ``decode`` keep the leading sizes of
  their input (``batch_size = x.shape[:-2]``) to reshape by them later. The converter turns the
  slice of a size list into ``aten.slice.t``, which refuses the symbolic sizes it is given at
  export. The sizes ``x.shape[a:-b]`` are those of ``x`` with ``a`` leading and ``b`` trailing
  axes indexed away (``x[0]...[..., 0]``, views that copy nothing), which the converter takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["numbers_from_scalar_tensors", "size_slices_as_views"]

_ARITHMETIC = frozenset({"aten::mul", "aten::add", "aten::sub", "aten::floordiv"})
_COMPARISONS = frozenset({"aten::lt", "aten::gt", "aten::le", "aten::ge", "aten::eq", "aten::ne"})
_READS = {
    "aten::Bool": torch.BoolType,
    "aten::Int": torch.IntType,
    "aten::IntImplicit": torch.IntType,
}


def _nodes(block: Any) -> Iterator[Any]:
    """The nodes of ``block``, a node's inner blocks before the node, in program order."""
    for node in block.nodes():
        for inner in node.blocks():
            yield from _nodes(inner)
        yield node


def _constant_int(value: Any) -> int | None:
    """The integer a 0-dim integer constant tensor holds, else ``None``."""
    node = value.node()
    if node.kind() != "prim::Constant" or not isinstance(value.type(), torch.TensorType):
        return None
    tensor = value.toIValue()
    if not isinstance(tensor, torch.Tensor) or tensor.dim() or tensor.is_floating_point():
        return None
    if tensor.dtype in (torch.bool, torch.complex64, torch.complex128):
        return None
    return int(tensor)


def _is_one(value: Any) -> bool:
    return value.node().kind() == "prim::Constant" and value.toIValue() == 1


def numbers_from_scalar_tensors(graph: Any) -> int:
    """Rewrite, in place, the integer arithmetic and comparisons between ints and 0-dim
    integer constant tensors of ``graph`` into operations on ints, and replace the
    ``aten::Bool`` / ``aten::Int`` / ``aten::IntImplicit`` reading their results by the
    numbers. Returns how many reads were replaced; run dead code elimination after it."""
    numbers: dict[Any, Any] = {}  # a tensor value of the graph -> the int or bool it equals
    replaced = 0
    for node in list(_nodes(graph)):
        kind = node.kind()
        inputs = list(node.inputs())
        if kind in _READS and len(inputs) == 1 and inputs[0] in numbers:
            number = numbers[inputs[0]]
            if isinstance(number.type(), _READS[kind]):
                node.output().replaceAllUsesWith(number)
                replaced += 1
            continue
        if kind in ("aten::add", "aten::sub") and len(inputs) == 3 and _is_one(inputs[2]):
            inputs = inputs[:2]  # ``x + n`` on a tensor is ``add(x, n, alpha=1)``
        if kind not in _ARITHMETIC | _COMPARISONS or node.outputsSize() != 1 or len(inputs) != 2:
            continue
        if not isinstance(node.output().type(), torch.TensorType):
            continue
        operands = []
        with graph.insert_point_guard(node):
            for value in inputs:
                if isinstance(value.type(), torch.IntType):
                    operands.append(value)
                elif value in numbers and isinstance(numbers[value].type(), torch.IntType):
                    operands.append(numbers[value])
                elif (constant := _constant_int(value)) is not None:
                    operands.append(graph.insertConstant(constant))
                else:
                    break
            else:
                numbers[node.output()] = graph.insert(kind, operands)
    return replaced


def _constant(value: Any) -> Any:
    """The value of a constant input of a node (``None`` for ``None``), else ``...``."""
    return value.toIValue() if value.node().kind() == "prim::Constant" else ...


def size_slices_as_views(graph: Any) -> int:
    """Rewrite, in place, each ``x.shape[a:b]`` of ``graph`` (``aten::slice`` of the list
    ``aten::size(x)`` gives) with ``a >= 0`` or absent, ``b < 0`` or absent, and a step of 1, into
    the sizes of ``x`` indexed at 0 on ``a`` leading and ``-b`` trailing axes. Returns how many
    slices were rewritten; run dead code elimination after it."""
    rewritten = 0
    for node in list(_nodes(graph)):
        if node.kind() != "aten::slice" or not isinstance(node.output().type(), torch.ListType):
            continue
        inputs = list(node.inputs())  # aten::slice.t(t[] l, int? start, int? end, int step)
        if len(inputs) != 4:
            continue
        sizes, start, end, step = inputs
        if sizes.node().kind() != "aten::size" or sizes.node().inputsSize() != 1:
            continue
        first, last = _constant(start), _constant(end)
        leading = 0 if first is None else first
        trailing = 0 if last is None else -last if isinstance(last, int) and last < 0 else -1
        if _constant(step) != 1 or not isinstance(leading, int) or leading < 0 or trailing < 0:
            continue
        with graph.insert_point_guard(node):
            view = sizes.node().input()
            for axis in [0] * leading + [-1] * trailing:
                where = [graph.insertConstant(axis), graph.insertConstant(0)]
                view = graph.insert("aten::select", [view, *where])
            node.output().replaceAllUsesWith(graph.insert("aten::size", [view]))
        rewritten += 1
    return rewritten
