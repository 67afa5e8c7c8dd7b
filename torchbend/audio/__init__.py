"""Audio for torchbend: files in and out, block streaming, a safety stage, live play with OSC."""

from .io import FORMATS, load, resample, save
from .live import live
from .osc import OSCControl
from .safety import Safety
from .safety_stats import SafetyStats
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
