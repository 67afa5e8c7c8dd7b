"""Whether a model's named latent channels mean something: each walked over its range moves its
own descriptor monotonically, and more than it moves the others."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..audio.descriptors import character_and_pitch, pitch_shift
from ..audio.quality import loudness_lufs
from ..errors import SweepError
from .richness import THRESHOLDS, normalised_change

__all__ = [
    "CHANNEL_DESCRIPTORS",
    "MONOTONIC",
    "STEPS",
    "LatentWalk",
    "latent_walks",
    "spearman",
]

CHANNEL_DESCRIPTORS: dict[str, str] = {
    "pitch": "pitch_hz",
    "loudness": "loudness_lufs",
    "brightness": "centroid_hz",
    "noisiness": "hnr_db",
}
"""The descriptor (a name of :func:`torchbend.audio.descriptors.describe`) that a latent channel
of each name should move. Noisiness moves the harmonic-to-noise ratio the other way."""

STEPS = 9
"""Values of each walk, evenly spaced over the range, ends included."""

MONOTONIC = 0.9
"""The least ``|Spearman|`` between a channel's values and its descriptor for the channel to
move it monotonically."""


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (ties share their mean rank); NaN when
    a value is not finite or either is constant."""
    x, y = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    if not bool(x.isfinite().all() and y.isfinite().all()):
        return math.nan

    def ranks(v: torch.Tensor) -> torch.Tensor:
        order = (v[:, None] > v[None]).sum(1).double()
        ties = (v[:, None] == v[None]).sum(1).double()
        return order + (ties - 1) / 2

    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    norm = float(rx.norm() * ry.norm())
    return float((rx * ry).sum()) / norm if norm > 0 else math.nan


@dataclass(frozen=True)
class LatentWalk:
    """One named channel walked over its range on one sound, and what each descriptor did."""

    channel: str
    """The channel's name (a key of :data:`CHANNEL_DESCRIPTORS`)."""
    sound: str
    """The sound encoded."""
    values: tuple[float, ...]
    """The values the channel was set to, on every frame."""
    descriptors: dict[str, tuple[float, ...]]
    """Each descriptor of the decoded renders, one value per step."""
    pitch_tracks: tuple[torch.Tensor, ...] = field(default=(), repr=False, compare=False)
    """The pitch track of each step's render (:func:`~torchbend.audio.descriptors.
    pitch_track`): the pitch's effect is read frame by frame from them."""

    @property
    def descriptor(self) -> str:
        """The descriptor the channel should move."""
        return CHANNEL_DESCRIPTORS[self.channel]

    @property
    def rho(self) -> float:
        """Spearman of the channel's values and its descriptor (NaN if undefined somewhere)."""
        return spearman(self.values, self.descriptors[self.descriptor])

    def effect(self, name: str) -> float:
        """How far descriptor ``name`` moves over the walk (from its lowest to its highest
        finite value), in units of its perceptible threshold (see
        :func:`~torchbend.sweep.richness.normalised_change`); 0 when fewer than two values are
        finite. The pitch's move is the largest between two steps frame by frame
        (:func:`~torchbend.audio.descriptors.pitch_shift`), where the tracks are known: a
        melody whose voiced frames change does not read as a move."""
        if name == "pitch_hz" and self.pitch_tracks:
            shifts = [
                abs(pitch_shift(a, b))
                for i, a in enumerate(self.pitch_tracks)
                for b in self.pitch_tracks[i + 1 :]
            ]
            finite_shifts = [v for v in shifts if math.isfinite(v)]
            return max(finite_shifts, default=0.0) / THRESHOLDS[name][1]
        finite = [v for v in self.descriptors[name] if math.isfinite(v)]
        if len(finite) < 2:
            return 0.0
        return normalised_change(name, min(finite), max(finite))

    @property
    def strongest_other(self) -> tuple[str, float]:
        """The other descriptor (of :data:`CHANNEL_DESCRIPTORS`' values) moved most, and by
        how much."""
        others = [d for d in CHANNEL_DESCRIPTORS.values() if d != self.descriptor]
        return max(((d, self.effect(d)) for d in others), key=lambda pair: pair[1])

    @property
    def holds(self) -> bool:
        """Monotonic (``|rho| >= MONOTONIC``), moving its own descriptor perceptibly (by one
        threshold at least) and more than any other, in units of their thresholds."""
        own = self.effect(self.descriptor)
        return abs(self.rho) >= MONOTONIC and own >= 1.0 and own > self.strongest_other[1]


def latent_walks(
    model: torch.nn.Module,
    sounds: Mapping[str, torch.Tensor],
    rate: int,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    steps: int = STEPS,
) -> list[LatentWalk]:
    """Walk each named channel of ``model.latent_names`` that :data:`CHANNEL_DESCRIPTORS`
    knows over its range, on each of ``sounds``: encode the sound, set the channel to each
    value on every frame, decode, and describe the render.

    Args:
        model (Module): with ``encode`` (``[batch, 1, time]`` to ``[batch, channels,
            frames]``), ``decode`` and ``latent_names``.
        sounds (Mapping): name to mono signal ``[time]``, all of one length ``model`` takes.
        rate (int): sample rate in Hz.
        ranges (Mapping): channel name to ``(low, high)``; default the model's
            ``latent_ranges`` if it has them, else from the 5th to the 95th percentile of
            the channel over ``sounds``.
        steps (int): values per walk.

    Returns:
        One :class:`LatentWalk` per channel and sound, channels in the latent's order.
    """
    names = list(getattr(model, "latent_names", []))
    channels = [(i, n) for i, n in enumerate(names) if n in CHANNEL_DESCRIPTORS]
    if not channels:
        raise SweepError(
            f"{type(model).__name__} names no latent channel among "
            f"{', '.join(CHANNEL_DESCRIPTORS)} (its latent_names: {names or 'none'})"
        )
    keys = list(sounds)
    x = torch.stack([sounds[k].reshape(-1) for k in keys])[:, None]
    walks = []
    with torch.inference_mode():
        z = model.encode(x)  # type: ignore[operator]
        ranges = dict(ranges or getattr(model, "latent_ranges", None) or {})
        for index, channel in channels:
            if channel not in ranges:  # what the sounds span
                low, high = torch.quantile(z[:, index].flatten(), torch.tensor([0.05, 0.95]))
                ranges[channel] = (float(low), float(high))
        for index, channel in channels:
            low, high = ranges[channel]
            values = torch.linspace(low, high, steps).tolist()
            described: list[list[dict[str, float]]] = [[] for _ in keys]
            tracks: list[list[torch.Tensor]] = [[] for _ in keys]
            for value in values:
                moved = z.clone()
                moved[:, index] = value
                y = model.decode(moved)[:, 0]  # type: ignore[operator]
                for i in range(len(keys)):
                    values_now, track = character_and_pitch(y[i], rate)
                    described[i].append({**values_now, "loudness_lufs": loudness_lufs(y[i], rate)})
                    tracks[i].append(track)
            for i, key in enumerate(keys):
                table = {d: tuple(step[d] for step in described[i]) for d in described[i][0]}
                walks.append(LatentWalk(channel, key, tuple(values), table, tuple(tracks[i])))
    return walks
