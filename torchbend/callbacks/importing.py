"""Loading callbacks: from drop-in Python files, and by name (as saved configurations do)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import types
import warnings
from collections.abc import Collection
from pathlib import Path

from ..errors import BendingError, did_you_mean
from .base import BendingCallback
from .registry import ALIASES, CALLBACKS

__all__ = ["PACKAGE", "callback_from_name", "load_callbacks"]

_DOTTED = r"[^\W\d]\w*(\.[^\W\d]\w*)*"
_NAME = re.compile(rf"{_DOTTED}:{_DOTTED}")
"""``module.path:ClassName``: dotted identifiers (which no import reads as relative, nor empty)."""

PACKAGE = "torchbend_user_callbacks"
"""The package that files loaded by :func:`load_callbacks` are imported into: ``bitcrusher.py``
becomes module ``torchbend_user_callbacks.bitcrusher``."""


def load_callbacks(path: str | Path) -> dict[str, type[BendingCallback]]:
    """Load the bending callbacks defined in a Python file, or in the ``.py`` files of a folder.

    Each file is imported as module ``torchbend_user_callbacks.<stem>`` and registered in
    ``sys.modules``, so that its callbacks pickle, and a saved configuration that names them
    (``"torchbend_user_callbacks.bitcrusher:BitCrusher"``) finds them once the file is loaded
    again. Loading a file again runs it again (edit, then reload); a file with the stem of
    another one already loaded replaces it, with a warning.

    Args:
        path: a ``.py`` file, or a folder whose ``.py`` files are loaded (not its subfolders,
            nor files whose name starts with ``_``, which may hold helpers).

    Returns:
        The :class:`BendingCallback` subclasses the files define (not those they import), by
        class name.

    Raises:
        BendingError: if ``path`` does not exist, is not a ``.py`` file or a folder, a file
            fails to import (the error names the file, and chains the cause), a file defines
            no callback, or two files of a folder define callbacks of the same name.

    Example:
        >>> import torchbend as tb
        >>> found = tb.load_callbacks("callbacks/bitcrusher.py")  # doctest: +SKIP
        >>> found["BitCrusher"](bits=4)  # doctest: +SKIP
        BitCrusher(bits=4)
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(f for f in path.glob("*.py") if not f.name.startswith("_"))
        if not files:
            raise BendingError(f"no callback files in folder {path} (it holds no .py file)")
    elif path.is_file():
        if path.suffix != ".py":
            raise BendingError(f"{path} is not a Python file (.py) or a folder of them")
        files = [path]
    else:
        raise BendingError(f"cannot load callbacks from {path}: no such file or folder")
    found: dict[str, type[BendingCallback]] = {}
    origin: dict[str, Path] = {}
    for file in files:
        for name, cls in _load_file(file).items():
            if name in found:
                raise BendingError(
                    f"callback {name} is defined both in {origin[name]} and in {file}; "
                    "rename one of them"
                )
            found[name] = cls
            origin[name] = file
    return found


def _package() -> types.ModuleType:
    package = sys.modules.get(PACKAGE)
    if package is None:
        # A namespace for the loaded files: pickle imports a class's top-level package first.
        package = types.ModuleType(PACKAGE, "Callback files loaded by torchbend.load_callbacks.")
        package.__path__ = []
        sys.modules[PACKAGE] = package
    return package


