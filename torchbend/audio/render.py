"""Audio through a bent model the way the command renders it: the model put in streaming
mode, traced on a block, then run block by block from a clean state (or in one pass), any
length in and the same length out. ``torchbend bend`` and sweeps render with these."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..bended import BendedModule
from ..errors import TorchbendError

__all__ = ["STREAM_BLOCK", "padded", "ratio_of", "render", "streams", "trace_audio"]

STREAM_BLOCK = 8192
"""Block size of ``bend`` for a model that streams, unless ``--block-size`` says another."""


def ratio_of(module: nn.Module) -> int:
    ratio = getattr(module, "ratio", 1)
    return ratio if isinstance(ratio, int) and ratio > 0 else 1


def streams(module: nn.Module) -> bool:
    """Put ``module`` in streaming mode if it has one; whether it keeps state between blocks
    (a TorchScript file is taken to, as nn~ runs it)."""
    set_streaming = getattr(module, "set_streaming", None)
    if callable(set_streaming):
        set_streaming(True)
        return True
    return isinstance(module, torch.jit.ScriptModule)


def padded(audio: torch.Tensor, ratio: int) -> torch.Tensor:
    """``[channels, time]`` audio as a batch of one, padded with zeros to a multiple of
    ``ratio`` samples."""
    return F.pad(audio, (0, -audio.shape[-1] % ratio))[None]


def trace_audio(bended: BendedModule, fn: str, x: torch.Tensor) -> None:
    """Trace ``fn`` with ``x`` as its first argument (whatever the argument's name); the
    model's own error, if it refuses ``x``, as a :class:`TorchbendError` that says why."""
    names = bended.view().signature(fn).names
    if not names:
        raise TorchbendError(f"{fn} takes no argument to feed audio to")
    inputs: dict[str, Any] = {names[0]: x}
    try:
        bended.trace(fn, **inputs)
    except Exception as e:  # the model's own code refused the input, or the tracer did
        owner, ratio, length = type(bended.module).__name__, ratio_of(bended.module), x.shape[-1]
        if length % ratio:
            below, above = length // ratio * ratio, (length // ratio + 1) * ratio
            nearest = f"{below} or {above}" if below else str(above)
            raise TorchbendError(
                f"{owner}.{fn} takes a length that is a multiple of its ratio {ratio}, got "
                f"an input of shape {list(x.shape)}; give {nearest}"
            ) from e
        if isinstance(e, TorchbendError):
            raise
        raise TorchbendError(
            f"{owner}.{fn} failed on an input of shape {list(x.shape)}: {type(e).__name__}: {e}"
        ) from e


def render(
    bended: BendedModule,
    audio: torch.Tensor,
    sample_rate: int,
    fn: str,
    block_size: int | None,
    progress: Any = None,
    safety: bool = False,
) -> tuple[torch.Tensor, str]:
    """``audio`` (``[channels, time]``) through traced method ``fn`` of ``bended``, and how:
    block by block as :class:`~torchbend.audio.stream.Stream` runs it, from a clean state, or
    with ``block_size=None`` in one pass over the whole file. Any length in, the same length
    out. With ``safety``, the output goes through :class:`~torchbend.audio.Safety` (block by
    block with the model, or in one pass after it: the same, to float rounding)."""
    from ..audio.stream import Stream
    from ..safety import Safety

    ratio = ratio_of(bended.module)
    if block_size is None:
        x = padded(audio, ratio)
        with torch.inference_mode():
            out = bended.call(fn, x)
        if not isinstance(out, torch.Tensor) or out.dim() != 3 or out.shape[-1] != x.shape[-1]:
            shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise TorchbendError(
                f"{fn} gave {shape} for audio of shape {list(x.shape)}: `torchbend bend` "
                "takes methods from audio to audio of the same length"
            )
        if not safety:
            return out[0, :, : audio.shape[-1]], "in one pass"
        stage = Safety(sample_rate)
        with torch.inference_mode():
            out = stage(out)
        return out[0, :, : audio.shape[-1]], f"in one pass; {stage.stats}"
    stream = Stream(
        bended,
        method=fn,
        block_size=block_size,
        ratio=ratio,
        sample_rate=sample_rate,
        safety=safety,
    )
    stream.reset()  # the state the trace left behind
    with torch.inference_mode():
        out = stream.process(audio, before_block=progress)
    how = f"by blocks of {block_size}, {stream.stats.realtime_factor:.0f}x realtime"
    if stream.stats.safety is not None:
        how += f"; {stream.stats.safety}"
    return out, how
