"""The safety stage a ``safety=`` argument asks for (streams, renders, nn~ files)."""

from __future__ import annotations

from typing import Any

from ..errors import AudioError, TorchbendError
from .safety import Safety

__all__ = ["safety_stage"]


def safety_stage(
    safety: Any, sample_rate: int, what: str, error: type[TorchbendError] = AudioError
) -> Safety | None:
    """The stage a ``safety=`` argument asks for (``True``: a new one at ``sample_rate``;
    ``False``: none; a :class:`Safety`: itself, if it works at ``sample_rate``), or an
    ``error`` that names ``what`` runs at that rate (``"the stream"``)."""
    if isinstance(safety, Safety):
        if safety.sample_rate != sample_rate:
            raise error(
                f"the safety stage works at {safety.sample_rate} Hz and {what} at "
                f"{sample_rate} Hz; make it with Safety({sample_rate}, ...)"
            )
        return safety
    if not isinstance(safety, bool):
        raise error(f"safety must be True, False or a tb.audio.Safety, got {safety!r}")
    return Safety(sample_rate) if safety else None
