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
from ..callbacks.steer import Gains, Steer
from ..controls import BendingParameter
from ..errors import DiscoveryError
from .probes import Probe
from .rank import input_name, rank, restore, run_clean, stack_sounds
from .ranking import Ranking

if TYPE_CHECKING:
    from ..bended import BendedModule

__all__ = ["POSITIONS", "SPANS", "Knob", "directions", "knob"]

POSITIONS: tuple[float, ...] = tuple(i / 4 - 1 for i in range(9))
"""The knob's positions a calibration renders: -1 to 1 in nine steps."""

SPANS: tuple[float, ...] = tuple(2.0 ** (k - 4) for k in range(8))
"""The spans tried, from 1/16 to 8 by factors of 2, in multiples of the
node's RMS (the offset added at the knob's ends has an RMS over the channels of ``span`` times
the node's RMS) or, for gains, in nepers."""

LOUDNESS_LU = 3.0
"""How far from the unbent loudness a knob of another descriptor may take the sound."""

LEAST_STEPS = 3.0
"""What a knob moves its descriptor by, end to end, at least, on the median sound it is
calibrated on (a filter-bank model cannot brighten a sound with no highs: the knob need only
follow on every sound, not move each as far)."""

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
    are candidates, and at each two directions (:func:`directions`): the ``channels``
    channels that move the descriptor most, and the direction that, to first order, moves it
    and no other primary quality. Each is calibrated on the sounds (:func:`_calibrate`):
    spans of :data:`SPANS` at which the descriptor follows the knob over :data:`POSITIONS` on
    every sound (Spearman at least :data:`MONOTONIC`), moves at least :data:`LEAST_STEPS`
    on the median sound, the render stays finite and unclipped and, for another descriptor
    than the loudness, within :data:`LOUDNESS_LU` of the unbent loudness. Of the candidates
    that pass, the one that moves the sound it moves least the most per unit of its largest
    collateral change wins.

    The knob is a :class:`~torchbend.Steer` (a :class:`~torchbend.Gains` when the ranking
    probed with ``probe="scale"``: the direction is then one of log-gains, and a span counts
    in nepers) whose strength is a control named ``name``
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
    scale = ranking.probe == "scale"  # a direction of gains, not of offsets
    for lead in ranking.by_node()[:nodes]:
        node = lead.node
        reset_cache(bended.module)
        with torch.inference_mode():
            activation = bended.get_activations(f"^{re.escape(node)}$", fn=fn, **inputs)[node]
        width, rms = activation.shape[1], float(activation.float().square().mean().sqrt())
        reach = 1.0 if scale else rms
        for way, vector in directions(ranking, node, width, channels).items():
            if not bool(vector.any()) or rms == 0.0:
                tried.append(f"{node} ({way}): no channel moves it")
                continue
            unit = vector / vector.square().mean().sqrt()
            found = _calibrate(
                bended, fn, (node, unit, reach, scale), x, before, descriptor, rate, config
            )
            if found is None:
                tried.append(f"{node} ({way}): not monotonic at any span")
                continue
            span, response, loudness, collateral = found
            moved = torch.tensor([change(descriptor, v[0], v[-1]) for v in response])
            finite = moved[~moved.isnan()]
            candidate = float(finite.min()) / max(collateral, 1.0)
            if candidate > score:
                score = candidate
                control = BendingParameter(name or descriptor, 0.0, range=(-1.0, 1.0))
                kind = Gains if scale else Steer
                steer = kind(vector, strength=control, dim=1, rms=span * reach)
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


def directions(ranking: Ranking, node: str, width: int, channels: int) -> dict[str, torch.Tensor]:
    """The directions a knob tries at ``node`` (``[width]``, in the ranking's probe units),
    from the changes its channels' probes made (``ranking`` ranked by the knob's descriptor):

    - ``"leading"``: the changes of the descriptor by the ``channels`` channels that move it
      most, each at least :data:`LEADING` of the best one's (others 0);
    - ``"free"``: the changes of the descriptor by every channel, less their least-squares
      fit by the changes of the other primary qualities: to first order, a push along it
      moves the descriptor and none of them (a filter bank's brightness: the high bands up
      and the low ones down, the loudness kept); channels the fit turns against their own
      effect are left out.
    """
    rows = [r for r in ranking.rows if r.node == node]
    quality = PERCEPTIBLE[ranking.descriptor].quality
    others = [k for k in PRIMARY if k != quality]
    effects = torch.zeros(width, 1 + len(others), dtype=torch.float64)
    for r in rows:
        values = [r.changes[ranking.descriptor]] + [r.changes[k] for k in others]
        effects[r.channel] = torch.tensor(values, dtype=torch.float64).nan_to_num(0.0)
    target, collateral = effects[:, :1], effects[:, 1:]
    leading = torch.zeros(width, dtype=torch.float64)
    order = target[:, 0].abs().argsort(descending=True)[:channels]
    for c in order:
        if abs(target[c, 0]) >= LEADING * abs(target[order[0], 0]) > 0:
            leading[c] = target[c, 0]
    fit = torch.linalg.lstsq(collateral, target).solution if bool(collateral.any()) else None
    free = (target - collateral @ fit)[:, 0] if fit is not None else target[:, 0]
    # Each channel of it must move the descriptor its way by itself: a channel the fit
    # turned against its own effect would move, on a sound where it is all there is, the
    # descriptor backwards (a filter bank's second band cut on a sound with no higher ones).
    free = torch.where(free * target[:, 0] > 0, free, 0.0)
    return {"leading": leading.float(), "free": free.float()}


