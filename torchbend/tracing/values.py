"""Nested values while tracing: mapping over containers, finding proxies and tensors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

__all__ = ["has_proxy", "holds_tensor", "is_proxied_input", "leaves", "map_values"]


def map_values(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to the leaves of nested built-in containers."""
    if isinstance(value, tuple):
        mapped = tuple(map_values(v, fn) for v in value)
        return type(value)(*mapped) if hasattr(value, "_fields") else mapped
    if isinstance(value, list):
        return [map_values(v, fn) for v in value]
    if type(value) is dict:
        return {k: map_values(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(
            map_values(value.start, fn), map_values(value.stop, fn), map_values(value.step, fn)
        )
    return fn(value)


def leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from leaves(v)
    elif type(value) is dict:
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, slice):
        yield from leaves((value.start, value.stop, value.step))
    else:
        yield value


def holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list, dict)) and any(
        isinstance(v, torch.Tensor) for v in leaves(value)
    )


def has_proxy(value: Any) -> bool:
    return any(isinstance(v, torch.fx.Proxy) for v in leaves(value))


def is_proxied_input(value: Any) -> bool:
    """Inputs that become proxies; the others (None, bools, strings...) stay concrete."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (torch.Tensor, int, float)):
        return True
    if hasattr(value, "batch_size") and hasattr(value, "items"):  # TensorDict
        return True
    return any(isinstance(v, torch.Tensor) for v in leaves(value))
