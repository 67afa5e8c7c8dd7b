"""Discovery: find what is worth bending in a model (which channels move which descriptor of
the sound, the direction from one example sound to another, a knob for a descriptor), what a
bending did to it (the health of each node), and what a channel sounds like (audition)."""

from .audition import activation_audio, activation_image, audition, auditioning
from .health import HealthReport, HealthRow, RunStats, health
from .knob import POSITIONS, Knob, knob
from .rank import rank
from .ranking import ChannelEffect, Ranking
from .steering import steer_between, steering_vector

__all__ = [
    "POSITIONS",
    "ChannelEffect",
    "HealthReport",
    "HealthRow",
    "Knob",
    "Ranking",
    "RunStats",
    "activation_audio",
    "activation_image",
    "audition",
    "auditioning",
    "health",
    "knob",
    "rank",
    "steer_between",
    "steering_vector",
]
