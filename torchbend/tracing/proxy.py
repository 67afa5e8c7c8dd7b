"""Proxies that carry the concrete value computed alongside the symbolic one."""

from __future__ import annotations

import operator
import sys
from typing import Any, Protocol, cast

import torch
import torch.fx

from .introspection import is_user_file

__all__ = ["ConcreteAttribute", "ConcreteProxy", "ConcreteTracer"]

# Attributes handed to Python as values, like a shape read by ``int``: code passes them to
# functions that take no proxy (``torch.finfo(x.dtype)``, ``torch.iinfo``, ``device.type``).
_CONCRETE_ATTRIBUTES = frozenset(
    {"dtype", "device", "layout", "is_cuda", "is_cpu", "is_meta", "is_sparse", "is_quantized"}
)


class ConcreteTracer(Protocol):
    """What a :class:`ConcreteProxy` asks of its tracer, besides torch.fx's own hooks
    (``create_proxy``, ``to_bool``, ``iter``): torch.fx has no hook for ``len``, ``int``,
    ``float`` or attributes read as values, since it refuses them."""

    def value_of(self, proxy: torch.fx.Proxy) -> Any:
        """The concrete value of ``proxy`` on the example inputs."""

    def escape(self, proxy: torch.fx.Proxy, how: str) -> Any:
        """Hand the value of ``proxy`` to Python as ``how`` (``len``, ``int``, ``float``),
        recording and guarding that decision."""

    def read_attribute(self, proxy: torch.fx.Proxy, attr: str) -> tuple[bool, Any]:
        """``(True, proxy.<attr>)`` read as a value guarded by the inputs' signature, or
        ``(False, None)`` when the concrete value has no such attribute."""


class ConcreteProxy(torch.fx.Proxy):
    """A :class:`torch.fx.Proxy` whose node also has a value computed on example inputs.

    Where plain torch.fx must refuse (``len``, ``range``, ``int``, ``if``), this proxy hands the
    concrete value back to Python and asks its tracer to record the decision and guard it.
    """

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # ``isinstance(n, int)`` answers as on the concrete number (``type(proxy)`` stays this
        # class): calls are guarded by the kinds of their arguments, so the answer holds for
        # every call the graph runs. A proxy of a tensor is seen as a tensor only by user code
        # (``inspection.user_inspection``): PyTorch's C code trusts ``isinstance(x,
        # torch.Tensor)`` and would crash on a proxy.
        cls = type(self)
        if cls is ConcreteProxy:
            value = _concrete(self).value_of(self)
            if type(value) in (int, float):
                return type(value)
        return cls

    def __getattr__(self, k: str) -> Any:
        if k in _CONCRETE_ATTRIBUTES:
            found, value = _concrete(self).read_attribute(self, k)
            if found:
                return value
        value = _concrete(self).value_of(self)
        if not _has_attribute(value, k):
            # As eager code would: ``hasattr(n, "shape")``, ``getattr(x, "_is_param", False)``.
            raise AttributeError(f"{type(value).__name__!r} object has no attribute {k!r}")
        return ConcreteAttribute(self, k)

    def __setitem__(self, key: Any, value: Any) -> None:
        # ``y[i] = v`` is an in-place write torch.fx cannot record: record it as a call.
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    def __len__(self) -> int:
        return _concrete(self).escape(self, "len")

    def __index__(self) -> int:
        return _concrete(self).escape(self, "int")

    def __int__(self) -> int:
        return _concrete(self).escape(self, "int")

    def __float__(self) -> float:
        return _concrete(self).escape(self, "float")

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __format__(self, spec: str) -> str:
        # A number written into a string (a key, a name) is read as a guarded value; other
        # values (tensors in error messages, mostly) show as on the example inputs.
        return format(_as_python(self), spec)

    def __hash__(self) -> int:
        # ``n in {1, 2}`` and ``table[n]`` in user code look a number up by its value (then
        # compare with ``==``, a guarded decision); elsewhere a proxy hashes as itself.
        if is_user_file(sys._getframe(1).f_code.co_filename):
            value = _concrete(self).value_of(self)
            if type(value) in (int, float):
                return hash(_as_python(self))
        return object.__hash__(self)

    def __str__(self) -> str:
        value = _as_python(self)
        return str(value) if type(value) in (int, float) else repr(self)


def _concrete(proxy: torch.fx.Proxy) -> ConcreteTracer:
    """The tracer of ``proxy``, as what proxies ask of it (it made the proxy: see
    ``BendingTracer.proxy``)."""
    return cast(ConcreteTracer, proxy.tracer)


def _has_attribute(value: Any, name: str) -> bool:
    """Whether ``value`` has attribute ``name``; a tensor's properties are looked up on its
    class, not computed (``x.grad`` of a non-leaf tensor warns)."""
    if isinstance(value, torch.Tensor):
        return hasattr(type(value), name) or name in vars(value)
    return hasattr(value, name)


def _as_python(proxy: ConcreteProxy) -> Any:
    """The value of ``proxy`` handed to Python: a number as a guarded decision."""
    value = _concrete(proxy).value_of(proxy)
    if type(value) in (int, float):
        return _concrete(proxy).escape(proxy, type(value).__name__)
    return value


class ConcreteAttribute(torch.fx.proxy.Attribute, ConcreteProxy):
    """Attribute access on a :class:`ConcreteProxy` (``x.shape``), created lazily like fx's."""
