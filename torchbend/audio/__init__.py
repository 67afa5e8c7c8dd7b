"""Audio for torchbend: files in and out, block streaming, a safety stage, live play with OSC."""

from ..safety import Safety, SafetyStats
from .io import FORMATS, load, resample, save
from .live import live
from .osc import OSCControl
from .stream import Stream, StreamStats

__all__ = [
    "FORMATS",
    "OSCControl",
    "Safety",
    "SafetyStats",
    "Stream",
    "StreamStats",
    "live",
    "load",
    "resample",
    "save",
]