def _load_file(file: Path) -> dict[str, type[BendingCallback]]:
    file = file.resolve()
    stem = re.sub(r"\W", "_", file.stem)
    if stem[0].isdigit():
        stem = "_" + stem
    module_name = f"{PACKAGE}.{stem}"
    package = _package()
    previous = sys.modules.get(module_name)
    previous_file = getattr(previous, "__file__", None)
    if previous_file is not None and Path(previous_file) != file:
        warnings.warn(
            f"{file} replaces {previous_file} as module {module_name}: callbacks saved by name "
            f"from that module now load from {file}",
            stacklevel=3,
        )
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise BendingError(f"cannot import {file} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        _restore(module_name, previous)
        raise BendingError(f"loading callbacks from {file} failed: {type(e).__name__}: {e}") from e
    found = {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and issubclass(cls, BendingCallback)
        and cls.__module__ == module_name
    }
    if not found:
        _restore(module_name, previous)
        raise BendingError(
            f"{file} defines no bending callback: define a subclass of "
            "torchbend.BendingCallback in it"
        )
    setattr(package, stem, module)
    return found


def _restore(module_name: str, previous: types.ModuleType | None) -> None:
    """Put back the module loaded before under ``module_name``, if any."""
    if previous is None:
        del sys.modules[module_name]
    else:
        sys.modules[module_name] = previous


def callback_from_name(name: str, imports: Collection[str] | None = None) -> type[BendingCallback]:
    """The callback class that ``name`` refers to, as saved configurations name them.

    Args:
        name: ``"ClassName"`` for torchbend's own callbacks (``"Mask"``), or
            ``"module.path:ClassName"`` for any other, from an importable module or a file
            loaded with :func:`load_callbacks` (``"torchbend_user_callbacks.bitcrusher:
            BitCrusher"``).
        imports: ``None`` imports the module of a ``module.path:ClassName`` if it is not yet
            (what the user typed, as ``torchbend --bend``); else only modules already imported
            and those listed are (what a file or a message names: see
            :meth:`BendingConfig.from_dict`).

    Raises:
        BendingError: if the module is not imported and may not be, cannot be imported, has
            no such class, or the class is not a :class:`BendingCallback`.

    Example:
        >>> from torchbend.callbacks import callback_from_name
        >>> callback_from_name("Mask")
        <class 'torchbend.callbacks.mask.Mask'>
        >>> callback_from_name("torchbend.callbacks.affine:Scale")
        <class 'torchbend.callbacks.affine.Scale'>
    """
    if not isinstance(name, str) or not name:
        raise BendingError(f"a callback's name is a non-empty string, got {name!r}")
    if ":" not in name and name.isidentifier():
        return _own_callback(name)
    if not _NAME.fullmatch(name):
        raise BendingError(
            f"a callback's name is 'ClassName' or 'module.path:ClassName', got {name!r}"
        )
    module_name, _, qualname = name.partition(":")
    if imports is not None and module_name not in sys.modules and module_name not in imports:
        raise BendingError(
            f"callback {name} is in module {module_name}, which is not imported: torchbend "
            f"never imports a module a configuration or a message names. Import it yourself "
            f"(import {module_name}), load its file (tb.load_callbacks('path/to/file.py')), or "
            f"allow it (BendingConfig.load(path, allow=[{module_name!r}]))"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        hint = ""
        if module_name.startswith(PACKAGE + "."):
            stem = module_name[len(PACKAGE) + 1 :]
            hint = f"; load its file first: tb.load_callbacks('path/to/{stem}.py')"
        raise BendingError(f"cannot find callback {name}: cannot import {module_name}{hint}") from e
    except Exception as e:  # the module's own code failed
        raise BendingError(
            f"cannot find callback {name}: importing {module_name} failed: {type(e).__name__}: {e}"
        ) from e
    found: object = module
    for part in qualname.split("."):
        # What is defined there, not getattr: a module's __getattr__ may import (torch
        # imports torch._inductor when it is first looked up), and a name must run nothing.
        found = vars(found).get(part) if hasattr(found, "__dict__") else None
        if found is None:
            raise BendingError(f"cannot find callback {name}: {module_name} has no {qualname}")
    if not (inspect.isclass(found) and issubclass(found, BendingCallback)):
        raise BendingError(f"{name} is not a bending callback (a BendingCallback subclass)")
    return found


def _own_callback(name: str) -> type[BendingCallback]:
    found = CALLBACKS.get(name) or ALIASES.get(name)
    if found is not None:
        return found
    raise BendingError(
        f"torchbend has no callback {name!r}"
        + did_you_mean(name, list(CALLBACKS))
        + " Name other callbacks 'module.path:ClassName'."
    )
