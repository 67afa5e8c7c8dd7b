"""The arguments of exported methods: their TorchScript types and defaults, and the values
their graphs were traced for.

An exported method keeps the signature of the method it was traced from: each argument with
its type (its annotation, else the kind of value it was traced with) and its default, so that
the exported module is called as the Python one is. Its graph holds only for the arguments'
values whose decisions it baked in: an argument traced as ``None`` (``if mask is not None``),
or one whose value a decision read (``if mode == "b"``). The exported method checks those
before running the graph, and refuses other values with a message naming the argument, rather
than silently run a graph traced for something else.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ExportError
from ..tracing.facts import kind_of
from ..tracing.placeholders import parameter_types

if TYPE_CHECKING:
    from ..engine.dispatch import Entry
    from ..engine.readonly import BendedView

__all__ = [
    "MISSING",
    "ExportedArgument",
    "default_source",
    "is_optional",
    "method_arguments",
    "type_source",
    "value_source",
]

MISSING: Any = inspect.Parameter.empty
"""The default of an argument that has none."""

_NONE = type(None)
_SCALARS: dict[Any, str] = {torch.Tensor: "Tensor", int: "int", float: "float", bool: "bool"}
_SCALARS[str] = "str"
_HINT = (
    "TorchScript takes Tensor, int, float, bool and str, and Optional, Tuple, List and "
    "Dict[str, ...] of those"
)


@dataclass(frozen=True)
class ExportedArgument:
    """One argument of an exported method."""

    name: str
    type: Any
    """What callers may pass, as a ``typing`` type TorchScript knows."""
    graph_type: Any
    """What the graph takes: ``type`` without ``Optional`` when it was traced with a value."""
    default: Any = MISSING
    in_graph: bool = True
    """Whether the graph reads it (it has a placeholder)."""
    traced_none: bool | None = None
    """``True``: the graph was traced with ``None`` only; ``False``: with a value only, where
    ``type`` allows ``None``; ``None``: no check."""
    values: tuple[Any, ...] = ()
    """The values the graph's decisions were traced for (``()``: any value)."""


def method_arguments(view: BendedView, method: str, entry: Entry) -> list[ExportedArgument]:
    """The arguments of the exported ``method``, in order, or :class:`ExportError` naming
    the argument that TorchScript cannot take."""
    where = f"{view.owner}.{method}"
    placeholders = {str(n.target): n for n in entry.graph.nodes if n.op == "placeholder"}
    defaults = view.signature(method).defaults
    hints = _hints(getattr(view.module, method, None))
    arguments = []
    for i, name in enumerate(entry.names):
        node = placeholders.get(name)
        kinds = {key[0][i] for key in entry.keys}
        default = defaults.get(name, MISSING)
        annotation = node.type if node is not None else None
        if annotation is None:
            annotation = hints.get(name)
        at = f"argument {name!r} of {where}"
        if annotation is None:
            tp = _from_kinds(kinds, default, at)
        else:
            tp = _normalize(annotation, at)
        optional = is_optional(tp)
        if (_NONE in kinds or default is None) and not optional:
            tp, optional = tp | None, True
        traced_none: bool | None = None
        graph_type = tp
        if optional and kinds and _NONE not in kinds:
            traced_none, graph_type = False, _inner(tp)
        elif optional and kinds == {_NONE}:
            traced_none = True
        values = _traced_values(entry, name)
        arguments.append(
            ExportedArgument(name, tp, graph_type, default, node is not None, traced_none, values)
        )
    return arguments


def _hints(fn: Any) -> dict[str, Any]:
    """The annotations of ``fn`` that are types (``{}`` for no function)."""
    return {} if fn is None else parameter_types(fn)


def _normalize(tp: Any, at: str) -> Any:
    """``tp`` as the ``typing`` type TorchScript reads (``tuple[int]`` as ``Tuple[int]``,
    ``X | None`` as ``Optional[X]``), or :class:`ExportError` if it has none."""
    if tp in _SCALARS:
        return tp
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not _NONE]
        if len(rest) == 1 and len(args) == 2:
            return _normalize(rest[0], at) | None
    elif origin is tuple and args and args[-1] is not Ellipsis:
        return tuple[tuple(_normalize(a, at) for a in args)]  # type: ignore[misc]
    elif origin is list and len(args) == 1:
        return list[_normalize(args[0], at)]  # type: ignore[misc]
    elif origin is dict and len(args) == 2 and args[0] in (str, int):
        return dict[args[0], _normalize(args[1], at)]  # type: ignore[misc,valid-type]
    name = getattr(tp, "__name__", None) or str(tp)
    raise ExportError(
        f"cannot export {at}: its type {name} has no TorchScript equivalent ({_HINT}); "
        "annotate it with one of those, or trace a method that takes only those"
    )


