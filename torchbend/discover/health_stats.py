"""What the health probe reads at one node: the statistics of a run, and the two runs side
by side with the problem they show."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "DEAD_STD",
    "EXPLODED_DB",
    "SILENT_RATIO",
    "HealthRow",
    "RunStats",
    "first_problem",
    "growth",
    "run_stats",
]

DEAD_STD = 1e-7
"""A channel is dead when its std is below this times the unbent node's std (or it is all 0)."""
SILENT_RATIO = 1e-6
"""A bent node is silent when its RMS is below this times the unbent node's RMS."""
EXPLODED_DB = 40.0
"""A bent node has exploded when its RMS grew by more than this many dB over the unbent one."""


@dataclass(frozen=True)
class RunStats:
    """What one run gave at one node. Mean, std and RMS are over the finite values only, so
    that one NaN does not hide the rest; ``nans`` and ``infs`` count the others."""

    mean: float
    """Mean of the finite values (NaN if there are none)."""
    std: float
    """Standard deviation (population) of the finite values."""
    rms: float
    """Root mean square of the finite values."""
    nans: int
    """How many values are NaN."""
    infs: int
    """How many values are infinite (either sign)."""
    size: int
    """How many values the node holds."""
    dead: float | None
    """Fraction of dead channels (axis 1), or ``None`` for a node without a channel axis."""


@dataclass(frozen=True)
class HealthRow:
    """One node: its unbent and bent statistics side by side, and how its RMS grew."""

    node: str
    """Graph node name (what ``bend`` patterns match)."""
    shape: tuple[int, ...] | None
    """Shape of the bent value (``None`` if it is not a tensor)."""
    bent: str
    """What is bent at this node: ``"activation"``, ``"weight"`` (a weight of the module the
    node calls), both, or ``""``."""
    unbent: RunStats | None
    """The unbent run's statistics (``None`` if the value is not a tensor)."""
    bended: RunStats | None
    """The bent run's statistics (``None`` if the value is not a tensor)."""
    growth: float | None
    """Bent RMS / unbent RMS (1 where both are 0, ``inf`` where only the unbent one is)."""

    @property
    def growth_db(self) -> float | None:
        """``growth`` in dB (``20 log10``; ``-inf`` for a silenced node)."""
        if self.growth is None:
            return None
        return 20 * math.log10(self.growth) if self.growth > 0 else -math.inf

    @property
    def problem(self) -> str | None:
        """``"NaN"`` or ``"Inf"`` (more of them bent than unbent), ``"silent"`` (bent RMS below
        :data:`SILENT_RATIO` times the unbent one), ``"exploded"`` (growth above
        :data:`EXPLODED_DB`), or ``None``."""
        a, b = self.unbent, self.bended
        if a is None or b is None:
            return None
        if b.nans > a.nans:
            return "NaN"
        if b.infs > a.infs:
            return "Inf"
        if a.rms > 0 and b.rms < SILENT_RATIO * a.rms:
            return "silent"
        db = self.growth_db
        if db is not None and db > EXPLODED_DB:
            return "exploded"
        return None


def run_stats(value: torch.Tensor, reference_std: float | None = None) -> RunStats:
    """The statistics of one tensor; channels are dead against ``reference_std`` (the unbent
    node's std, see :func:`health`; the tensor's own std if ``None``)."""
    x = value.detach()
    x = x.abs() if x.is_complex() else x
    x = x.to(torch.float64)
    finite = x[torch.isfinite(x)]
    n = finite.numel()
    mean = finite.mean().item() if n else math.nan
    std = finite.std(correction=0).item() if n else math.nan
    rms = finite.square().mean().sqrt().item() if n else math.nan
    if reference_std is None:
        reference_std = std
    return RunStats(
        mean=mean,
        std=std,
        rms=rms,
        nans=int(torch.isnan(x).sum()),
        infs=int(torch.isinf(x).sum()),
        size=x.numel(),
        dead=_dead_fraction(x, reference_std),
    )


def _dead_fraction(x: torch.Tensor, reference_std: float) -> float | None:
    if x.dim() < 2 or x.shape[1] == 0:
        return None
    channels = x.transpose(0, 1).reshape(x.shape[1], -1)
    dead = (channels == 0).all(1)
    if channels.shape[1] > 1:
        dead |= channels.std(1, correction=0) < DEAD_STD * reference_std
    return float(dead.double().mean())


def growth(unbent: RunStats, bent: RunStats) -> float:
    if unbent.rms == 0:
        return 1.0 if bent.rms == 0 else math.inf
    return bent.rms / unbent.rms


def first_problem(rows: Sequence[HealthRow]) -> HealthRow | None:
    """The first of ``rows`` (in graph order) that shows a problem, or ``None``."""
    return next((row for row in rows if row.problem is not None), None)
