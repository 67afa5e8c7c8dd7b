"""What an effect map holds: each channel's change of every descriptor, ranked by one of them,
with its specificity and its ratio to random directions at its node."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..audio.perceptual import NAMES, PERCEPTIBLE, PRIMARY, check_descriptor

__all__ = ["ChannelEffect", "Ranking", "effect_row", "ranked"]


@dataclass(frozen=True)
class ChannelEffect:
    """What probing one channel of one node does: ``changes`` maps every descriptor
    (:data:`torchbend.audio.perceptual.NAMES`) to its signed change in perceptible steps per
    probe (the slope between the ``+`` and ``-`` probes, averaged over the sounds);
    ``effect`` is the ranked descriptor's, ``specificity`` its size over the largest change of
    another quality of :data:`~torchbend.audio.perceptual.PRIMARY` (loudness, brightness,
    pitch, noisiness: the bandwidth is no collateral of the brightness, nor the flatness of
    the noisiness), ``random_ratio``
    its size over that of a random direction of the same norm at the same node."""

    node: str
    channel: int
    effect: float
    specificity: float
    random_ratio: float
    changes: dict[str, float]


@dataclass
class Ranking:
    """The channels probed, most effective first (NaN effects last), and what was measured."""

    descriptor: str
    probe: str
    amount: float
    sounds: list[str]
    rows: list[ChannelEffect]
    random: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per node, each descriptor's change (size, steps per probe) along random directions."""

    def by(self, descriptor: str) -> Ranking:
        """The same probes ranked by another descriptor (every change was measured: nothing
        is rendered again)."""
        check_descriptor(descriptor)
        rows = [
            effect_row(r.node, r.channel, r.changes, descriptor, self.random[r.node])
            for r in self.rows
        ]
        return Ranking(
            descriptor, self.probe, self.amount, self.sounds, ranked(rows), dict(self.random)
        )

    def top(self, n: int = 10) -> list[ChannelEffect]:
        """The ``n`` most effective channels."""
        return self.rows[:n]

    def by_node(self) -> list[ChannelEffect]:
        """The best channel of each node, in rank order."""
        seen: set[str] = set()
        best = []
        for row in self.rows:
            if row.node not in seen:
                seen.add(row.node)
                best.append(row)
        return best

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per row (``pandas.DataFrame(ranking.to_records())``)."""
        return [
            {
                "node": r.node,
                "channel": r.channel,
                "effect": r.effect,
                "specificity": r.specificity,
                "random_ratio": r.random_ratio,
                **{f"change_{name}": r.changes[name] for name in NAMES},
            }
            for r in self.rows
        ]

    def table(self, n: int = 20) -> Any:
        """The ``n`` first rows as a :class:`~torchbend.Table`."""
        from ..engine.tables import Table

        others = [name for name in NAMES if name != self.descriptor]
        rows = [
            [i + 1, r.node, r.channel, _num(r.effect), _num(r.specificity), _num(r.random_ratio)]
            + [_num(r.changes[name]) for name in others]
            for i, r in enumerate(self.rows[:n])
        ]
        headers = ["rank", "node", "channel", self.descriptor, "specificity", "vs random"]
        return Table(rows, headers + others)

    def picture(self, path: str) -> None:
        """Write a PNG: each node's best channel's change of every descriptor (nodes x
        descriptors, steps per probe) and the ranked descriptor's change of every channel of
        each node (nodes x channels)."""
        from .picture import draw_ranking

        nodes = [row.node for row in self.by_node()]
        best = np.array([[abs(row.changes[n]) for n in NAMES] for row in self.by_node()])
        width = 1 + max((row.channel for row in self.rows), default=0)
        channels = np.full((len(nodes), width), math.nan)
        for row in self.rows:
            channels[nodes.index(row.node), row.channel] = row.effect
        title = f"{self.descriptor}: change per channel (steps, {self.probe} probe)"
        draw_ranking(nodes, best, channels, title, path)


def _num(value: float) -> str:
    return "nan" if math.isnan(value) else "inf" if math.isinf(value) else f"{value:.2f}"


def effect_row(
    node: str, channel: int, changes: dict[str, float], descriptor: str, random: dict[str, float]
) -> ChannelEffect:
    effect = changes[descriptor]
    quality = PERCEPTIBLE[descriptor].quality
    others = [abs(changes[k]) for k in PRIMARY if k != quality and not math.isnan(changes[k])]
    largest = max(others, default=0.0)
    specificity = abs(effect) / largest if largest > 0 else math.inf
    control = random[descriptor]
    ratio = abs(effect) / control if control > 0 else math.inf
    return ChannelEffect(node, channel, effect, specificity, ratio, changes)


def ranked(rows: list[ChannelEffect]) -> list[ChannelEffect]:
    return sorted(rows, key=lambda r: -abs(r.effect) if not math.isnan(r.effect) else math.inf)
