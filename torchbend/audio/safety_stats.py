"""What a safety stage did: its counts and levels, and how reports print a level."""

# No ``from __future__ import annotations``: SafetyStats is a dataclass whose signature
# (shown by ``help`` and checked by the API snapshot) keeps its real types.

import math
from dataclasses import dataclass

__all__ = ["SafetyStats", "decibels"]


@dataclass(frozen=True)
class SafetyStats:
    """What a :class:`Safety` stage did so far (a snapshot: ``safety.stats``)."""

    blocks: int
    """Blocks (calls) processed."""
    guarded_blocks: int
    """Blocks in which the guard replaced NaN or infinite samples."""
    nonfinite: int
    """NaN or infinite samples the guard replaced with silence."""
    limited_blocks: int
    """Blocks in which the limiter turned the gain down."""
    limited_samples: int
    """Samples the limiter turned down."""
    max_reduction_db: float
    """The largest gain reduction of the limiter, in dB (0: it never acted)."""
    max_dc: float
    """The largest offset the DC blocker removed (full scale 1): the mean over a block of what
    it took away from a channel."""
    peak: float = 0.0
    """The largest size of a sample that came in (full scale 1; NaN and infinite samples the
    guard silenced not counted): how loud the model played."""
    limited_seconds: float = 0.0
    """How long the limiter turned the gain down (on any channel), in seconds."""

    @property
    def acted(self) -> bool:
        """Whether the guard or the limiter changed the sound."""
        return bool(self.guarded_blocks or self.limited_blocks)

    def __str__(self) -> str:
        parts = []
        if self.guarded_blocks:
            parts.append(
                f"guarded {self.guarded_blocks} blocks ({self.nonfinite} NaN or infinite "
                "samples silenced)"
            )
        if self.limited_blocks:
            parts.append(
                f"limited {self.limited_blocks} blocks ({1000 * self.limited_seconds:.1f} ms "
                f"above the threshold, up to {self.max_reduction_db:.1f} dB of gain reduction; "
                f"peak in {decibels(self.peak)})"
            )
        if not parts:
            parts.append("nothing guarded or limited")
        parts.append(f"DC offset up to {self.max_dc:.3g} removed")
        return "safety: " + ", ".join(parts)


def decibels(level: float) -> str:
    """A level (full scale 1) in dBFS, as the reports print it: ``-0.3 dBFS``, ``+6.0 dBFS``."""
    if level <= 0.0:
        return "silence"
    if math.isinf(level):
        return "infinite"
    return f"{20.0 * math.log10(level):+.1f} dBFS"
