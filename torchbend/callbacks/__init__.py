"""Bending callbacks: small modules that bend a weight or an activation."""

from .ablation import Ablate, Offset, Randomize
from .affine import Affine, Bias, Scale
from .argument import Argument
from .base import BendingCallback, Chain
from .capture import Capture, InterpolateActivation, InterpolationFromCapture
from .clamp import Clamp
from .distortion import Invert, Quantize, SoftClip, Spread, Tanh
from .geometry import Flip, Roll, TimeStretch
from .lambda_ import Lambda
from .loading import callback_from_name, load_callbacks
from .mask import Mask
from .morphology import Dilate, Erode
from .noise import Noise, Normal
from .permute import Permute
from .registry import CALLBACKS
from .threshold import Threshold, ThresholdActivation

__all__ = [
    "CALLBACKS",
    "Ablate",
    "Affine",
    "Argument",
    "BendingCallback",
    "Bias",
    "Capture",
    "Chain",
    "Clamp",
    "Dilate",
    "Erode",
    "Flip",
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
    "Roll",
    "Scale",
    "SoftClip",
    "Spread",
    "Tanh",
    "Threshold",
    "ThresholdActivation",
    "TimeStretch",
    "callback_from_name",
    "load_callbacks",
]
