"""Bending callbacks: small modules that bend a weight or an activation."""

from .ablation import Ablate, Bypass, Offset, Randomize, Solo
from .affine import Affine, Bias, Scale
from .argument import Argument
from .base import BendingCallback, Chain
from .capture import Capture, InterpolateActivation, InterpolationFromCapture
from .clamp import Clamp
from .distortion import Invert, Quantize, SoftClip, Spread, Tanh
from .filter import Filter
from .geometry import Flip, Roll, TimeStretch
from .lambda_ import Lambda
from .mask import Mask
from .morphology import Dilate, Erode
from .noise import Noise, Normal
from .permute import Permute
from .rewire import Rewire
from .snapshot import Snapshot
from .steer import Gains, Steer
from .threshold import Threshold, ThresholdActivation
from .time import Reverse, Unphase

__all__ = [
    "CALLBACKS",
    "Ablate",
    "Affine",
    "Argument",
    "BendingCallback",
    "Bias",
    "Bypass",
    "Capture",
    "Chain",
    "Clamp",
    "Dilate",
    "Erode",
    "Filter",
    "Flip",
    "Gains",
    "InterpolateActivation",
    "InterpolationFromCapture",
    "Invert",
    "Lambda",
    "Mask",
    "Noise",
    "Normal",
    "Offset",
    "Permute",
    "Quantize",
    "Randomize",
    "Reverse",
    "Rewire",
    "Roll",
    "Scale",
    "Snapshot",
    "SoftClip",
    "Solo",
    "Spread",
    "Steer",
    "Tanh",
    "Threshold",
    "ThresholdActivation",
    "TimeStretch",
    "Unphase",
    "callback_from_name",
    "load_callbacks",
]

# The registry is derived from the names above (every callback class listed in __all__), so it
# is imported once they are bound; callback_from_name reads it.
# isort: split
from .importing import callback_from_name, load_callbacks
from .registry import CALLBACKS
