"""Facts about a call's inputs that a traced graph depends on, and how to read them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from .tensordict import is_tensordict

__all__ = ["Fact", "describe_fact", "fact_reader", "kind_of", "signature_of"]

Fact = tuple[str, str, int | None]
"""``(input name, what, index)``: ``what`` is ``shape`` (``index`` a dim, or ``None`` for the
whole shape), ``dtype``, ``ndim``, ``device``, ``value`` (a scalar argument) or ``sig``
(the whole structure of a container argument) or ``layout`` (a tensor's strides, which
TorchScript files may read)."""

_MISSING = object()
_PLAIN = frozenset({type(None), bool, int, float, str})


def signature_of(value: Any) -> Any:
    """A hashable summary of ``value``: shapes and dtypes of tensors, scalars by value."""
    if value is None or isinstance(value, (bool, int, float, str)):  # the common case, first
        return value
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), value.dtype)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(signature_of(v) for v in value))
    if is_tensordict(value):  # TensorDicts are Mappings too, whose batch size matters as well
        return ("TD", tuple(value.batch_size), signature_of(dict(value.items())))
    if isinstance(value, Mapping):
        return ("M", tuple((k, signature_of(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def kind_of(value: Any) -> Any:
    """What kind of value an argument is: its type, and the kinds of a container's items (and
    a mapping's keys). Every call is guarded by the kinds of all its arguments: code reads them
    in ways no tracer sees (``mask is None``, ``isinstance(x, torch.Tensor)``, ``"a" in d``)."""
    cls = type(value)
    if cls is torch.Tensor or cls in _PLAIN:  # the common cases, first
        return cls
    if isinstance(value, torch.Tensor):
        return torch.Tensor
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(kind_of(v) for v in value))
    if isinstance(value, Mapping):
        return (type(value), tuple((k, kind_of(v)) for k, v in value.items()))
    return type(value)


def fact_reader(fact: Fact) -> Callable[[Mapping[str, Any]], Any]:
    """Compile ``fact`` into a function reading it from a mapping of input values."""
    name, what, index = fact
    if what == "shape" and index is not None:
        k = index

        def read_dim(inputs: Mapping[str, Any]) -> Any:
            shape = getattr(inputs[name], "shape", ())  # None, where a tensor was traced
            return shape[k] if -len(shape) <= k < len(shape) else _MISSING

        return read_dim
    # A call may pass None where a tensor was traced: its kind differs, and its facts read
    # as missing (the attributes below) rather than fail.
    if what == "shape":
        return lambda inputs: tuple(getattr(inputs[name], "shape", (_MISSING,)))
    if what in ("dtype", "ndim", "device"):
        return lambda inputs: getattr(inputs[name], what, _MISSING)
    if what == "layout":
        return lambda inputs: getattr(inputs[name], "stride", lambda: _MISSING)()
    if what in ("value", "sig"):
        return lambda inputs: signature_of(inputs[name])
    raise AssertionError(f"unknown fact {fact}")


def describe_fact(fact: Fact) -> str:
    """Human-readable form of a fact, for error messages."""
    name, what, index = fact
    if what == "shape":
        return f"{name}.shape" + ("" if index is None else f"[{index}]")
    if what in ("value", "sig"):
        return name
    return f"{name}.{what}"
