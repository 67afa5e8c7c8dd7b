"""The exceptions torchbend raises: one root, one subclass per pipeline stage."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AudioError",
    "BendingError",
    "DiscoveryError",
    "ExportError",
    "GuardError",
    "ModelError",
    "SelectionError",
    "StudioError",
    "SweepError",
    "TorchbendError",
    "TracingError",
    "WeightsError",
    "closest",
    "did_you_mean",
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


class DiscoveryError(TorchbendError, ValueError):
    """A discovery (a ranking of what moves a descriptor, a steering vector, a health probe)
    asked of something it cannot read: a node without a channel axis, sounds it cannot
    compare, no candidate left."""


class ExportError(TorchbendError):
    """A bended module could not be exported, or an exported file fails its checks."""


class AudioError(TorchbendError, ValueError):
    """An audio file or buffer could not be read, written, streamed or measured (also a
    ``ValueError``: what was given is a value the audio functions cannot take)."""


class WeightsError(TorchbendError):
    """A model's weights could not be found, read or matched to its parameters."""


class ModelError(TorchbendError, ValueError):
    """A shipped model (or one of its layers) was built with arguments it cannot take, or
    called on an input it cannot take."""


class SweepError(TorchbendError):
    """A sweep's specification, output folder or manifest is not what a sweep can use."""


class StudioError(TorchbendError):
    """A request to the studio's server that it cannot take: ``status`` is the HTTP status
    the server answers with (400 a bad request, 404 nothing of that name, 413 too large)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def closest(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Return the candidates closest to ``word`` (for 'did you mean' hints)."""
    candidates = list(candidates)
    found = difflib.get_close_matches(word, candidates, n=n, cutoff=0.4)
    if not found:
        stripped = word.strip("^$.*+?()[]\\")
        found = [c for c in candidates if stripped and stripped in c][:n]
    return found


def did_you_mean(word: str, candidates: Iterable[str], n: int = 1) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the ``n`` candidates closest to ``word``, or ``""``.

    Every "did you mean" hint of torchbend is built here, so that they all read the same.
    """
    hint = closest(word, candidates, n)
    return f"; did you mean {' or '.join(map(repr, hint))}?" if hint else ""
