"""Discovery: find what is worth bending in a model (which channels move which descriptor of
the sound, the direction from one example sound to another, a knob for a descriptor), and
what a bending did to it (the health of each node)."""

from .health import HealthReport, HealthRow, RunStats, health
from .knob import Knob, knob
from .rank import ChannelEffect, Ranking, rank
from .steering import steer_between, steering_vector

__all__ = [
    "ChannelEffect",
    "HealthReport",
    "HealthRow",
    "Knob",
    "Ranking",
    "RunStats",
    "health",
    "knob",
    "rank",
    "steer_between",
    "steering_vector",
]
