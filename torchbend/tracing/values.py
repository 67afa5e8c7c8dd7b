"""Nested values while tracing: one walker over containers, finding proxies and tensors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx
from torch.fx.immutable_collections import immutable_dict

from .tensordict import is_tensordict

__all__ = ["clone_inputs", "has_proxy", "holds_tensor", "is_proxied_input", "leaves", "map_values"]


def map_values(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to the leaves of nested tuples (named ones keep their type), lists, plain
    dicts and slices, rebuilding the containers around the results.

    Unlike ``torch.fx.node.map_aggregate``, lists and dicts come back as plain ones (user code
    may append to them) and dict subclasses are leaves (their class may not take a rebuild:
    the tracer rebuilds them in graphs itself). torch.fx's immutable dicts, as node arguments
    hold them, are walked like plain dicts.
    """
    if isinstance(value, tuple):
        mapped = tuple(map_values(v, fn) for v in value)
        return type(value)(*mapped) if hasattr(value, "_fields") else mapped
    if isinstance(value, list):
        return [map_values(v, fn) for v in value]
    if type(value) is dict or type(value) is immutable_dict:
        return {k: map_values(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(
            map_values(value.start, fn), map_values(value.stop, fn), map_values(value.step, fn)
        )
    return fn(value)


def leaves(value: Any) -> Iterator[Any]:
    """The leaves :func:`map_values` would apply a function to, in order."""
    found: list[Any] = []
    map_values(value, found.append)
    return iter(found)


def holds_tensor(value: Any) -> bool:
    """Whether ``value`` is a tensor or a container holding one."""
    return any(isinstance(v, torch.Tensor) for v in leaves(value))


def has_proxy(value: Any) -> bool:
    """Whether ``value`` is a proxy or a container holding one."""
    return any(isinstance(v, torch.fx.Proxy) for v in leaves(value))


def is_proxied_input(value: Any) -> bool:
    """Inputs that become proxies; the others (None, bools, strings...) stay concrete."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (torch.Tensor, int, float)) or is_tensordict(value):
        return True
    return holds_tensor(value)


def clone_inputs(value: Any) -> Any:
    """``value`` with its tensors (and TensorDicts) cloned, through lists, tuples and dicts:
    inputs a run may change in place, given to it as copies."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(clone_inputs(v) for v in value)
    if type(value) is dict:
        return {k: clone_inputs(v) for k, v in value.items()}
    if is_tensordict(value):
        return value.clone()
    return value
