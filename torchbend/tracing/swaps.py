"""Functions of ``builtins`` and ``torch`` replaced while tracing, for the tracing thread only.

Tracing answers ``isinstance`` in user code as on concrete values and records tensor factories
called with traced sizes; both need the function itself replaced, as user code calls it by
name. A replacement set on ``builtins`` or ``torch`` is seen by every thread, so each swapped
name gets one *dispatcher*, installed while any thread traces (counted, under a lock) and
removed when the last one is done: it calls the replacement the calling thread swapped in, if
any, else the original. Two threads can then trace two modules at once, each with its own
replacements, while a third runs plain eager code on the originals.

Notes:
    A replacement is called one frame below its caller (the dispatcher's frame sits between):
    code reading its caller's frame reads ``sys._getframe(2)``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["swapped"]

_LOCK = threading.Lock()
_LOCAL = threading.local()
_INSTALLED: dict[tuple[int, str], tuple[Callable[..., Any], int]] = {}
"""``(id(owner), name)`` → (the original function, how many swaps are in force)."""
_OWN: dict[tuple[int, str], bool] = {}
"""For a class, whether the swapped name was its own attribute (else inherited)."""


def _dispatcher(original: Callable[..., Any], slot: str) -> Callable[..., Any]:
    """What ``owner.name`` is while swapped: this thread's replacement, else ``original``."""
    local = _LOCAL

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        replacement = getattr(local, slot, None)
        if replacement is None:
            return original(*args, **kwargs)
        return replacement(*args, **kwargs)

    if isinstance(original, type):
        return _standing_in(original, dispatch)
    return functools.update_wrapper(dispatch, original)


def _standing_in(original: type, dispatch: Callable[..., Any]) -> type:
    """A class that calls ``dispatch`` when called, and that ``isinstance`` and
    ``issubclass`` answer for as for ``original`` (``torch.FloatTensor``: TorchScript's
    annotation parser and user code test classes against it)."""

    class Swapped(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return dispatch(*args, **kwargs)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, original)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, original)

    return Swapped(original.__name__, (), {"__module__": original.__module__})


@contextlib.contextmanager
def swapped(owner: Any, name: str, replacement: Callable[..., Any]) -> Iterator[None]:
    """Within it, ``owner.<name>`` called from this thread calls ``replacement``; from any
    other thread, what it called before (another thread's own swap, or the original).

    Swaps nest: the innermost one of a thread wins, and leaving it brings back the one before.
    """
    key = (id(owner), name)
    slot = f"swap_{id(owner)}_{name}"
    with _LOCK:
        original, count = _INSTALLED.get(key, (getattr(owner, name), 0))
        if count == 0:
            if isinstance(owner, type):
                _OWN[key] = name in vars(owner)
            setattr(owner, name, _dispatcher(original, slot))
        _INSTALLED[key] = (original, count + 1)
    previous = getattr(_LOCAL, slot, None)
    setattr(_LOCAL, slot, replacement)
    try:
        yield
    finally:
        setattr(_LOCAL, slot, previous)
        with _LOCK:
            original, count = _INSTALLED.pop(key)
            if count == 1 and isinstance(owner, type) and not _OWN.pop(key):
                delattr(owner, name)  # inherited (``Tensor.__new__``): inherited again
            elif count == 1:
                setattr(owner, name, original)
            else:
                _INSTALLED[key] = (original, count - 1)