def _from_kinds(kinds: set[Any], default: Any, at: str) -> Any:
    """The type of an argument without annotation, from the kinds of value it was traced with
    (``torchbend.tracing.facts.kind_of``), else from its default."""
    if not kinds and default is not MISSING:
        kinds = {kind_of(default)}
    plain = {k for k in kinds if k is not _NONE}
    if not plain:  # traced as None only: TorchScript's reading of an unannotated ``= None``
        return torch.Tensor | None if kinds else torch.Tensor
    if plain == {int, float}:
        plain = {float}
    if len(plain) > 1:
        raise ExportError(
            f"cannot export {at}: it was traced with values of several types; annotate it ({_HINT})"
        )
    tp = _type_of_kind(plain.pop(), at)
    return tp | None if _NONE in kinds else tp


def _type_of_kind(kind: Any, at: str) -> Any:
    if kind in _SCALARS:
        return kind
    if isinstance(kind, tuple) and len(kind) == 2 and isinstance(kind[1], tuple):
        container, items = kind
        if issubclass(container, tuple) and not hasattr(container, "_fields") and items:
            return tuple[tuple(_type_of_kind(k, at) for k in items)]  # type: ignore[misc]
        if container is list and items and len(set(items)) == 1:
            return list[_type_of_kind(items[0], at)]  # type: ignore[misc]
        if container is dict and items and len({k for _, k in items}) == 1:
            if all(isinstance(key, str) for key, _ in items):
                return dict[str, _type_of_kind(items[0][1], at)]  # type: ignore[misc]
    name = getattr(kind, "__name__", None) or getattr(kind[0], "__name__", str(kind))
    raise ExportError(
        f"cannot export {at}: it was traced with a {name}, which TorchScript cannot take "
        f"without an annotation ({_HINT}); annotate it"
    )


def is_optional(tp: Any) -> bool:
    """Whether ``tp`` is ``Optional[...]``."""
    origin = typing.get_origin(tp)
    return origin in (typing.Union, types.UnionType) and _NONE in typing.get_args(tp)


def _inner(tp: Any) -> Any:
    return next(a for a in typing.get_args(tp) if a is not _NONE)


def _traced_values(entry: Entry, name: str) -> tuple[Any, ...]:
    """The values of ``name`` the graph's decisions were traced for, where they are plain
    (numbers, strings, tuples and lists of them); ``()`` if none were read or cannot be
    written."""
    values: list[Any] = []
    for j, fact in enumerate(entry.facts):
        if fact[0] != name or fact[1] not in ("value", "sig"):
            continue
        for key in entry.keys:
            try:
                value = _literal(key[3 + j])
            except ValueError:
                return ()
            if value is not None and value not in values:
                values.append(value)
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        return ()  # NaN equals nothing: the check would refuse the very value traced
    return tuple(values)


def _literal(signature: Any) -> Any:
    """The value of which ``signature`` is the summary (``tracing.facts.signature_of``), if
    it is plain; :class:`ValueError` otherwise."""
    if signature is None or isinstance(signature, (bool, int, float, str)):
        return signature
    if isinstance(signature, tuple) and len(signature) == 2 and signature[0] in ("tuple", "list"):
        items = [_literal(v) for v in signature[1]]
        return tuple(items) if signature[0] == "tuple" else items
    raise ValueError(signature)


# -- TorchScript source ----------------------------------------------------------------------


def type_source(tp: Any) -> str:
    """``tp`` (as :func:`method_arguments` gives it) in TorchScript source."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return f"Optional[{type_source(_inner(tp))}]"
    name = {tuple: "Tuple", list: "List", dict: "Dict"}[origin]
    return f"{name}[{', '.join(type_source(a) for a in args)}]"


def default_source(value: Any, tp: Any, at: str) -> str:
    """The default ``value`` of an argument typed ``tp`` in TorchScript source, or
    :class:`ExportError` if TorchScript cannot write it."""
    if is_optional(tp) and value is not None:
        tp = _inner(tp)
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, int) and tp is not float:
        return repr(value)
    if isinstance(value, (int, float)):
        value = float(value)
        if math.isnan(value):
            return "math.nan"
        if math.isinf(value):
            return "math.inf" if value > 0 else "-math.inf"
        return repr(value)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is tuple and len(args) == len(value):
            items = [default_source(v, a, at) for v, a in zip(value, args)]
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        if origin is list and isinstance(value, list):
            return f"[{', '.join(default_source(v, args[0], at) for v in value)}]"
    raise ExportError(
        f"cannot export {at}: its default {value!r} does not fit its type "
        f"{type_source(tp)} or cannot be written in TorchScript (None, bool, int, float, str, "
        "and tuples and lists of them can); give it no default or one of those"
    )


def value_source(value: Any, tp: Any) -> str:
    """A traced value of an argument in TorchScript source, for the checks."""
    return default_source(value, tp, "")
