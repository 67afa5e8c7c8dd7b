"""Descriptor knobs: the direction at one node that moves a descriptor most with the least
collateral change, as a Steer driven by one control from -1 to 1, calibrated on sounds."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..audio.perceptual import (
    PERCEPTIBLE,
    PRIMARY,
    change,
    check_descriptor,
    descriptor_changes,
    perceive,
)
from ..audio.stream import reset_cache
from ..callbacks.steer import Steer
from ..controls import BendingParameter
from ..errors import DiscoveryError
from .effects import Ranking
from .probes import Probe
from .rank import input_name, rank, restore, run_clean, stack_sounds

if TYPE_CHECKING:
    from ..bended import BendedModule

__all__ = ["POSITIONS", "SPANS", "Knob", "knob"]

POSITIONS: tuple[float, ...] = tuple(i / 4 - 1 for i in range(9))
"""The knob's positions a calibration renders: -1 to 1 in nine steps."""

SPANS: tuple[float, ...] = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""The spans tried, in multiples of the node's RMS: the offset added at the knob's ends has an
RMS (over the channels) of ``span`` times the node's RMS."""

LOUDNESS_LU = 3.0
"""How far from the unbent loudness a knob of another descriptor may take the sound."""

LEAST_STEPS = 4.0
"""What a knob moves its descriptor by, end to end, at least, on every sound it is calibrated
on: less is within what the descriptors' own noise undoes on another sound."""

LEADING = 0.25
"""The channels of a knob's direction move the descriptor at least this share of what the
channel that moves it most does: weaker ones would add collateral changes more than effect."""

MONOTONIC = 0.95
"""The Spearman correlation of knob position and descriptor a knob keeps on every sound it is
calibrated on: a margin over the 0.9 a knob should keep on sounds it has not met."""


@dataclass
class Knob:
    """A bending driven by one control: ``steer`` (a :class:`~torchbend.Steer` at ``node``,
    its strength the control ``control``, from -1 to 1) and what its calibration measured:
    the ``descriptor``'s value on each sound at each of :data:`POSITIONS` (``response``), the
    loudness there (``loudness``), and the largest change of another quality per sound at
    the ends (``collateral``, in perceptible steps)."""

    descriptor: str
    node: str
    fn: str
    steer: Steer
    control: BendingParameter
    span: float
    response: dict[str, list[float]] = field(default_factory=dict)
    loudness: dict[str, list[float]] = field(default_factory=dict)
    collateral: float = math.nan

    @property
    def steps(self) -> float:
        """The descriptor's change from the knob at -1 to the knob at 1, in perceptible
        steps, the median over the sounds."""
        ends = [change(self.descriptor, v[0], v[-1]) for v in self.response.values()]
        return float(torch.tensor(ends).nanmedian())

    def attach(self, bended: BendedModule) -> list[str]:
        """Bend ``bended`` with the knob (at its node); returns the keys bent."""
        return bended.bend(self.steer, f"^{re.escape(self.node)}$", fn=self.fn)

    def __repr__(self) -> str:
        return (
            f"Knob({self.descriptor!r} at {self.node!r}: control {self.control.name!r} from -1 "
            f"to 1, {self.steps:+.1f} steps end to end, collateral {self.collateral:.1f})"
        )


