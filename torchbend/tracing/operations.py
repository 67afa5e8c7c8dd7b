"""What an operation tells about its output: random, data-shaped, a shape, or pure."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "DATA_SHAPED_FUNCTIONS",
    "DATA_SHAPED_METHODS",
    "FACTORIES",
    "PURE_FUNCTIONS",
    "RANDOM_FACTORIES",
    "RANDOM_METHODS",
    "SHAPE_ATTRIBUTES",
    "SHAPE_METHODS",
    "returns_none",
]

RANDOM_FACTORIES: frozenset[Callable[..., Any]] = frozenset(
    {
        torch.rand,
        torch.randn,
        torch.randint,
        torch.randperm,
        torch.normal,
        torch.bernoulli,
        torch.multinomial,
        torch.poisson,
        torch.rand_like,
        torch.randn_like,
        torch.randint_like,
    }
)
# Factories are recorded as graph calls even without traced arguments, so that each call
# builds its tensors anew (and random ones draw new values) as eager code does.
FACTORIES: frozenset[Callable[..., Any]] = RANDOM_FACTORIES | {
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.arange,
    torch.linspace,
    torch.logspace,
    torch.eye,
    torch.tensor,
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
}
RANDOM_METHODS = frozenset(
    {"normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_"}
)
# Operations whose output shape depends on tensor values, not only on input shapes.
DATA_SHAPED_FUNCTIONS: frozenset[Callable[..., Any]] = frozenset(
    {
        torch.nonzero,
        torch.masked_select,
        torch.unique,
        torch.unique_consecutive,
        torch.argwhere,
        torch.repeat_interleave,
    }
)
DATA_SHAPED_METHODS = frozenset(
    {
        "nonzero",
        "masked_select",
        "unique",
        "unique_consecutive",
        "argwhere",
        "repeat_interleave",
        "tolist",
        "item",
    }
)
SHAPE_ATTRIBUTES = {
    "shape": "shape",
    "dtype": "dtype",
    "ndim": "ndim",
    "device": "device",
    "is_cuda": "device",
    "is_cpu": "device",
    "is_meta": "device",
    "layout": "dtype",
    "is_sparse": "dtype",
    "is_quantized": "dtype",
}
SHAPE_METHODS = {
    "size": "shape",
    "dim": "ndim",
    "ndimension": "ndim",
    "numel": "shape",
    "nelement": "shape",
    "is_floating_point": "dtype",
    "is_complex": "dtype",
    "element_size": "dtype",
    "get_device": "device",
}
# Static nodes computing these are pure: when nothing uses them they are dropped from graphs.
PURE_FUNCTIONS: frozenset[Any] = frozenset(
    {
        getattr,
        operator.getitem,
        operator.gt,
        operator.ge,
        operator.lt,
        operator.le,
        operator.eq,
        operator.ne,
        operator.add,
        operator.sub,
        operator.mul,
        operator.truediv,
        operator.floordiv,
        operator.mod,
        operator.neg,
        operator.not_,
        len,
    }
)

# Calls that return ``None`` whatever their inputs: no decision is read from their result.
_NONE_METHODS = frozenset(
    {"append", "extend", "insert", "update", "clear", "__setitem__", "__delitem__"}
)


def returns_none(kind: str, target: Any) -> bool:
    """Whether a call always returns ``None`` (a write into a list, a dict or a tensor)."""
    if kind == "call_function":
        return target in (operator.setitem, operator.delitem)
    return kind == "call_method" and target in _NONE_METHODS
