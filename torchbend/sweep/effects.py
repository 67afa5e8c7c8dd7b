"""The descriptor effects of one render of a sweep: how much brighter, louder, higher... it is
than the unbent render of the same input, in perceptible steps.

For each descriptor of :data:`torchbend.audio.perceptual.NAMES`, the effect
``effect_<name>`` is :func:`torchbend.audio.perceptual.change` from the unbent render's value
to the render's (both read by :func:`~torchbend.audio.perceptual.perceive` on the mono mix):
+1 is one step more of the name (a centroid 15 % higher for ``effect_brightness``, a semitone
up for ``effect_pitch``, 1 LU louder for ``effect_loudness``), -1 one step less. An effect
that is undefined (no voiced frame to take a pitch of, a silent render's centroid, a sound
shorter than the descriptors read) is ``None``: JSON, and so the manifest, holds no NaN.

The unbent render of each input is described once (:func:`describe`, by the driver of a
sweep, which hands the values to every worker); each render is described once more, and
compared (:func:`effects`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from ..audio.perceptual import NAMES, descriptor_changes, perceive, shortest_sound

__all__ = ["EFFECTS", "PREFIX", "describe", "effects"]

PREFIX = "effect_"
"""What the name of each effect starts with, before the descriptor's name."""

EFFECTS: tuple[str, ...] = tuple(PREFIX + name for name in NAMES)
"""The names of the effects :func:`effects` gives, in its order."""

_LARGEST = float(torch.finfo(torch.float32).max)


def describe(audio: torch.Tensor, sample_rate: int) -> dict[str, float] | None:
    """:func:`~torchbend.audio.perceptual.perceive` of the mono mix of ``audio``
    (``[channels, time]`` or ``[time]``; non-finite samples read as 0, as the measures read
    them), or ``None`` when it is shorter than the descriptors read."""
    x = audio.detach().to("cpu", torch.float64)
    if x.shape[-1] < shortest_sound(sample_rate):
        return None
    x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).clamp(-_LARGEST, _LARGEST)
    return perceive(x.reshape(-1, x.shape[-1]).mean(0), sample_rate)


def effects(
    audio: torch.Tensor, sample_rate: int, unbent: Mapping[str, float] | None
) -> dict[str, float | None]:
    """The effect of each descriptor on ``audio`` against ``unbent`` (what :func:`describe`
    gave for the unbent render of the same input), by the names of :data:`EFFECTS`.

    >>> from torchbend.audio.quality import sine
    >>> low = sine(440, 0.5, 44100, dbfs=-12.0)
    >>> high = sine(880, 0.5, 44100, dbfs=-12.0)
    >>> moved = effects(high, 44100, unbent=describe(low, 44100))
    >>> round(moved["effect_pitch"], 1), round(moved["effect_brightness"], 1)
    (12.0, 5.0)
    """
    after = describe(audio, sample_rate) if unbent is not None else None
    if unbent is None or after is None:
        return dict.fromkeys(EFFECTS)
    moved = descriptor_changes(unbent, after)
    return {PREFIX + name: step if math.isfinite(step) else None for name, step in moved.items()}
