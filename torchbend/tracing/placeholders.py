"""The placeholders of a traced method, one per input, and the call torch.fx traces."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

import torch.fx

from .binding import extras_of, spread

__all__ = ["parameter_types", "root_call"]


def parameter_types(fn: Callable[..., Any]) -> dict[str, Any]:
    """The annotations of ``fn``'s parameters that are types, by parameter name.

    An annotation is any Python expression: model code writes lists (``sr: [int, float]``),
    tuples, numbers, or strings naming what is not importable here. torch.fx copies a
    placeholder's annotation into the code it generates, which needs a type there, and
    exports read them as the types of their arguments: each annotation that is not a type
    (a class, ``None``, or a generic alias of such) is dropped, on its own. Strings
    (``from __future__ import annotations``) are resolved in ``fn``'s module first.
    """
    inner = inspect.unwrap(fn)
    try:
        raw = dict(getattr(inner, "__annotations__", None) or {})
    except Exception:  # a lazily evaluated annotation that raises
        return {}
    found: dict[str, Any] = {}
    namespace = getattr(inner, "__globals__", {})
    for name, annotation in raw.items():
        if name == "return":
            continue
        holder = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            resolved = typing.get_type_hints(holder, globalns=namespace)[name]
        except Exception:  # a string naming something not importable here
            continue
        if _is_type(resolved):
            found[name] = resolved
    return found


def _is_type(annotation: Any) -> bool:
    """Whether ``annotation`` is a type generated code can name: a class, ``None``, ``Any``,
    or a generic alias whose arguments are such (or ``...``)."""
    if annotation is None or annotation is typing.Any or isinstance(annotation, type):
        return True
    if typing.get_origin(annotation) is None:
        return False
    return all(a is Ellipsis or _is_type(a) for a in typing.get_args(annotation))


def root_call(
    tracer: torch.fx.Tracer, root_fn: Callable[..., Any], is_module: bool, names: list[str]
) -> tuple[Callable[..., Any], list[Any]]:
    """One placeholder per input of ``root_fn`` (its parameters, and the items of ``*args``
    and ``**kwargs`` among ``names``, named as :mod:`~torchbend.tracing.binding` says), and a
    function calling ``root_fn`` with them as a user would.

    torch.fx rewrites the code of a method taking ``*args``/``**kwargs`` to take them
    positionally, which scrambles the locals of a decorated method's ``(*args, **kwargs)``
    wrapper (``functools.wraps``, as transformers does), and flattens container inputs into a
    pytree signature. Every input has a concrete value here, so neither is needed.
    """
    inner = inspect.unwrap(root_fn)
    params = list(inspect.signature(inner).parameters.values())[1 if is_module else 0 :]
    positional, named = extras_of(params, names)
    types_of = parameter_types(inner)
    inputs: list[tuple[str, tuple[Any, ...], Any]] = []  # name, default, type
    for p in params:
        # The items of ``*args`` and ``**kwargs`` take no annotation (``*args: Any`` is common):
        # exports type them by the kinds of values they were traced with.
        if p.kind is p.VAR_POSITIONAL:
            inputs.extend((n, (), None) for n in positional)
        elif p.kind is p.VAR_KEYWORD:
            inputs.extend((n, (), None) for n in named)
        else:
            default = () if p.default is p.empty else (p.default,)
            inputs.append((p.name, default, types_of.get(p.name)))
    # Generated code takes defaults only after the last input that has none.
    last = max((i for i, (_, default, _) in enumerate(inputs) if not default), default=-1)
    values = [
        tracer.create_proxy("placeholder", n, default if i > last else (), {}, type_expr=tp)
        for i, (n, default, tp) in enumerate(inputs)
    ]
    order = [n for n, _, _ in inputs]

    # Wrappers often read their arguments by name: pass them so, unless ``*args`` is used.
    by_name = inner is not root_fn

    def call(*args: Any) -> Any:
        head, rest = args[: len(args) - len(order)], args[len(args) - len(order) :]
        positional_args, keyword_args = spread(params, dict(zip(order, rest)), by_name)
        return root_fn(*head, *positional_args, **keyword_args)

    call.__wrapped__ = root_fn  # type: ignore[attr-defined]
    return call, [*([tracer.root] if is_module else []), *values]
