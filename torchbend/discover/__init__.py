"""Discovery: find what is worth bending in a model (which channels move which descriptor of
the sound), and what a bending did to it (the health of each node)."""

from .health import HealthReport, HealthRow, RunStats, health
from .rank import ChannelEffect, Ranking, rank

__all__ = ["ChannelEffect", "HealthReport", "HealthRow", "Ranking", "RunStats", "health", "rank"]