def knob(
    bended: BendedModule,
    sounds: torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
    descriptor: str = "brightness",
    ranking: Ranking | None = None,
    nodes: int = 3,
    channels: int = 4,
    name: str | None = None,
    fn: str = "forward",
    rate: int | None = None,
    **ranked: Any,
) -> Knob:
    """Find the bending that moves ``descriptor`` most per unit with the least collateral
    change, and return it as a knob from -1 to 1.

    From the ranking (``ranking``, or one :func:`~torchbend.discover.rank` makes with
    ``ranked`` arguments), the ``nodes`` nodes whose best channel moves the descriptor most
    are candidates; at each, the direction is the descriptor's change per channel for the
    ``channels`` channels that move it most (others 0): a push along it moves every one of
    them the way that raises the descriptor. Each direction is then calibrated on the
    sounds: the largest span of :data:`SPANS` at which the descriptor follows the knob over
    :data:`POSITIONS` on every sound (Spearman at least :data:`MONOTONIC`), the render stays
    finite and unclipped, and, for another descriptor than the loudness, the loudness stays
    within :data:`LOUDNESS_LU` of the unbent render's. Of the candidates that pass, the knob
    moving the descriptor most end to end per unit of its largest collateral change wins.

    The knob is a :class:`~torchbend.Steer` whose strength is a control named ``name``
    (default: the descriptor's name) with range -1 to 1: attach it (``knob.attach(bended)``),
    save it in a configuration, export it (the control is an nn~ attribute).

    Raises:
        DiscoveryError: no candidate gives a monotonic knob on the sounds (with the spans
            tried), or what :func:`~torchbend.discover.rank` refuses.
    """
    check_descriptor(descriptor)
    names, x = stack_sounds(sounds)
    rate = int(rate or bended.sample_rate or 0)
    if ranking is None:
        ranking = rank(bended, sounds, descriptor, fn=fn, rate=rate or None, **ranked)
    ranking = ranking.by(descriptor)
    inputs: dict[str, Any] = {input_name(bended, fn): x}
    config = bended.bending_config()
    reference = run_clean(bended, fn, x)
    before = [perceive(reference[i], rate) for i in range(len(names))]
    best: Knob | None = None
    score = -math.inf
    tried = []
    for lead in ranking.by_node()[:nodes]:
        node = lead.node
        rows = [r for r in ranking.rows if r.node == node and not math.isnan(r.effect)]
        rows = sorted(rows, key=lambda r: -abs(r.effect))[:channels]
        rows = [r for r in rows if abs(r.effect) >= LEADING * abs(rows[0].effect)]
        reset_cache(bended.module)
        with torch.inference_mode():
            activation = bended.get_activations(f"^{re.escape(node)}$", fn=fn, **inputs)[node]
        width, rms = activation.shape[1], float(activation.float().square().mean().sqrt())
        vector = torch.zeros(width)
        for r in rows:
            vector[r.channel] = r.effect
        if not bool(vector.any()) or rms == 0.0:
            tried.append(f"{node}: no channel moves it")
            continue
        unit = vector / vector.square().mean().sqrt()
        found = _calibrate(bended, fn, node, x, unit, rms, before, descriptor, rate, config)
        if found is None:
            tried.append(f"{node}: not monotonic at any span")
            continue
        span, response, loudness, collateral = found
        moved = torch.tensor([change(descriptor, v[0], v[-1]) for v in response])
        finite = moved[~moved.isnan()]
        candidate = float(finite.min()) / max(collateral, 1.0) if finite.numel() else math.nan
        if math.isnan(candidate):
            tried.append(f"{node}: no change measured")
            continue
        if candidate > score:
            score = candidate
            control = BendingParameter(name or descriptor, 0.0, range=(-1.0, 1.0))
            steer = Steer(vector, strength=control, dim=1, rms=span * rms)
            best = Knob(
                descriptor,
                node,
                fn,
                steer,
                control,
                span,
                dict(zip(names, response)),
                dict(zip(names, loudness)),
                collateral,
            )
    if best is None:
        raise DiscoveryError(
            f"no knob for {descriptor!r}: no candidate moves it monotonically on every sound "
            f"within {LOUDNESS_LU} LU ({'; '.join(tried)}); give more sounds or nodes"
        )
    return best


