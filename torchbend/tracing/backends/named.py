"""The tracing backend a name asks for (``"concrete"``, ``"export"``, ``"auto"``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ...errors import TracingError
from .concrete import ConcreteBackend
from .exported import ExportBackend
from .protocol import AutoBackend, Backend
from .scripted import TorchScriptBackend

__all__ = ["make_backend"]


def make_backend(
    spec: Backend | str, leaves: Sequence[type | str] = (), module: nn.Module | None = None
) -> Backend:
    """The backend named ``spec`` (``"concrete"``, ``"export"``, ``"auto"``: the concrete tracer,
    then torch.export when it fails), or ``spec`` itself. A TorchScript ``module`` is traced
    by the torchscript backend, whatever the name."""
    if isinstance(module, torch.jit.ScriptModule) and isinstance(spec, str):
        return TorchScriptBackend(module)
    named: dict[str, Callable[[], Backend]] = {
        "concrete": lambda: ConcreteBackend(leaves),
        "export": ExportBackend,
        "auto": lambda: AutoBackend(ConcreteBackend(leaves), ExportBackend()),
    }
    if isinstance(spec, str):
        if spec not in named:
            raise TracingError(
                f"backend must be one of {sorted(named)} or a TracingBackend, got {spec!r}"
            )
        return named[spec]()
    return spec
