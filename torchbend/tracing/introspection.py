"""How user code inspects traced values: ``isinstance`` answers as on the concrete value."""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, Protocol

import torch
import torch.fx

from .compat import CHECK_WITH, USER_CHECKS
from .swaps import swapped

__all__ = ["USER_CODE_SKIPS", "is_user_file", "user_inspection"]

USER_CODE_SKIPS = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.dirname(__file__)) + os.sep,
)
"""Files of PyTorch and torchbend: code there sees proxies as proxies; the rest is user code."""

_isinstance = builtins.isinstance
_callable = builtins.callable
_IS_TENSOR = torch.is_tensor.__code__
_AS_USER = USER_CHECKS
"""PyTorch functions that check a traced tensor for user code (``torch._check_tensor_all``):
they see it as a tensor, so that the check they make becomes a decision of the graph."""
_is_grad_enabled = torch.is_grad_enabled
_check_with = getattr(torch, CHECK_WITH)


class _Tracer(Protocol):
    grad_mode_read: bool
    executing: int

    def value_of(self, proxy: torch.fx.Proxy) -> Any: ...


SHIPPED_MODELS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models") + os.sep
"""torchbend's own models: model code, where a decision is the model's (for locations)."""


def decision_file(filename: str) -> bool:
    """Whether a decision taken in ``filename`` is located there: user code, or the code of a
    model torchbend ships."""
    return is_user_file(filename) or filename.startswith(SHIPPED_MODELS)


def is_user_file(filename: str) -> bool:
    """Whether code in ``filename`` is the user's (a model's, a library's), not PyTorch's or
    torchbend's."""
    return not filename.startswith(USER_CODE_SKIPS)


@contextlib.contextmanager
def user_inspection(tracer: _Tracer) -> Iterator[None]:
    """While tracing, ``isinstance`` in user code answers as on the concrete value of a proxy
    (``isinstance(mask, torch.Tensor)`` is ``True`` for a traced tensor), as well as on the
    proxy itself (``isinstance(x, torch.fx.Proxy)`` stays ``True``); so do ``torch.is_tensor``
    (by whatever name user code imported it: it is ``isinstance`` called from PyTorch, on
    behalf of its caller) and ``callable`` (a proxy has ``__call__``, a tensor has not:
    ``arg() if callable(arg) else arg`` must take the branch eager code takes).

    Without this, code testing whether an argument is a tensor takes the other branch, and
    the graph computes something eager code never does. PyTorch's own code keeps seeing
    proxies: its C code trusts ``isinstance(x, torch.Tensor)`` to mean a real tensor. The
    answer holds for every call the graph runs: calls are guarded by the kinds of their
    arguments, and the kinds of traced values follow from the decisions baked in.

    ``torch.is_grad_enabled()`` read by traced code sets ``tracer.grad_mode_read``: the graph is
    then guarded by the grad mode too.

    Only the calling thread sees these answers (:func:`~torchbend.tracing.swaps.swapped`):
    the functions below are called one frame further down, below the swap's dispatcher.
    """

    def isinstance(obj: Any, cls: Any, /) -> bool:
        if not _isinstance(obj, torch.fx.Proxy):
            return _isinstance(obj, cls)
        caller = sys._getframe(2)
        if caller.f_code is _IS_TENSOR and caller.f_back is not None:
            caller = caller.f_back
        if caller.f_code not in _AS_USER and not is_user_file(caller.f_code.co_filename):
            return _isinstance(obj, cls)
        return _isinstance(obj, cls) or _isinstance(tracer.value_of(obj), cls)

    def callable(obj: Any, /) -> bool:
        if _isinstance(obj, torch.fx.Proxy) and is_user_file(sys._getframe(2).f_code.co_filename):
            obj = tracer.value_of(obj)
        return _callable(obj)

    def is_grad_enabled() -> bool:
        if not tracer.executing:  # code run concretely (a leaf module) runs again at each call
            tracer.grad_mode_read = True
        return _is_grad_enabled()

    def check_with(error_type: Any, cond: Any, message: Any) -> None:
        if _isinstance(cond, torch.fx.Proxy):  # ``torch._check(x.all().item())``
            cond = bool(cond)  # a decision of the graph, checked at every call
        _check_with(error_type, cond, message)

    with (
        swapped(builtins, "isinstance", isinstance),
        swapped(torch, CHECK_WITH, check_with),
        swapped(builtins, "callable", callable),
        swapped(torch, "is_grad_enabled", is_grad_enabled),
    ):
        yield
