"""Audio for torchbend: files in and out, block streaming, live play with OSC control."""

from .io import FORMATS, load, resample, save
from .live import live
from .osc import OSCControl
from .stream import Stream, StreamStats

__all__ = [
    "FORMATS",
    "OSCControl",
    "Stream",
    "StreamStats",
    "live",
    "load",
    "resample",
    "save",
]
