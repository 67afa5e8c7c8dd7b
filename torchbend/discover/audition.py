"""Audition: hear a channel of an activation soloed or bypassed, or the activation itself
over time, as a sound or as a picture."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ..callbacks import Ablate, Solo
from ..errors import DiscoveryError, did_you_mean
from .rank import input_name, restore

if TYPE_CHECKING:
    from ..bended import BendedModule

__all__ = [
    "CONTROL_RATE",
    "MODES",
    "PEAK",
    "TONE",
    "activation_audio",
    "activation_image",
    "as_audio",
    "audition",
    "auditioning",
    "check_channels",
    "check_time",
]

MODES = ("solo", "bypass")
"""What :func:`audition` does to the chosen channels: keep only them, or zero them."""

CONTROL_RATE = 200.0
"""Frames per second below which an activation is a control signal (in Hz): too slow to be
heard as a waveform, it is heard as the amplitude envelope of a :data:`TONE`."""

PEAK = 0.5
"""The peak of the sounds :func:`as_audio` makes (-6 dBFS)."""

TONE = 440.0
"""The frequency of the tone a control signal shapes, in Hz."""

Channels = int | Sequence[int] | None


def _channels(channel: Channels) -> list[int] | None:
    if channel is None:
        return None
    items: list[Any] = list(channel) if isinstance(channel, (list, tuple)) else [channel]
    found = [c for c in items if isinstance(c, int) and not isinstance(c, bool)]
    if not items or len(found) != len(items):
        raise DiscoveryError(
            f"channel is an int, a non-empty list of ints or None (every channel), got {channel!r}"
        )
    return found


def _inputs(bended: BendedModule, x: torch.Tensor, fn: str) -> dict[str, Any]:
    """``x`` as ``fn``'s first argument (a mono ``[time]`` or ``[1, time]`` made
    ``[1, 1, time]``), ``fn`` traced on it if it was not yet."""
    if not isinstance(x, torch.Tensor):
        raise DiscoveryError(f"x is the input tensor of {fn!r}, got {type(x).__name__}")
    if x.dim() < 3:
        x = x.reshape(1, 1, -1)
    inputs: dict[str, Any] = {input_name(bended, fn): x}
    if fn not in bended.traced_methods:
        bended.trace(fn, **inputs)
    return inputs


def _node_shape(bended: BendedModule, node: str, fn: str) -> list[int]:
    names = bended.activation_names(fn)
    if node not in names:
        raise DiscoveryError(
            f"no activation {node!r} in {fn!r}{did_you_mean(node, names)}; "
            f"`bended.print_activations({fn!r})` lists them"
        )
    shape = bended.activation_shape(node, fn)
    return list(shape) if shape is not None else []


def check_channels(shape: list[int], node: str, channels: list[int] | None, dim: int) -> None:
    """A :class:`DiscoveryError` unless activation ``node`` of ``shape`` has a channel axis
    ``dim`` holding every channel of ``channels``: what it has, and what would do."""
    if len(shape) < 2 or not -len(shape) <= dim < len(shape):
        raise DiscoveryError(
            f"activation {node!r} has shape {shape}: no channel axis {dim} to audition "
            f"(it needs [batch, channels, ...]; give dim= for another layout)"
        )
    size = shape[dim]
    wrong = [c for c in channels or [] if not -size <= c < size]
    if wrong:
        raise DiscoveryError(
            f"channel {wrong[0]} is out of range for activation {node!r} of shape {shape}: it "
            f"has {size} channels along axis {dim} (give 0 to {size - 1})"
        )


@contextmanager
def auditioning(
    bended: BendedModule,
    node: str,
    channel: Channels = None,
    mode: str = "solo",
    fn: str = "forward",
    dim: int = 1,
) -> Iterator[None]:
    """Within the ``with`` block, ``node`` of ``fn`` is bent on top of the bendings set:
    ``channel`` (an int or a list; ``None``: every channel) soloed (``mode="solo"``: the
    others zeroed, :class:`~torchbend.Solo`) or bypassed (``"bypass"``: zeroed,
    :class:`~torchbend.Ablate`). The bendings set before are set again after, as they were
    (``bended.bending_config()``); the wrapped model's weights are never changed.

    Notes:
        The bendings are applied again from their configuration when the block ends, as
        ``bended.reset(); bended.bend(config)`` does: a control keeps its value, a ramp under
        way ends, and a callback that draws without a seed draws anew.
    """
    if mode not in MODES:
        raise DiscoveryError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    channels = _channels(channel)
    shape = _node_shape(bended, node, fn)
    check_channels(shape, node, channels, dim)
    everything = list(range(shape[dim]))
    config = bended.bending_config()
    callback = (
        Solo(channels or everything, dim=dim)
        if mode == "solo"
        else Ablate(channels if channels is not None else everything, dim=dim)
    )
    bended.bend(callback, f"^{re.escape(node)}$", fn=fn)
    try:
        yield
    finally:
        restore(bended, config)


def audition(
    bended: BendedModule,
    x: torch.Tensor,
    node: str,
    channel: Channels = None,
    fn: str = "forward",
    mode: str = "solo",
    dim: int = 1,
) -> torch.Tensor:
    """What ``bended`` gives for ``x`` with ``channel`` of activation ``node`` soloed or
    bypassed (see :func:`auditioning`), on top of the bendings set, which stay as they were.

    Args:
        bended: the model.
        x: the first argument of ``fn`` (a mono ``[time]`` tensor is taken as
            ``[1, 1, time]``); ``fn`` is traced on it if it was not yet.
        node: an activation of ``fn`` (``bended.activation_names(fn)``).
        channel: the channel (index along ``dim``), a list of them, or ``None`` for every
            channel (soloing them all changes nothing; bypassing them all zeroes the node).
        fn: the method run.
        mode: ``"solo"`` (keep only ``channel``) or ``"bypass"`` (zero ``channel``).
        dim: the channel axis of the activation.

    Returns:
        What ``fn`` returns, run in one pass without autograd.

    Raises:
        DiscoveryError: an unknown node or mode, a node without a channel axis, a channel
            out of range (naming how many the node has).

    Example:
        >>> import torch, torchbend as tb
        >>> from torch import nn
        >>> bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 2, 1), nn.Conv1d(2, 1, 1)))
        >>> x = torch.randn(1, 1, 32)
        >>> both = tb.discover.audition(bended, x, "_0", 0) + tb.discover.audition(
        ...     bended, x, "_0", 1
        ... )
        >>> torch.allclose(both - bended.module[1].bias, bended(x), atol=1e-6)
        True
    """
    inputs = _inputs(bended, x, fn)
    with auditioning(bended, node, channel, mode, fn, dim), torch.inference_mode():
        out: torch.Tensor = bended.call(fn, **inputs)
    return out


def _activation(
    bended: BendedModule, x: torch.Tensor, node: str, fn: str, dim: int
) -> tuple[torch.Tensor, int]:
    """The (bent) activation ``node`` for ``x``, checked to have a time axis (its last) other
    than the channel axis ``dim``, and the input's length in samples."""
    inputs = _inputs(bended, x, fn)
    shape = _node_shape(bended, node, fn)
    check_time(shape, node, dim)
    with torch.inference_mode():
        value = bended.get_activations(f"^{re.escape(node)}$", fn=fn, **inputs)[node]
    return value, int(next(iter(inputs.values())).shape[-1])


