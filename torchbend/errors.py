"""The exceptions torchbend raises: one root, one subclass per pipeline stage."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AudioError",
    "BendingError",
    "ExportError",
    "GuardError",
    "SelectionError",
    "TorchbendError",
    "TracingError",
]


class TorchbendError(Exception):
    """Root of every error raised by torchbend."""


class TracingError(TorchbendError):
    """A module or method could not be traced, or was called with inputs it cannot take."""


class GuardError(TracingError):
    """In strict mode, a call took a decision other than the one baked into its graph."""


class SelectionError(TorchbendError, KeyError):
    """A pattern or name selected no weight or activation."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else ""


class BendingError(TorchbendError):
    """A bending callback was misconfigured or met a target it cannot bend."""


class ExportError(TorchbendError):
    """A bended module could not be exported, or an exported file fails its checks."""


class AudioError(TorchbendError):
    """An audio file or buffer could not be read, written or streamed."""


def closest(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Return the candidates closest to ``word`` (for 'did you mean' hints)."""
    candidates = list(candidates)
    found = difflib.get_close_matches(word, candidates, n=n, cutoff=0.4)
    if not found:
        stripped = word.strip("^$.*+?()[]\\")
        found = [c for c in candidates if stripped and stripped in c][:n]
    return found
