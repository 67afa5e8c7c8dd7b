"""Discovery: find what is worth bending in a model (which channels move which descriptor of
the sound), what a bending did to it (the health of each node), and what a channel sounds like
(audition)."""

from .audition import activation_audio, activation_image, audition, auditioning
from .health import HealthReport, HealthRow, RunStats, health
from .rank import ChannelEffect, Ranking, rank

__all__ = [
    "ChannelEffect",
    "HealthReport",
    "HealthRow",
    "Ranking",
    "RunStats",
    "activation_audio",
    "activation_image",
    "audition",
    "auditioning",
    "health",
    "rank",
]