def _calibrate(
    bended: BendedModule,
    fn: str,
    direction: tuple[str, torch.Tensor, float, bool],
    x: torch.Tensor,
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
    knob on every sound that has it unbent (a pitch needs a pitched sound) and moves at
    least :data:`LEAST_STEPS` on the median one, and, for another descriptor than the
    loudness, every render stays within :data:`LOUDNESS_LU`. Collateral changes are counted
    on the other qualities of :data:`~torchbend.audio.perceptual.PRIMARY`.

    ``direction``: the node, the unit direction, what a span multiplies (the node's RMS for
    offsets, 1 for log-gains) and whether it is one of gains (``x * exp(position * span *
    unit)``) rather than of offsets."""
    node, unit, reach, scale = direction
    count = len(before)
    has = [math.isfinite(b[descriptor]) for b in before]
    positions = torch.tensor(POSITIONS)
    quality = PERCEPTIBLE[descriptor].quality
    best, score = None, -math.inf
    for span in SPANS:
        moves = (positions[:, None] * span * reach * unit).repeat_interleave(count, 0)
        zeros = torch.zeros_like(moves)
        probe = Probe(torch.expm1(moves), zeros, 1) if scale else Probe(zeros, moves, 1)
        bended.bend(probe, f"^{re.escape(node)}$", fn=fn)
        try:
            y = run_clean(bended, fn, x.repeat(len(POSITIONS), 1, 1))
        finally:
            restore(bended, config)
        if not bool(y.isfinite().all()) or bool((y.abs() >= 1.0).any()):
            break  # larger spans bend further: they clip too
        values = [perceive(y[i], rate) for i in range(y.shape[0])]
        at = [[values[p * count + s] for p in range(len(POSITIONS))] for s in range(count)]
        response = [[v[descriptor] for v in row] for row in at]
        loudness = [[v["loudness"] for v in row] for row in at]
        if descriptor != "loudness" and any(
            not abs(v - b["loudness"]) <= LOUDNESS_LU
            for b, row in zip(before, loudness)
            for v in row
        ):
            break  # likewise, the loudness only strays further
        if not all(_monotonic(descriptor, r) for r, h in zip(response, has) if h):
            if best is not None:
                break  # past the largest span that passes
            continue  # a small span may drown in the descriptors' noise: try a larger one
        collateral = 0.0
        for b, row in zip(before, at):
            for end in (row[0], row[-1]):
                moved = descriptor_changes(b, end)
                others = [
                    abs(moved[k]) for k in PRIMARY if k != quality and not math.isnan(moved[k])
                ]
                collateral = max(collateral, *others, 0.0)
        ends = sorted(change(descriptor, r[0], r[-1]) for r, h in zip(response, has) if h)
        if ends[len(ends) // 2] < LEAST_STEPS:
            continue  # too little to hear on most sounds
        found = ends[0] / max(collateral, 1.0)  # the sound it moves least decides
        if found >= score:
            best, score = (span, response, loudness, collateral), found
    return best


def _monotonic(descriptor: str, values: list[float]) -> bool:
    """Whether the descriptor's ``values`` rise with the knob's position (for the noisiness:
    the harmonic-to-noise ratio falls): all finite (an undefined pitch, the -inf LUFS of
    silence fail), higher at the end than at the start, and a Spearman correlation of at
    least :data:`MONOTONIC` between the position and the values read in twentieths of their
    own change from end to end (values closer than that tie, and ties share their rank: a
    knob that jumps once and stays flat is not monotonic, one that moves a sound little but
    steadily is)."""
    v = torch.tensor(values, dtype=torch.float64)
    if not bool(v.isfinite().all()):
        return False
    moved = [change(descriptor, values[0], x) for x in values]
    if moved[-1] <= 0:
        return False
    steps = torch.tensor([round(20 * m / moved[-1]) for m in moved], dtype=torch.float64)
    ranks = _average_ranks(steps)
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
