"""The demo: the shipped character model bent several ways on the shipped sounds."""

from .latent_walk import WALKS, OnChannel
from .showcase import BENDINGS, MODEL, SOUNDS, run_demo

__all__ = ["BENDINGS", "MODEL", "SOUNDS", "WALKS", "OnChannel", "run_demo"]
