"""The placeholders of a traced method, one per parameter, and the call torch.fx traces."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import torch.fx

__all__ = ["root_call"]

# Keyword-only parameters, then ``*args``, then ``**kwargs`` come last, as torch.fx orders them.
_ORDER: dict[Any, int] = {
    inspect.Parameter.VAR_POSITIONAL: 2,
    inspect.Parameter.VAR_KEYWORD: 3,
    inspect.Parameter.KEYWORD_ONLY: 1,
}
_STARS: dict[Any, str] = {
    inspect.Parameter.VAR_POSITIONAL: "*",
    inspect.Parameter.VAR_KEYWORD: "**",
}


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """Argument annotations as types: written as strings (``from __future__ import
    annotations``) they would reach generated code as names it cannot resolve."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # an annotation naming something not importable here: keep none
        return {}


def root_call(
    tracer: torch.fx.Tracer, root_fn: Callable[..., Any], is_module: bool
) -> tuple[Callable[..., Any], list[Any]]:
    """One placeholder per parameter of ``root_fn`` (in torch.fx's order), and a function
    calling ``root_fn`` with them as a user would.

    torch.fx rewrites the code of a method taking ``*args``/``**kwargs`` to take them
    positionally, which scrambles the locals of a decorated method's ``(*args, **kwargs)``
    wrapper (``functools.wraps``, as transformers does), and flattens container inputs into a
    pytree signature. Every input has a concrete value here, so neither is needed.
    """
    inner = inspect.unwrap(root_fn)
    params = list(inspect.signature(inner).parameters.values())[1 if is_module else 0 :]
    params.sort(key=lambda p: _ORDER.get(p.kind, 0))
    annotations = _annotations(inner)
    values = []
    for p in params:
        star = _STARS.get(p.kind, "")
        default = () if p.default is p.empty or star else (p.default,)
        values.append(
            tracer.create_proxy(
                "placeholder", star + p.name, default, {}, type_expr=annotations.get(p.name)
            )
        )

    # Wrappers often read their arguments by name: pass them so, unless ``*args`` is used.
    by_name = inner is not root_fn

    def call(*args: Any) -> Any:
        head, rest = args[: len(args) - len(params)], args[len(args) - len(params) :]
        varargs = any(p.kind is p.VAR_POSITIONAL and v for p, v in zip(params, rest))
        positional: list[Any] = []
        named: dict[str, Any] = {}
        for p, value in zip(params, rest):
            if p.kind is p.VAR_POSITIONAL:
                positional.extend(value)
            elif p.kind is p.VAR_KEYWORD:
                named.update(value)
            elif p.kind is p.POSITIONAL_ONLY or (
                p.kind is p.POSITIONAL_OR_KEYWORD and (varargs or not by_name)
            ):
                positional.append(value)
            else:
                named[p.name] = value
        return root_fn(*head, *positional, **named)

    call.__wrapped__ = root_fn  # type: ignore[attr-defined]
    return call, [*([tracer.root] if is_module else []), *values]