def check_time(shape: list[int], node: str, dim: int) -> None:
    """A :class:`DiscoveryError` unless activation ``node`` of ``shape`` has a time axis: its
    last, of two frames or more, other than the channel axis ``dim``."""
    if len(shape) < 3 or shape[-1] < 2 or dim % len(shape) == len(shape) - 1:
        raise DiscoveryError(
            f"activation {node!r} has shape {shape}: no time axis to play (it needs "
            f"[batch, channels, time], time last with two frames or more)"
        )


def as_audio(
    activation: torch.Tensor,
    length: int,
    rate: float,
    channel: Channels = None,
    carrier: str = "tone",
    dim: int = 1,
) -> torch.Tensor:
    """An activation ``[batch, channels, ..., time]`` heard as a mono sound ``[1, length]``
    at ``rate``, spanning the same time as the input of ``length`` samples it was run on.

    One channel (``channel``, along ``dim``; the mean of several, or of every channel with
    ``None``) of the first item of the batch, averaged over any other axis, NaN and Inf
    read as 0, is linearly interpolated from its frames to ``length`` samples. Its frame
    rate (frames / input seconds) decides how it is heard:

    - at :data:`CONTROL_RATE` (200 Hz) or above, as a waveform: its mean removed (a DC
      offset is inaudible and takes the headroom) and scaled to a peak of :data:`PEAK`;
    - below, as a control signal (a latent curve, an envelope: a waveform at tens of Hz
      would be inaudible): the curve, scaled from its lowest value (0) to its highest (1),
      is the amplitude envelope of a sine at :data:`TONE` (``carrier="tone"``) or of white
      noise (``"noise"``, seeded), peaking at :data:`PEAK`. A constant curve is silence.
    """
    if carrier not in ("tone", "noise"):
        raise DiscoveryError(f"unknown carrier {carrier!r}: choose 'tone' or 'noise'")
    if length < 1 or not rate > 0:
        raise DiscoveryError(f"length and rate must be positive, got {length} and {rate}")
    channels = _channels(channel)
    value = torch.nan_to_num(activation.detach().float(), nan=0.0, posinf=0.0, neginf=0.0)
    if channels is not None:
        size = value.shape[dim]
        if not all(-size <= c < size for c in channels):
            raise DiscoveryError(f"channels {channels} out of range for {size} channels")
        value = value.index_select(dim, torch.tensor(channels) % size)
    curve = value[0].reshape(-1, value.shape[-1]).mean(0)
    frame_rate = curve.shape[-1] * rate / length
    curve = F.interpolate(curve[None, None], size=length, mode="linear", align_corners=False)[0]
    if frame_rate >= CONTROL_RATE:
        return _peak(curve - curve.mean())
    low, high = curve.min(), curve.max()
    if not high > low:
        return torch.zeros(1, length)
    envelope = (curve - low) / (high - low)
    if carrier == "tone":
        wave = torch.sin(2 * math.pi * TONE * torch.arange(length) / rate)
    else:
        wave = torch.rand(length, generator=torch.Generator().manual_seed(0)) * 2 - 1
    return PEAK * envelope * wave


