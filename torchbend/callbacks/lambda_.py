"""Lambda: bend a weight or an activation with any Python function."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from ..errors import BendingError
from .base import BendingCallback

__all__ = ["Lambda"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _takes_name(owner: str, fn: Callable[..., torch.Tensor]) -> bool:
    """Whether ``fn`` is to be called as ``fn(x, name)`` rather than ``fn(x)``."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature, such as some torch ops
        return False
    required = [p for p in parameters if p.kind in _POSITIONAL and p.default is p.empty]
    if len(required) > 2:
        raise BendingError(
            f"{owner}: fn must take the tensor (and optionally the target's name) as "
            f"positional arguments, but {_fn_name(fn)}{inspect.signature(fn)} requires "
            f"{len(required)}"
        )
    return len(required) == 2


def _fn_name(fn: Callable[..., torch.Tensor]) -> str:
    return getattr(fn, "__name__", None) or repr(fn)


class Lambda(BendingCallback):
    """Bend the target with a Python function: ``fn(x)``, or ``fn(x, name)``.

    Args:
        fn: a callable that returns the bent tensor. If it has two required positional
            parameters it also gets the name of the target being bent (a weight's dotted name
            or ``"<method>:<node>"`` for an activation); otherwise it gets the tensor only.
            On weights it must not modify its input in place.

    Shape:
        - Input: whatever ``fn`` accepts.
        - Output: whatever ``fn`` returns.

    Notes:
        A Lambda cannot be compiled by ``torch.jit.script`` (``scriptable`` is ``False``), so
        a model bent with one cannot be exported to TorchScript. Write a small
        :class:`BendingCallback` subclass instead when you need to export.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Lambda
        >>> Lambda(torch.tanh)(torch.tensor([0.0, 100.0]), "x")
        tensor([0., 1.])
        >>> Lambda(lambda x, name: x * len(name))(torch.ones(2), "abc")
        tensor([3., 3.])
    """

    scriptable: ClassVar[bool] = False

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        if not callable(fn):
            raise BendingError(
                f"{type(self).__name__}: fn must be a callable taking a tensor (and optionally "
                f"the target's name) and returning a tensor, got {type(fn).__name__}: {fn!r}"
            )
        self.fn = fn
        self.takes_name = _takes_name(type(self).__name__, fn)

    @classmethod
    def neutral_setting(cls) -> dict[str, Any] | None:
        return None  # fn decides

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        y = self.fn(x, name) if self.takes_name else self.fn(x)
        if not isinstance(y, torch.Tensor):
            raise BendingError(
                f"{self!r} must return a tensor, but returned {type(y).__name__} on '{name}'"
            )
        return y

    def extra_repr(self) -> str:
        return f"fn={_fn_name(self.fn)}"
