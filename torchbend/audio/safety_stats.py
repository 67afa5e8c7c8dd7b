"""What a safety stage did (its counts and levels, and how reports print a level), and the
precomputed matrices of its DC blocker."""

# No ``from __future__ import annotations``: SafetyStats is a dataclass whose signature
# (shown by ``help`` and checked by the API snapshot) keeps its real types.

import math
from dataclasses import dataclass

import torch

__all__ = ["SafetyStats", "dc_blocker_matrices", "decibels"]


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


def dc_blocker_matrices(a: float, chunk: int, chunks: int) -> dict[str, torch.Tensor]:
    """The DC blocker's matrices (float32) for a low-pass of pole ``a``, in chunks of ``chunk``
    samples, ``chunks`` of them a segment (:class:`~torchbend.audio.safety.Safety` keeps them as
    buffers).

    The DC blocker as two matrix products. It subtracts from each sample ``lp[n] = a *
    lp[n-1] + (1 - a) * x[n-1]``, the input low-passed at the cutoff (the DC offset), which
    makes a high-pass filter. Within a chunk of ``chunk`` samples, the output from silence is
    the chunk's samples times ``dc_matrix`` (the identity less powers of ``a``; its last column
    gives ``lp`` one past the chunk). ``lp`` entering each chunk, and one past the block (the
    next block's state), follows from those of the chunks before (``dc_carry``) and the state
    entering the block (``dc_state``, times ``dc_chunk_powers``); it takes ``a ** n`` times
    itself from the chunk's samples (``dc_powers``). Every power of ``a`` is at most 1:
    nothing overflows.
    """
    n = torch.arange(chunk + 1, dtype=torch.float64)
    lags = n[None, :] - n[:, None]  # [k, n]: n - k
    lowpass = torch.where(lags >= 1, (1.0 - a) * a ** (lags - 1).clamp(min=0), 0.0)
    matrix = torch.eye(chunk + 1, dtype=torch.float64) - lowpass
    matrix[:, chunk] = lowpass[:, chunk]
    to_chunk = a**chunk
    j = torch.arange(chunks + 1, dtype=torch.float64)
    lags = j[None, :] - j[:, None]
    carry = torch.where(lags >= 1, to_chunk ** (lags - 1).clamp(min=0), 0.0)
    return {
        "dc_matrix": matrix[:chunk].float(),
        "dc_powers": -(a ** n[:chunk]).float(),
        "dc_carry": carry[:chunks].float(),
        "dc_chunk_powers": (to_chunk**j).float(),
    }
