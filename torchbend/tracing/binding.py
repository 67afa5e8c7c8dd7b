"""Inputs by name for signatures with ``*args`` and ``**kwargs``: the names their items take,
and the call that gives them back to the function as a user's code would.

A method's inputs travel through torchbend as one flat mapping of name to value, one name a
placeholder of its graph. A parameter takes its own name; the positional extras of ``*args``
take the name of that parameter and their position (``args_0``, ``args_1``...), and what
``**kwargs`` takes keeps the name it was given (``input_ids``). A graph traced for two
positional extras has two placeholders for them, so that a call with another number of them
is told apart by the names it binds (see ``engine.dispatch.Signature``).
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["extra_index", "extra_name", "extras_of", "is_input_name", "spread"]

_FIXED = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


def extra_name(star: str, index: int) -> str:
    """The name of the positional extra ``index`` of the ``*star`` parameter."""
    return f"{star}_{index}"


def extra_index(star: str | None, name: str) -> int | None:
    """The position of the extra of ``*star`` that ``name`` names, or ``None``."""
    if star is None or not name.startswith(star + "_"):
        return None
    digits = name[len(star) + 1 :]
    return int(digits) if digits.isdigit() and str(int(digits)) == digits else None


def is_input_name(name: str) -> bool:
    """Whether ``name`` can name an input of a graph (a placeholder in generated code)."""
    return name.isidentifier() and not keyword.iskeyword(name)


def extras_of(
    params: Sequence[inspect.Parameter], names: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The names among ``names`` that are positional extras of ``*args`` (in order), and
    those that ``**kwargs`` takes (in the order given)."""
    star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    given = set(names)
    positional: list[str] = []
    while star is not None and extra_name(star, len(positional)) in given:
        positional.append(extra_name(star, len(positional)))
    fixed = {p.name for p in params if p.kind in _FIXED} | set(positional)
    return positional, [n for n in names if n not in fixed]


def spread(
    params: Sequence[inspect.Parameter], inputs: Mapping[str, Any], by_name: bool = True
) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments that call a function of parameters ``params``
    with ``inputs`` (by name, as above).

    Positional-only parameters go by position, and so does every parameter before ``*args``
    when it has extras (Python binds them so); the others go by name, or by position when
    ``by_name`` is false. A parameter missing from ``inputs`` is left to its default, the
    ones after it then by name.
    """
    positional_extras, keyword_extras = extras_of(params, list(inputs))
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    skipped = False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            args.extend(inputs[n] for n in positional_extras)
        elif p.kind is p.VAR_KEYWORD:
            continue
        elif p.name not in inputs:
            skipped = True
        elif p.kind is p.POSITIONAL_ONLY or (
            p.kind is p.POSITIONAL_OR_KEYWORD and not skipped and (positional_extras or not by_name)
        ):
            args.append(inputs[p.name])
        else:
            kwargs[p.name] = inputs[p.name]
    # Without ``**kwargs``, unknown names are passed on all the same: the function refuses them.
    kwargs.update((n, inputs[n]) for n in keyword_extras)
    return args, kwargs
