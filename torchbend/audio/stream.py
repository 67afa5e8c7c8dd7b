"""Stream: run a (bended) model on audio block by block, as a plugin host or a sound card does."""

from __future__ import annotations

import collections
import itertools
import math
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..bended import BendedModule
from ..errors import AudioError
from ..models.rates import model_ratio
from .safety import Safety, safety_stage
from .stream_check import StreamCheck, StreamWarning, probe_module
from .stream_stats import StreamStats

__all__ = [
    "MAX_BLOCK_SIZE",
    "MIN_BLOCK_SIZE",
    "Stream",
    "StreamStats",
    "StreamWarning",
    "check_block_size",
    "reset_cache",
]

MIN_BLOCK_SIZE = 64
"""Smallest block size a :class:`Stream` takes, in samples."""
MAX_BLOCK_SIZE = 8192
"""Largest block size a :class:`Stream` takes, in samples."""


class Stream:
    """Push audio through a method of a (bended) model, one block at a time.

    The model sees only full blocks of ``block_size`` samples, as in a plugin host: state the
    model keeps between calls (cached convolutions, delay lines) carries over from block to
    block, and a :class:`~torchbend.BendedModule` advances its controls' ramps after each
    block, so a control change spreads over the next ``ramp`` blocks instead of clicking.

    Channels: with ``channels=1`` (a mono model), each channel of a multichannel input runs
    as an item of the batch and comes back in its place; a mono input to a model taking
    ``channels > 1`` is copied to every channel. With ``channels=None`` the input goes in as
    it is. The model's output may have any number of channels.

    Safety: with ``safety=True`` (or a :class:`~torchbend.audio.Safety` of your settings),
    the model's output goes through a safety stage before it is returned: NaN and infinite
    samples silenced, DC removed, and a soft limiter that keeps it within ``[-1, 1]`` and
    leaves sound below its threshold untouched; ``stats.safety`` says what it did. It is off
    by default, so that an offline render is exactly the model's output; live play
    (:func:`~torchbend.audio.live`) turns it on. It is meant for methods whose output is audio.

    Check: before the first block, the model runs on a few blocks of noise and in one pass
    (:meth:`check_streaming`); a model that keeps no state between blocks gives another output
    block by block, clicking at every block edge, and the stream warns once
    (:class:`~torchbend.audio.StreamWarning`); :func:`~torchbend.audio.make_streaming`
    converts such a model.

    Args:
        model: a :class:`~torchbend.BendedModule` or a plain ``nn.Module``.
        method: the method to run: it takes audio ``[batch, channels, time]``.
        block_size: samples per block, from 64 to 8192; a multiple of ``ratio``.
        ratio: time compression of the model, in samples per frame (a RAVE ``ratio``);
            ``None``: the model's ``ratio``, else its nn~ methods' largest ratio, else 1.
        channels: channels the model takes; ``None`` reads the model's ``channels``,
            ``n_channels`` or ``in_channels`` attribute if it is an int, else passes the input's
            channels as they are.
        sample_rate: sample rate, in Hz (sets the time budget of a block).
        safety: pass the output through a :class:`~torchbend.audio.Safety` stage: ``True``
            for one with its default settings at ``sample_rate``, or one of your own (at
            the same sample rate); ``False``: the model's output as it is.
        check: before the first block, check that the model streams
            (:meth:`check_streaming`) and warn (:class:`StreamWarning`) if it does not;
            ``False`` skips the check.

    Shape:
        - Input: ``[channels, time]`` or ``[batch, channels, time]``, any ``time``
          (``process``); exactly ``block_size`` samples (``process_block``). Float audio of
          another dtype than the model's is converted to it, and 16- or 32-bit PCM
          (``torch.int16``, ``torch.int32``) divided by its full scale.
        - Output: same rank, ``[..., out_channels, time]`` for audio-to-audio methods; a method
          that changes the rate (``encode``) gives ``ceil(time * frames / block_size)`` frames.

    Example:
        >>> import torch, torchbend as tb
        >>> stream = Stream(torch.nn.Identity(), block_size=256)
        >>> x = torch.randn(2, 1000)
        >>> bool((stream.process(x) == x).all())
        True
        >>> stream.stats.blocks, stream.stats.latency
        (4, 256)

    Notes:
        ``process`` pads the last partial block with zeros and trims the output, so a
        stateful model has seen that padding afterwards: call :meth:`reset` before streaming
        an unrelated signal. A model with a ``latency`` of its own delays its output by that
        many samples; ``process`` keeps the output as long as the input, so its last samples
        are those still in flight.
    """

    def __init__(
        self,
        model: nn.Module,
        method: str = "forward",
        block_size: int = 2048,
        ratio: int | None = None,
        channels: int | None = None,
        sample_rate: int = 44100,
        safety: bool | Safety = False,
        check: bool = True,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise AudioError(f"Stream takes an nn.Module or a BendedModule, got {type(model)}")
        inner = model.module if isinstance(model, BendedModule) else model
        impl = getattr(inner, method, None)
        if not callable(impl) or isinstance(impl, nn.Module):
            raise AudioError(f"{type(inner).__name__} has no method {method!r} to stream")
        if ratio is None:
            ratio = model_ratio(inner)
        if channels is None:
            for name in ("channels", "n_channels", "in_channels"):
                channels = _int_attribute(inner, name, None)
                if channels is not None:
                    break
        for label, value in (("ratio", ratio), ("sample_rate", sample_rate)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AudioError(f"{label} must be a positive int, got {value!r}")
        if channels is not None and (not isinstance(channels, int) or channels < 1):
            raise AudioError(f"channels must be a positive int or None, got {channels!r}")
        check_block_size(block_size, ratio)
        self.model = model
        self.method = method
        self.block_size = block_size
        self.ratio = ratio
        self.channels = channels
        self.sample_rate = sample_rate
        self.model_latency = _int_attribute(inner, "latency", 0) or 0
        self.dtype = _float_dtype(inner)
        """The dtype the model computes in; audio of another dtype is converted to it."""
        self.safety = safety_stage(safety, sample_rate, "the stream")
        """The safety stage the output goes through, or ``None``."""
        self._inner = inner
        self.streaming_check: StreamCheck | None = None
        """What :meth:`check_streaming` found, once run (``None`` before)."""
        self._check = check
        self._impl = impl  # the wrapped module's own method: what the streaming check runs
        self._fn: Callable[[torch.Tensor], Any]
        if isinstance(model, BendedModule):
            bended = model
            self._fn = lambda x: bended.call(method, x)
        else:
            self._fn = impl
        self._recent: collections.deque[float] = collections.deque(maxlen=1000)
        self._blocks = 0
        self._overruns = 0
        self._total = 0.0
        self._max = 0.0
        self._last = 0.0

    @property
    def latency(self) -> int:
        """Latency in samples: one block of buffering plus the model's declared ``latency``."""
        return self.block_size + self.model_latency

    @property
    def stats(self) -> StreamStats:
        """Timings measured so far, as a :class:`StreamStats` snapshot."""
        return StreamStats(
            block_size=self.block_size,
            sample_rate=self.sample_rate,
            latency=self.latency,
            blocks=self._blocks,
            overruns=self._overruns,
            total_time=self._total,
            median_time=statistics.median(self._recent) if self._recent else 0.0,
            max_time=self._max,
            last_time=self._last,
            safety=self.safety.stats if self.safety is not None else None,
        )

    def check_streaming(self, channels: int | None = None) -> StreamCheck:
        """Check that the model gives the same output block by block as in one pass, and
        warn (:class:`StreamWarning`, once per stream) if it does not.

        The model (for a :class:`~torchbend.BendedModule`, the module it wraps, unbent: its
        graphs and bendings are left as they are) runs on a few blocks of seeded noise
        (:func:`~torchbend.audio.stream_check.probe_streaming`), both passes from the state
        it had (its buffers, put back after) reset by its ``reset_cache()`` if it has one. A
        model without state of its own (a convolution stack, a recurrent layer called without
        its state) starts every block from silence and clicks at block edges.
        ``channels``: the input's (default: the model's, else 1). Runs once: later calls
        return the first result.
        """
        if self.streaming_check is not None:
            return self.streaming_check
        count = channels or self.channels or 1
        check = probe_module(self._inner, self._impl, self.block_size, count, self.model_latency)
        self.streaming_check = check
        if not check.ok:
            what = f"{type(self._inner).__name__}.{self.method}"
            warnings.warn(
                f"{check.describe(what)}. (Stream(..., check=False) skips this check.)",
                StreamWarning,
                stacklevel=2,
            )
        return check

    def reset(self, cache: bool = True) -> None:
        """Clear the timings and, with ``cache``, the model's state (its ``reset_cache()``);
        the same for the safety stage's counters and, with ``cache``, its filters."""
        if self.safety is not None:
            self.safety.reset(state=cache)
        self._recent.clear()
        self._blocks = self._overruns = 0
        self._total = self._max = self._last = 0.0
        if cache:
            reset_cache(self._inner)

    def process(
        self, audio: torch.Tensor, before_block: Callable[[int, int], None] | None = None
    ) -> torch.Tensor:
        """Stream ``audio`` of any length block by block; the output has the same length.

        ``before_block(i, count)``, if given, runs before block ``i`` of ``count``: to move a
        control along the file, or to show progress.
        """
        x, batched = self._as_batch(audio)
        length = x.shape[-1]
        blocks = max(1, math.ceil(length / self.block_size))
        padded = blocks * self.block_size
        if padded != length:
            x = torch.nn.functional.pad(x, (0, padded - length))
        outs = []
        for i in range(blocks):
            if before_block is not None:
                before_block(i, blocks)
            outs.append(self._run(x[..., i * self.block_size : (i + 1) * self.block_size]))
        y = torch.cat(outs, -1)
        out_length = math.ceil(length * y.shape[-1] / padded)
        y = y[..., :out_length]
        return y if batched else y[0]

    def process_block(self, block: torch.Tensor) -> torch.Tensor:
        """Process one block of exactly ``block_size`` samples (what a host's callback does)."""
        x, batched = self._as_batch(block)
        if x.shape[-1] != self.block_size:
            raise AudioError(
                f"process_block takes blocks of {self.block_size} samples, got "
                f"{x.shape[-1]} (shape {list(block.shape)}); use process() for any length"
            )
        y = self._run(x)
        return y if batched else y[0]

    def _as_batch(self, audio: torch.Tensor) -> tuple[torch.Tensor, bool]:
        if not isinstance(audio, torch.Tensor) or audio.dim() not in (2, 3):
            shape = list(audio.shape) if isinstance(audio, torch.Tensor) else type(audio).__name__
            raise AudioError(
                f"Stream takes audio [channels, time] or [batch, channels, time], got {shape}"
                "; add a channel axis to a 1-d signal with x[None]"
            )
        audio = self._as_float(audio)
        if audio.dim() == 2:
            return audio[None], False
        return audio, True

    def _as_float(self, audio: torch.Tensor) -> torch.Tensor:
        """``audio`` in the model's float dtype (float32 for a model without float tensors):
        a float tensor converted, 16- and 32-bit PCM divided by its full scale."""
        if audio.dtype == self.dtype:
            return audio
        if audio.is_floating_point():
            return audio.to(self.dtype)
        if audio.dtype in _PCM:
            return audio.to(self.dtype) / _PCM[audio.dtype]
        raise AudioError(
            f"Stream takes float audio or 16- or 32-bit PCM (torch.int16, torch.int32), got "
            f"{audio.dtype}; convert it to float in [-1, 1]"
        )

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels = x.shape[0], x.shape[1]
        fold = self.channels == 1 and channels > 1
        if fold:
            x = x.reshape(batch * channels, 1, x.shape[-1])
        elif self.channels is not None and channels != self.channels:
            if channels != 1:
                raise AudioError(
                    f"{type(self._inner).__name__}.{self.method} takes {self.channels} "
                    f"channels, got {channels}; give mono or {self.channels}-channel audio"
                )
            x = x.expand(batch, self.channels, x.shape[-1])
        if self._check and self.streaming_check is None:
            self.check_streaming(x.shape[1])
        start = time.perf_counter()
        with torch.no_grad():
            y = self._fn(x)
        if not isinstance(y, torch.Tensor) or y.dim() != 3:
            shape = list(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise AudioError(
                f"{type(self._inner).__name__}.{self.method} must return a tensor "
                f"[batch, channels, time] to stream, got {shape}"
            )
        if fold:
            y = y.reshape(batch, channels * y.shape[1], y.shape[-1])
        if self.safety is not None:
            with torch.no_grad():
                y = self.safety(y)
        self._count(time.perf_counter() - start)
        return y

    def _count(self, elapsed: float) -> None:
        self._blocks += 1
        self._total += elapsed
        self._last = elapsed
        self._max = max(self._max, elapsed)
        self._recent.append(elapsed)
        if elapsed > self.block_size / self.sample_rate:
            self._overruns += 1

    def __repr__(self) -> str:
        name = type(self._inner).__name__
        args = [f"{name}", f"block_size={self.block_size}"]
        if self.method != "forward":
            args.insert(1, f"method={self.method!r}")
        if self.ratio != 1:
            args.append(f"ratio={self.ratio}")
        if self.channels is not None:
            args.append(f"channels={self.channels}")
        if self.sample_rate != 44100:
            args.append(f"sample_rate={self.sample_rate}")
        if self.safety is not None:
            args.append(f"safety={self.safety!r}")
        return f"Stream({', '.join(args)})"


def reset_cache(module: nn.Module) -> None:
    """Clear the state ``module`` keeps between blocks (its ``reset_cache()``, if it has one)."""
    reset = getattr(module, "reset_cache", None)
    if callable(reset):
        reset()


_PCM = {torch.int16: 32768.0, torch.int32: 2147483648.0}
"""Full scale of the integer dtypes a :class:`Stream` takes as PCM audio."""


def _float_dtype(module: nn.Module) -> torch.dtype:
    """The dtype of ``module``'s first float parameter or buffer, float32 without one."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float32


def _int_attribute(module: nn.Module, name: str, default: int | None) -> int | None:
    value = getattr(module, name, None)
    return default if isinstance(value, bool) or not isinstance(value, int) else value


def check_block_size(block_size: int, ratio: int) -> None:
    """Raise :class:`AudioError` unless ``block_size`` is a whole number of samples from
    :data:`MIN_BLOCK_SIZE` to :data:`MAX_BLOCK_SIZE` and a multiple of ``ratio``."""
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise AudioError(f"block_size must be an int, got {block_size!r}")
    if not MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
        raise AudioError(
            f"block_size must be between {MIN_BLOCK_SIZE} and {MAX_BLOCK_SIZE} samples, "
            f"got {block_size}"
        )
    if block_size % ratio:
        low = block_size // ratio * ratio
        valid = [n for n in (low, low + ratio) if MIN_BLOCK_SIZE <= n <= MAX_BLOCK_SIZE]
        hint = (
            f"; the nearest valid sizes are {' and '.join(map(str, valid))}"
            if valid
            else f"; no block size from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} is a multiple of it"
        )
        raise AudioError(
            f"block_size {block_size} is not a multiple of the model's ratio {ratio} "
            f"(samples per latent frame){hint}"
        )
