"""The export formats by name: what writes each, its usual file suffix, and one line of help.

The command's ``torchbend export --format`` reads its choices, help and dispatch here; a new
export target is one more entry of :data:`FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models.rates import model_sample_rate
from .nntilde import nntilde
from .program import onnx, pt2
from .torchscript import torchscript

if TYPE_CHECKING:
    from ..bended import BendedModule

__all__ = ["FORMATS", "ExportFormat"]

Writer = Callable[["BendedModule", Path, str, dict[str, Any]], object]
"""Writes a bended module's method ``fn``, traced on ``inputs`` (by argument name), to a
file: ``write(bended, path, fn, inputs)``."""


@dataclass(frozen=True)
class ExportFormat:
    """One export format."""

    name: str
    """What ``--format`` calls it."""
    write: Writer
    """The exporter, called as ``write(bended, path, fn, inputs)``."""
    suffix: str
    """The suffix its files usually end with."""
    help: str
    """One line saying what it writes."""
    streams: bool = False
    """Whether what reads the file calls it buffer by buffer, its state carried over (so a
    model that can stream must be traced streaming)."""


def _nntilde(bended: BendedModule, path: Path, fn: str, inputs: dict[str, Any]) -> object:
    sample_rate = model_sample_rate(bended.module) or 44100
    return nntilde(bended, path, methods=(fn,), sample_rate=sample_rate)


def _torchscript(bended: BendedModule, path: Path, fn: str, inputs: dict[str, Any]) -> object:
    return torchscript(bended, path)


def _pt2(bended: BendedModule, path: Path, fn: str, inputs: dict[str, Any]) -> object:
    return pt2(bended, path, fn=fn, **inputs)


def _onnx(bended: BendedModule, path: Path, fn: str, inputs: dict[str, Any]) -> object:
    return onnx(bended, path, fn=fn, **inputs)


FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat(
            "nntilde",
            _nntilde,
            ".ts",
            "a TorchScript file nn~ plays in Max/MSP and Pure Data",
            True,
        ),
        ExportFormat(
            "torchscript", _torchscript, ".ts", "a TorchScript module of every traced method"
        ),
        ExportFormat("pt2", _pt2, ".pt2", "a torch.export program of the method"),
        ExportFormat("onnx", _onnx, ".onnx", "an ONNX file of the method, needs torchbend[export]"),
    )
}
"""Every export format, by name (the first one is the command's default)."""
