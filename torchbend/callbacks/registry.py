"""The registry of torchbend's own callbacks: the classes a configuration names by class name,
derived from what :mod:`torchbend.callbacks` exports (the one place they are listed)."""

from __future__ import annotations

import inspect

from .. import callbacks as package
from .base import BendingCallback

__all__ = ["ALIASES", "CALLBACKS"]

# ``torchbend.callbacks`` imports this module once its callbacks and ``__all__`` are bound: the
# package is only partly initialised here, and everything read below is already there.
_EXPORTED: dict[str, type[BendingCallback]] = {
    name: cls
    for name in vars(package)["__all__"]
    if inspect.isclass(cls := getattr(package, name, None))
    and issubclass(cls, BendingCallback)
    and cls is not BendingCallback
}

CALLBACKS: dict[str, type[BendingCallback]] = {
    name: cls for name, cls in sorted(_EXPORTED.items()) if name == cls.__name__
}
"""Every callback class ``torchbend.callbacks`` exports, by class name (``Normal`` is an alias
of ``Noise``); the identity and scripting tests run over all of them."""

ALIASES: dict[str, type[BendingCallback]] = {
    name: cls for name, cls in sorted(_EXPORTED.items()) if name != cls.__name__
}
"""Other names of callbacks of :data:`CALLBACKS`, exported by ``torchbend.callbacks`` too."""
