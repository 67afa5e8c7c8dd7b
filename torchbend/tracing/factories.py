"""Tensor factories while tracing: recorded as graph calls, with traced sizes in any form."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch
import torch.fx
from torch.overrides import TorchFunctionMode

from .operations import FACTORIES
from .swaps import swapped
from .values import has_proxy

__all__ = ["traced_factories"]

# Factories taking their size as ``*size`` (``torch.ones(b, c)``) as well as one sequence.
_VARARG_SIZES = ("zeros", "ones", "empty", "rand", "randn")
# Factories PyTorch's argument parser refuses proxies to (a size given as several traced ints,
# data holding traced ints) before any ``__torch_function__`` runs: they are replaced while
# tracing by functions that record the call themselves.
_REPLACED = (*_VARARG_SIZES, "full", "arange", "tensor", "as_tensor", "eye", "linspace")
_ORIGINALS = {name: getattr(torch, name) for name in (*_REPLACED, "manual_seed")}
"""The functions themselves, as torch has them when no trace runs."""


class _Tracer(Protocol):
    executing: int

    def create_proxy(
        self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    def value_of(self, proxy: torch.fx.Proxy) -> Any: ...


class _RecordFactories(TorchFunctionMode):
    """Records tensor factories called without traced arguments (``torch.randn(3)``), so that
    each call of the graph builds its tensors anew (and random ones draw new values)."""

    def __init__(self, tracer: _Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in FACTORIES and not self.tracer.executing and not has_proxy((args, kwargs)):
            return self.tracer.create_proxy("call_function", func, args, kwargs)
        return func(*args, **kwargs)


def _recording(tracer: _Tracer, factory: Callable[..., Any], varargs: bool) -> Callable[..., Any]:
    """``factory``, recording its call in the graph when an argument is traced."""

    @functools.wraps(factory)
    def call(*args: Any, **kwargs: Any) -> Any:
        if tracer.executing or not has_proxy((args, kwargs)):
            return factory(*args, **kwargs)
        if varargs and args and _is_size(tracer, args[0]):
            args = (tuple(args),)  # ``torch.ones(b, c)`` as ``torch.ones((b, c))``
        return tracer.create_proxy("call_function", factory, args, kwargs)

    return call


def _is_size(tracer: _Tracer, value: Any) -> bool:
    """Whether ``value`` is one int of a ``*size`` (rather than a sequence of sizes)."""
    if isinstance(value, torch.fx.Proxy):
        value = tracer.value_of(value)
    return isinstance(value, int) or (
        isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point()
    )


def _seeding(tracer: _Tracer, seed: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.manual_seed``, recorded in the graph: the draws after it depend on it."""

    @functools.wraps(seed)
    def call(*args: Any, **kwargs: Any) -> Any:
        if tracer.executing:
            return seed(*args, **kwargs)
        return tracer.value_of(tracer.create_proxy("call_function", seed, args, kwargs))

    return call


@contextlib.contextmanager
def traced_factories(tracer: _Tracer) -> Iterator[None]:
    """While tracing, record tensor factories as graph calls whatever their arguments.

    ``torch.ones(b, c)`` with traced ``b`` fails in PyTorch's argument parser before any
    tracing hook runs, so the factories are replaced in the ``torch`` namespace for the time of
    the trace (as torch.fx replaces ``Module.__call__``), and put back after it;
    ``torch.manual_seed`` too, so that seeding in ``forward`` is a call of the graph. Other
    threads keep calling the factories themselves (:func:`~torchbend.tracing.swaps.swapped`).
    """
    with contextlib.ExitStack() as swaps:
        for name in _REPLACED:
            factory = _recording(tracer, _ORIGINALS[name], name in _VARARG_SIZES)
            swaps.enter_context(swapped(torch, name, factory))
        swaps.enter_context(
            swapped(torch, "manual_seed", _seeding(tracer, _ORIGINALS["manual_seed"]))
        )
        with _RecordFactories(tracer):
            yield