def _peak(audio: torch.Tensor) -> torch.Tensor:
    peak = audio.abs().max()
    return audio * (PEAK / peak) if peak > 0 else audio


def activation_audio(
    bended: BendedModule,
    x: torch.Tensor,
    node: str,
    channel: Channels = None,
    rate: float | None = None,
    fn: str = "forward",
    carrier: str = "tone",
    dim: int = 1,
) -> tuple[torch.Tensor, int]:
    """Activation ``node`` of ``fn`` on ``x`` (bent as set) played over time: a mono sound
    ``[1, time]`` as long as ``x``, at ``x``'s sample rate, made by :func:`as_audio`
    (a waveform at or above :data:`CONTROL_RATE` frames per second, else the envelope of a
    tone or a noise), and that rate.

    Args:
        bended: the model.
        x: the input (as :func:`audition` takes it).
        node: an activation of ``fn`` with a time axis, its last (``[batch, channels,
            time]``).
        channel: one channel (index along ``dim``), a list (their mean) or ``None`` (the mean
            of every channel).
        rate: ``x``'s sample rate in Hz (default: ``bended.sample_rate``): it sets the node's
            frame rate (frames / seconds of ``x``) and the sound's rate.
        fn: the method run.
        carrier: what a control signal shapes: ``"tone"`` or ``"noise"``.
        dim: the channel axis of the activation.

    Raises:
        DiscoveryError: an unknown node, a node without a time axis (naming its shape), a
            channel out of range, no sample rate.
    """
    rate = float(rate or bended.sample_rate or 0)
    if rate <= 0:
        raise DiscoveryError("the input's sample rate is unknown: give rate= (in Hz)")
    check_channels(_node_shape(bended, node, fn), node, _channels(channel), dim)
    value, length = _activation(bended, x, node, fn, dim)
    return as_audio(value, length, rate, channel, carrier, dim), int(rate)


def activation_image(
    bended: BendedModule,
    x: torch.Tensor,
    node: str,
    path: str | Path,
    fn: str = "forward",
    rate: float | None = None,
    dim: int = 1,
) -> Path:
    """Write a PNG of activation ``node`` of ``fn`` on ``x`` (bent as set): its channels
    (rows, along ``dim``) over time (columns, in seconds of ``x`` when its ``rate`` is known,
    else in frames), for the first item of the batch, averaged over any other axis. Needs
    matplotlib (``pip install 'torchbend[plot]'``). Returns the path written.

    Raises:
        DiscoveryError: an unknown node, a node without a time axis (naming its shape).
    """
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "the activation's picture needs matplotlib: pip install 'torchbend[plot]'"
        ) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    value, length = _activation(bended, x, node, fn, dim)
    axis = dim - 1 if dim > 0 else dim  # the channel axis of one item of the batch
    item = torch.nan_to_num(value[0].detach().float().movedim(axis, 0))
    grid = item.reshape(item.shape[0], -1, item.shape[-1]).mean(1).numpy()
    rate = float(rate or bended.sample_rate or 0)
    seconds = length / rate if rate > 0 else None
    fig, ax = plt.subplots(figsize=(10, 1.5 + min(grid.shape[0], 64) * 0.06))
    extent = (0.0, seconds or grid.shape[1], grid.shape[0] - 0.5, -0.5)
    shown = ax.imshow(grid, aspect="auto", cmap="magma", interpolation="nearest", extent=extent)
    ax.set_xlabel("seconds" if seconds else "frame")
    ax.set_ylabel("channel")
    ax.set_title(f"{fn}: {node} {list(value.shape)}")
    fig.colorbar(shown, ax=ax, fraction=0.05)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
    return path
