"""Audio for torchbend: files in and out, block streaming, a safety stage, live play with OSC."""

from .io import FORMATS, load, resample, save
from .live import live
from .osc import OSCControl
from .safety import Safety
from .safety_stats import SafetyStats
from .stream import Stream, StreamStats
from .stream_check import StreamCheck, StreamWarning
from .stream_convert import StreamingModule, make_streaming

__all__ = [
    "FORMATS",
    "OSCControl",
    "Safety",
    "SafetyStats",
    "Stream",
    "StreamCheck",
    "StreamStats",
    "StreamWarning",
    "StreamingModule",
    "live",
    "load",
    "make_streaming",
    "resample",
    "save",
]
