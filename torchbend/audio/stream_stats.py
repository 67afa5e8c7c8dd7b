"""StreamStats: what a Stream measured (timings, overruns, latency)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .safety_stats import SafetyStats

__all__ = ["StreamStats"]


@dataclass(frozen=True)
class StreamStats:
    """What a :class:`Stream` measured so far (a snapshot: ``stream.stats``)."""

    block_size: int
    """Samples per block."""
    sample_rate: int
    """Sample rate, in Hz; with ``block_size`` it sets each block's time budget."""
    latency: int
    """Latency in samples: one block of buffering plus what the model declares (``latency``)."""
    blocks: int
    """Blocks processed."""
    overruns: int
    """Blocks whose compute time exceeded their budget (``block_size / sample_rate``)."""
    total_time: float
    """Compute time of all blocks, in seconds."""
    median_time: float
    """Median compute time per block over the last blocks (up to 1000), in seconds."""
    max_time: float
    """Longest compute time of a block, in seconds."""
    last_time: float
    """Compute time of the last block, in seconds (the safety stage's included)."""
    safety: SafetyStats | None = None
    """What the stream's safety stage did (:class:`~torchbend.audio.Safety`); ``None``
    without one."""

    @property
    def budget(self) -> float:
        """Time budget of one block, in seconds: ``block_size / sample_rate``."""
        return self.block_size / self.sample_rate

    @property
    def realtime_factor(self) -> float:
        """Audio time over compute time (``> 1``: faster than real time), from the median."""
        if self.median_time <= 0.0:
            return math.inf if self.blocks else 0.0
        return self.budget / self.median_time

    @property
    def latency_ms(self) -> float:
        """``latency`` in milliseconds."""
        return 1000.0 * self.latency / self.sample_rate

    def __str__(self) -> str:
        text = (
            f"{self.blocks} blocks of {self.block_size} at {self.sample_rate} Hz: "
            f"{self.realtime_factor:.1f}x realtime (median {1000 * self.median_time:.2f} ms, "
            f"max {1000 * self.max_time:.2f} ms, budget {1000 * self.budget:.2f} ms), "
            f"{self.overruns} overruns, latency {self.latency} samples "
            f"({self.latency_ms:.1f} ms)"
        )
        if self.safety is not None:
            text += f"; {self.safety}"
        return text
