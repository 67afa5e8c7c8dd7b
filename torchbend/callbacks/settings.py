"""What a callback was built with and shows: its arguments (controls as themselves), the ones
its repr prints, and the setting at which it is the identity."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ..controls import BendingParameter, is_control
from ..errors import BendingError
from .argument import NO_NEUTRAL, declared

__all__ = ["given_arguments", "neutral_values", "shown_arguments"]


def neutral_values(cls: type) -> dict[str, Any]:
    """Every argument declared by callback class ``cls`` that has a ``neutral``, at that value;
    a :class:`BendingError` if none has one."""
    neutral = {
        name: argument.neutral
        for name, argument in declared(cls).items()
        if argument.neutral is not NO_NEUTRAL
    }
    if not neutral:
        raise BendingError(
            f"{cls.__name__} declares no neutral setting: give one of its Arguments a "
            "neutral= value, or override neutral_setting()"
        )
    return neutral


def given_arguments(cb: Any, controlled: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments callback ``cb`` was built with, by the names of its ``__init__``: those
    given as controls (``controlled``) as themselves, the others as it keeps them (a declared
    argument, or an attribute ``_name`` or ``name``)."""
    arguments = declared(type(cb))
    args: dict[str, Any] = {}
    for name, param in inspect.signature(type(cb).__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in controlled:
            args[name] = controlled[name]
        elif name in arguments:
            args[name] = getattr(cb, name)
        elif hasattr(cb, "_" + name):
            args[name] = getattr(cb, "_" + name)
        elif hasattr(cb, name):
            args[name] = getattr(cb, name)
        else:
            raise BendingError(
                f"{type(cb).__name__} keeps no attribute for its argument {name!r}; "
                f"store it as self.{name} or self._{name} so it can be saved"
            )
    return args


def shown_arguments(cb: Any, arguments: Mapping[str, Any]) -> str:
    """``arguments`` of callback ``cb`` that differ from the defaults of its ``__init__``
    (controls always, by name), as its repr shows them."""
    parameters = inspect.signature(type(cb).__init__).parameters
    shown = []
    for name, value in arguments.items():
        default = parameters[name].default
        if is_control(value) or default is inspect.Parameter.empty or value != default:
            shown.append(f"{name}={_show(value)}")
    return ", ".join(shown)


def _show(value: Any) -> str:
    return value.name if isinstance(value, BendingParameter) else repr(value)
