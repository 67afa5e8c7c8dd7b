"""Audio through a bent model the way the command renders it: the model put in streaming
mode, traced on a block, then run block by block from a clean state (or in one pass), any
length in and the same length out. ``torchbend bend`` and sweeps render with these."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..bended import BendedModule
from ..errors import TorchbendError
from ..models.rates import model_ratio
from .safety import Safety, safety_stage

__all__ = [
    "STREAM_BLOCK",
    "check_audio",
    "padded",
    "ratio_of",
    "render",
    "streams",
    "trace_audio",
]

STREAM_BLOCK = 8192
"""Block size of ``bend`` for a model that streams, unless ``--block-size`` says another."""


def ratio_of(module: nn.Module) -> int:
    """Samples per frame of ``module``: its ``ratio``, or its nn~ methods' largest (a RAVE
    export's latent ratio), else 1."""
    return model_ratio(module)


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


def trace_audio(bended: BendedModule, fn: str, x: torch.Tensor) -> Any:
    """Trace ``fn`` with ``x`` as its first argument (whatever the argument's name) and return
    what it gave; the model's own error, if it refuses ``x``, as a :class:`TorchbendError`
    that says why."""
    first = bended.view().signature(fn).first
    if first is None:
        raise TorchbendError(f"{fn} takes no argument to feed audio to")
    inputs: dict[str, Any] = {first: x}
    try:
        _, out = cast(tuple[Any, Any], bended.trace(fn, return_out=True, **inputs))
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
    return out


def check_audio(out: Any, owner: str, fn: str, x: torch.Tensor) -> None:
    """Raise a :class:`TorchbendError` unless ``out``, what ``owner.fn`` gave for audio ``x``,
    is audio ``[batch, channels, time]``: what it is instead, and what would render."""
    if isinstance(out, torch.Tensor) and out.dim() == 3:
        return
    entries: dict[Any, Any] = {}
    if isinstance(out, dict):
        entries = out
    elif isinstance(out, (tuple, list)):
        entries = dict(enumerate(out))
    audio = [k for k, v in entries.items() if isinstance(v, torch.Tensor) and v.dim() == 3]
    wrap = (
        f", or wrap the model so that {fn} returns its entry {audio[0]!r} (audio of shape "
        f"{list(entries[audio[0]].shape)})"
        if audio
        else ", or wrap the model so that it does"
    )
    raise TorchbendError(
        f"{owner}.{fn} gives {_described(out)} for audio of shape {list(x.shape)}; rendering "
        "takes a method from audio [batch, channels, time] to audio of the same length: choose "
        f"one (--fn NAME, or fn=NAME in Python){wrap}"
    )


def _described(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    if isinstance(value, dict):
        return f"a dict with keys {list(value)[:8]}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def render(
    bended: BendedModule,
    audio: torch.Tensor,
    sample_rate: int,
    fn: str,
    block_size: int | None,
    progress: Any = None,
    safety: bool | Safety = False,
) -> tuple[torch.Tensor, str]:
    """``audio`` (``[channels, time]``) through traced method ``fn`` of ``bended``, and how:
    block by block as :class:`~torchbend.audio.stream.Stream` runs it, from a clean state, or
    with ``block_size=None`` in one pass over the whole file. Any length in, the same length
    out. Each channel of ``audio`` runs through the model as an item of a batch (as
    ``Stream(..., channels=1)`` runs them), unless the model declares that many ``channels``.
    With ``safety`` (``True``, or a :class:`~torchbend.audio.Safety` of your settings), the
    output goes through the safety stage (block by block with the model, or in one pass after
    it: the same, to float rounding), and the description returned ends with what it did."""
    from ..audio.stream import Stream

    ratio = ratio_of(bended.module)
    fold = audio.shape[0] > 1 and getattr(bended.module, "channels", None) != audio.shape[0]
    if block_size is None:
        x = padded(audio, ratio)
        if fold:
            x = x.transpose(0, 1)  # [channels, 1, time]: each channel an item of the batch
        with torch.inference_mode():
            out = bended.call(fn, x)
        owner = type(bended.module).__name__
        check_audio(out, owner, fn, x)
        if out.shape[-1] != x.shape[-1]:
            raise TorchbendError(
                f"{owner}.{fn} gave {list(out.shape)} for audio of shape {list(x.shape)}: "
                "rendering takes methods from audio to audio of the same length"
            )
        how = "in one pass"
        stage = safety_stage(safety, sample_rate, "the render")
        if stage is not None:
            stage.reset()
            with torch.inference_mode():
                out = stage(out)
            how += f"; {stage.stats}"
        return out[..., : audio.shape[-1]].reshape(-1, audio.shape[-1]), how
    stream = Stream(
        bended,
        method=fn,
        block_size=block_size,
        ratio=ratio,
        channels=1 if fold else None,
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
