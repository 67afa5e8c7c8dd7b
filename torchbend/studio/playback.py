"""Live mode: a sound looped block by block through the bent model, for the page to play while
its knobs move."""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from ..audio.stream import Stream, StreamWarning
from ..errors import StudioError, TorchbendError
from .session import Studio

__all__ = ["LiveStream"]

MAX_BLOCKS = 16
"""Blocks one request may ask for: the page keeps about half a second queued."""


class LiveStream:
    """The current sound, looped, through the bent model with the safety stage on (as live
    play runs it: no NaN, no DC, nothing beyond full scale reaches the speakers)."""

    def __init__(self, studio: Studio, sound: Any = None, block: Any = None) -> None:
        if sound is not None and not isinstance(sound, str):
            raise StudioError(f"'sound' names a sound, got {sound!r}")
        size = block if block is not None else (studio.block_size or 2048)
        if isinstance(size, bool) or not isinstance(size, int):
            raise StudioError(f"'block' is a number of samples, got {block!r}")
        self.studio = studio
        self.sound = studio.library.get(sound or studio.current)
        try:
            self.stream = Stream(
                studio.bended,
                method=studio.fn,
                block_size=size,
                ratio=studio.ratio,
                channels=1,
                sample_rate=studio.sample_rate,
                safety=True,
            )
        except TorchbendError as e:
            raise StudioError(str(e)) from None
        with studio.lock, warnings.catch_warnings():
            warnings.simplefilter("ignore", StreamWarning)  # the page shows it: started()
            check = self.stream.check_streaming(1)
            self.stream.reset()
        what = f"{type(studio.bended.module).__name__}.{studio.fn}"
        self.warning = None if check.ok else check.describe(what)
        """Why the model clicks at block edges (:meth:`Stream.check_streaming`), or None."""
        self.position = 0
        self.index = 0

    def started(self) -> dict[str, Any]:
        return {
            "type": "started",
            "sound": self.sound.id,
            "sample_rate": self.studio.sample_rate,
            "block": self.stream.block_size,
            "latency_ms": round(1000 * self.stream.latency / self.studio.sample_rate, 2),
            "warning": self.warning,
        }

    def next(self) -> tuple[bytes, dict[str, Any]]:
        """The next block, as little-endian float32 samples of its first channel, and how
        long it took."""
        size = self.stream.block_size
        audio = self.sound.audio
        indices = (torch.arange(size) + self.position) % audio.shape[-1]
        block = audio[:, indices]
        start = time.perf_counter()
        with self.studio.lock:
            try:
                out = self.stream.process_block(block)
            except Exception as e:  # the model or a callback may raise anything
                raise StudioError(f"live block failed: {type(e).__name__}: {e}", 422) from e
        elapsed = time.perf_counter() - start
        self.position = (self.position + size) % audio.shape[-1]
        self.index += 1
        samples = out[0].detach().float().contiguous().numpy().astype("<f4").tobytes()
        stats = self.stream.stats
        return samples, {
            "type": "stats",
            "index": self.index - 1,
            "compute_ms": round(1000 * elapsed, 3),
            "realtime_factor": round(stats.realtime_factor, 2),
            "latency_ms": round(stats.latency_ms, 2),
        }
