"""Steering from examples: the direction from sound A to sound B at one activation, as a Steer."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..audio.stream import reset_cache
from ..bended import BendedModule
from ..callbacks.steer import Steer
from ..controls import Control
from ..errors import BendingError, SelectionError, TorchbendError

__all__ = ["steer_between", "steering_vector"]


def steering_vector(
    bended: BendedModule,
    node: str,
    a: torch.Tensor,
    b: torch.Tensor,
    dim: int = -2,
    fn: str = "forward",
) -> tuple[torch.Tensor, float]:
    """The steering vector from sound ``a`` to sound ``b`` at activation ``node``, and the
    activation's RMS: what :class:`~torchbend.Steer` takes (``Steer(vector, rms=rms)``).

    The unbent model (original weights, no activation bending, so that a Steer already there
    does not steer its own examples) runs ``fn`` on each sound, from a clean state (its
    ``reset_cache()``, if it streams). The activation's mean over every axis but its channels
    and the axes between them and its last (time) axis is taken on each sound: one number per
    channel of a ``[batch, channels, time]`` activation, per channel and frequency of a
    ``[batch, channels, freq, time]`` one (give ``dim=1``). The vector is B's means minus A's;
    the RMS is that of every element of the activation on both sounds.

    Args:
        bended: the model, with ``fn`` traced.
        node: a pattern (as :meth:`~torchbend.BendedModule.bend` takes) that matches one
            activation of ``fn``.
        a: the sound steered from, as ``fn`` takes it (``[batch, channels, time]``); a
            ``[time]`` or ``[channels, time]`` tensor is made a batch of one.
        b: the sound steered to, likewise (its length may differ from ``a``'s).
        dim: the activation's channel axis (negative counting from the end); not its batch
            (first) axis.
        fn: the method run.

    Returns:
        ``(vector, rms)``: a tensor of the activation's sizes from ``dim`` to the axis before
        its last (``[channels]`` for ``[batch, channels, time]``), of its dtype, and a float
        in the activation's units.

    Raises:
        SelectionError: ``node`` matches no activation of ``fn``.
        BendingError: ``node`` matches several activations; the activation has no channel
            axis at ``dim``; a sound is empty or too short for the model (it refuses it, or the
            activation has no frames).

    Example:
        >>> import torch, torchbend as tb
        >>> from torchbend.discover import steering_vector
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 3, 1)))
        >>> _ = bended.trace(input=torch.zeros(1, 1, 16))
        >>> vector, rms = steering_vector(bended, "_0$", -torch.ones(16), torch.ones(16))
        >>> vector.shape, rms > 0
        (torch.Size([3]), True)
    """
    name, value_a = _activation(bended, node, a, "a", fn)
    _, value_b = _activation(bended, node, b, "b", fn)
    axis = _channel_axis(name, value_a, dim)
    last = max(axis, value_a.dim() - 2)
    averaged = [d for d in range(value_a.dim()) if not axis <= d <= last]
    if value_b.shape[axis : last + 1] != value_a.shape[axis : last + 1]:
        raise BendingError(
            f"activation '{name}' has shape {list(value_a.shape)} on sound a and "
            f"{list(value_b.shape)} on sound b: their channels (axes {axis} to {last}) differ"
        )
    means = [v.double().mean(dim=averaged) if averaged else v.double() for v in (value_a, value_b)]
    vector = (means[1] - means[0]).to(value_a.dtype)
    squares = value_a.double().pow(2).sum() + value_b.double().pow(2).sum()
    rms = math.sqrt(float(squares) / (value_a.numel() + value_b.numel()))
    return vector, rms


def steer_between(
    bended: BendedModule,
    node: str,
    a: torch.Tensor,
    b: torch.Tensor,
    strength: float | Control = 1.0,
    dim: int = -2,
    fn: str = "forward",
) -> Steer:
    """A :class:`~torchbend.Steer` that pushes activation ``node`` from sound ``a`` towards
    sound ``b``, ``strength`` in multiples of the activation's RMS (see
    :func:`steering_vector`, which takes the other arguments). Bend it with the same
    pattern: ``bended.bend(steer_between(bended, "decoder_1$", a, b), "decoder_1$")``.

    Example:
        >>> import torch, torchbend as tb
        >>> from torchbend.discover import steer_between
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 3, 1)))
        >>> _ = bended.trace(input=torch.zeros(1, 1, 16))
        >>> steer_between(bended, "_0$", -torch.ones(16), torch.ones(16), strength=0.5)
        Steer(vector=<[3]>, strength=0.5, rms=...)
    """
    vector, rms = steering_vector(bended, node, a, b, dim, fn)
    return Steer(vector, strength=strength, dim=dim, rms=rms)


def _batch(sound: torch.Tensor, which: str) -> torch.Tensor:
    if not isinstance(sound, torch.Tensor):
        raise BendingError(f"sound {which} must be a tensor, got {type(sound).__name__}")
    if sound.numel() == 0:
        raise BendingError(
            f"sound {which} is empty (shape {list(sound.shape)}): steering needs examples"
        )
    if sound.dim() == 1:
        return sound[None, None]
    if sound.dim() == 2:
        return sound[None]
    return sound


def _activation(
    bended: BendedModule, node: str, sound: torch.Tensor, which: str, fn: str
) -> tuple[str, torch.Tensor]:
    """The name and the value of the one activation ``node`` matches, on ``sound``."""
    x = _batch(sound, which)
    first = bended.view().signature(fn).first
    if first is None:
        raise BendingError(f"{fn} takes no argument to feed sound {which} to")
    inputs: dict[str, Any] = {first: x}
    module = bended.module
    reset_cache(module)
    try:
        with torch.inference_mode():
            values = bended.get_activations(node, fn=fn, bended=False, **inputs)
    except SelectionError:
        raise
    except (TorchbendError, RuntimeError, ValueError) as e:  # the model's own refusal
        raise BendingError(
            f"cannot steer from examples at {node!r}: {type(module).__name__}.{fn} refused "
            f"sound {which} of shape {list(x.shape)}; is it too short, or of a length the "
            f"model does not take? ({e})"
        ) from e
    finally:
        reset_cache(module)
    tensors = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
    if len(tensors) != 1:
        raise BendingError(
            f"pattern {node!r} matches {len(tensors)} tensor activations of {fn} "
            f"({sorted(tensors)}); steering takes one: anchor the pattern, e.g. "
            f"'^{next(iter(sorted(tensors)), node)}$'"
        )
    ((name, value),) = tensors.items()
    if value.numel() == 0:
        raise BendingError(
            f"sound {which} of shape {list(x.shape)} is too short for "
            f"{type(module).__name__}.{fn}: activation '{name}' has shape "
            f"{list(value.shape)}, no frames to average; give a longer sound"
        )
    return name, value.detach().clone()


def _channel_axis(name: str, value: torch.Tensor, dim: int) -> int:
    rank = value.dim()
    axis = dim + rank if dim < 0 else dim
    if rank < 2 or not 0 < axis < rank:
        raise BendingError(
            f"activation '{name}' has shape {list(value.shape)}, which has no channel axis at "
            f"dim={dim}: steering needs an activation [batch, channels, ...] and dim naming "
            f"its channels (an axis from 1 to {rank - 1})"
            if rank >= 2
            else f"activation '{name}' has shape {list(value.shape)}, which has no channel "
            "axis: steering needs an activation [batch, channels, ...]"
        )
    return axis
