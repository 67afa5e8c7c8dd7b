"""The registry of torchbend's own callbacks: the classes a configuration names by class name."""

from __future__ import annotations

from .ablation import Ablate, Offset, Randomize
from .affine import Affine, Bias, Scale
from .base import BendingCallback, Chain
from .capture import Capture, InterpolateActivation, InterpolationFromCapture
from .clamp import Clamp
from .distortion import Invert, Quantize, SoftClip, Spread, Tanh
from .filter import Filter
from .geometry import Flip, Roll, TimeStretch
from .lambda_ import Lambda
from .mask import Mask
from .morphology import Dilate, Erode
from .noise import Noise
from .permute import Permute
from .rewire import Rewire
from .snapshot import Snapshot
from .threshold import Threshold, ThresholdActivation
from .time import Reverse, Unphase

__all__ = ["ALIASES", "CALLBACKS"]

CALLBACKS: dict[str, type[BendingCallback]] = {
    cls.__name__: cls
    for cls in (
        Ablate,
        Affine,
        Bias,
        Capture,
        Chain,
        Clamp,
        Dilate,
        Erode,
        Filter,
        Flip,
        InterpolateActivation,
        InterpolationFromCapture,
        Invert,
        Lambda,
        Mask,
        Noise,
        Offset,
        Permute,
        Quantize,
        Randomize,
        Reverse,
        Rewire,
        Roll,
        Scale,
        Snapshot,
        SoftClip,
        Spread,
        Tanh,
        Threshold,
        ThresholdActivation,
        TimeStretch,
        Unphase,
    )
}
"""Every callback class ``torchbend.callbacks`` exports, by class name (``Normal`` is an alias
of ``Noise``); the identity and scripting tests run over all of them."""

ALIASES: dict[str, type[BendingCallback]] = {"Normal": Noise}
"""Other names of callbacks of :data:`CALLBACKS`."""
