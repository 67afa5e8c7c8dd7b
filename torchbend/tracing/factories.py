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
from .state import held_generators
from .swaps import swapped
from .values import has_proxy

__all__ = ["generator_at", "held_across_calls", "legacy_tensor", "traced_factories"]

# Factories taking their size as ``*size`` (``torch.ones(b, c)``) as well as one sequence.
_VARARG_SIZES = ("zeros", "ones", "empty", "rand", "randn")
# Factories PyTorch's argument parser refuses proxies to (a size given as several traced ints,
# data holding traced ints) before any ``__torch_function__`` runs: they are replaced while
# tracing by functions that record the call themselves.
_REPLACED = (*_VARARG_SIZES, "full", "arange", "tensor", "as_tensor", "eye", "linspace")
# The legacy constructors (``torch.Tensor([n, m])``, ``torch.FloatTensor([t])``): PyTorch's
# parser takes a proxy in their data for a sequence and fails, or bakes its value unguarded.
_LEGACY = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
_LEGACY_TYPES = tuple(f"{kind}Tensor" for kind in _LEGACY)
_ORIGINALS = {
    name: getattr(torch, name) for name in (*_REPLACED, *_LEGACY_TYPES, "manual_seed", "Tensor")
}
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


def legacy_tensor(name: str, *args: Any) -> torch.Tensor:
    """``torch.<name>(*args)`` (``Tensor``, ``FloatTensor``...), as a graph calls it."""
    return _ORIGINALS[name](*args)  # type: ignore[no-any-return]


def _legacy(tracer: _Tracer, name: str) -> Callable[..., Any]:
    """Legacy constructor ``torch.<name>``, recorded in the graph when its data is traced."""
    original = _ORIGINALS[name]

    def call(*args: Any, **kwargs: Any) -> Any:
        if tracer.executing or not has_proxy((args, kwargs)):
            return original(*args, **kwargs)
        return tracer.create_proxy("call_function", legacy_tensor, (name, *args), kwargs)

    return call


def _tensor_new(tracer: _Tracer) -> Callable[..., Any]:
    """``torch.Tensor.__new__``: ``torch.Tensor(data)`` of traced data recorded in the graph
    as the legacy constructors are; subclasses (``nn.Parameter``) left alone."""

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        if cls is torch.Tensor and not tracer.executing and has_proxy((args, kwargs)):
            return tracer.create_proxy("call_function", legacy_tensor, ("Tensor", *args), kwargs)
        return _TENSOR_NEW(cls, *args, **kwargs)

    return new


_TENSOR_NEW = torch.Tensor.__new__


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
        for name in _LEGACY_TYPES:
            swaps.enter_context(swapped(torch, name, _legacy(tracer, name)))
        swaps.enter_context(swapped(torch.Tensor, "__new__", _tensor_new(tracer)))
        with _RecordFactories(tracer):
            yield


def generator_at(device: str, state: torch.Tensor) -> torch.Generator:
    """A new generator on ``device`` in ``state``: what a generator made and seeded in forward
    (``torch.Generator().manual_seed(seed)``) is when a draw reads it, at every call."""
    generator = torch.Generator(device)
    generator.set_state(state)
    return generator


def held_across_calls(generator: torch.Generator, root: torch.nn.Module, inputs: Any) -> bool:
    """Whether ``generator`` lives across calls: torch's default one, an input, or an
    attribute of a module (draws from it go on where the last call left it)."""
    if generator is torch.default_generator or any(generator is v for v in inputs.values()):
        return True
    return any(generator is g for g in held_generators(root))
