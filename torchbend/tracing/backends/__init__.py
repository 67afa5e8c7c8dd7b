"""Tracing backends: what turns a method of a module into a graph (concrete, torch.export,
TorchScript), behind one protocol."""

from .concrete import ConcreteBackend
from .exported import ExportBackend
from .protocol import AutoBackend, Backend, TracingBackend, ValueHook, call_method
from .scripted import TorchScriptBackend

__all__ = [
    "AutoBackend",
    "Backend",
    "ConcreteBackend",
    "ExportBackend",
    "TorchScriptBackend",
    "TracingBackend",
    "ValueHook",
    "call_method",
]