def _calibrate(
    bended: BendedModule,
    fn: str,
    node: str,
    x: torch.Tensor,
    unit: torch.Tensor,
    rms: float,
    before: list[dict[str, float]],
    descriptor: str,
    rate: int,
    config: Any,
) -> tuple[float, list[list[float]], list[list[float]], float] | None:
    """Of the spans that pass, the one whose change of the descriptor (end to end, on the
    sound it moves least) over its largest collateral change (at least 1 step) is largest:
    the span, each sound's descriptor and loudness at each position, and the collateral
    change; None if no span passes.

    A span passes when every render is finite and unclipped, the descriptor follows the
    knob on every sound that has it unbent (a pitch needs a pitched sound) and moves at least
    :data:`LEAST_STEPS` on each, and, for another descriptor than the loudness, every render
    stays within :data:`LOUDNESS_LU`. Collateral changes are counted on the other qualities of
    :data:`~torchbend.audio.perceptual.PRIMARY`."""
    count = len(before)
    has = [math.isfinite(b[descriptor]) for b in before]
    positions = torch.tensor(POSITIONS)
    quality = PERCEPTIBLE[descriptor].quality
    best, score = None, -math.inf
    for span in SPANS:
        offsets = (positions[:, None] * span * rms * unit).repeat_interleave(count, 0)
        bended.bend(Probe(torch.zeros_like(offsets), offsets, 1), f"^{re.escape(node)}$", fn=fn)
        try:
            y = run_clean(bended, fn, x.repeat(len(POSITIONS), 1, 1))
        finally:
            restore(bended, config)
        if not bool(y.isfinite().all()) or bool((y.abs() >= 1.0).any()):
            continue
        values = [perceive(y[i], rate) for i in range(y.shape[0])]
        at = [[values[p * count + s] for p in range(len(POSITIONS))] for s in range(count)]
        response = [[v[descriptor] for v in row] for row in at]
        loudness = [[v["loudness"] for v in row] for row in at]
        if not all(_monotonic(descriptor, r) for r, h in zip(response, has) if h):
            if best is not None:
                break  # past the largest span that passes: larger ones only bend further
            continue
        if descriptor != "loudness" and any(
            not abs(v - b["loudness"]) <= LOUDNESS_LU
            for b, row in zip(before, loudness)
            for v in row
        ):
            continue
        collateral = 0.0
        for b, row in zip(before, at):
            for end in (row[0], row[-1]):
                moved = descriptor_changes(b, end)
                others = [
                    abs(moved[k]) for k in PRIMARY if k != quality and not math.isnan(moved[k])
                ]
                collateral = max(collateral, *others, 0.0)
        ends = [change(descriptor, r[0], r[-1]) for r, h in zip(response, has) if h]
        if min(ends) < LEAST_STEPS:
            continue  # too little to hold on another sound
        found = min(ends) / max(collateral, 1.0)  # the sound it moves least decides
        if found >= score:
            best, score = (span, response, loudness, collateral), found
    return best


def _monotonic(descriptor: str, values: list[float]) -> bool:
    """Whether the descriptor's ``values`` rise with the knob's position (for the noisiness:
    the harmonic-to-noise ratio falls): all finite (an undefined pitch, the -inf LUFS of
    silence fail), and a Spearman correlation of at least :data:`MONOTONIC` between the
    position and the values read in tenths of a perceptible step from the first one (values
    closer than that tie, and ties share their rank: a knob that jumps once and stays flat
    is not monotonic)."""
    v = torch.tensor(values, dtype=torch.float64)
    if not bool(v.isfinite().all()):
        return False
    steps = torch.tensor([round(10 * change(descriptor, values[0], x)) for x in values])
    if int(steps[-1]) <= 0:
        return False
    ranks = _average_ranks(steps.double())
    positions = torch.arange(len(values), dtype=torch.float64)
    return float(torch.corrcoef(torch.stack([ranks, positions]))[0, 1]) >= MONOTONIC


def _average_ranks(v: torch.Tensor) -> torch.Tensor:
    """Ranks from 0, ties given the mean of the ranks they span."""
    order = v.argsort(stable=True)
    ranks = torch.empty_like(v)
    ranks[order] = torch.arange(len(v), dtype=v.dtype)
    for value in v.unique():
        tied = v == value
        ranks[tied] = ranks[tied].mean()
    return ranks
