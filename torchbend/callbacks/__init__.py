"""Bending callbacks: small modules that bend a weight or an activation."""

from .affine import Affine, Bias, Scale
from .base import BendingCallback, Chain
from .clamp import Clamp
from .lambda_ import Lambda
from .mask import Mask
from .noise import Noise, Normal
from .permute import Permute

__all__ = [
    "Affine",
    "BendingCallback",
    "Bias",
    "Chain",
    "Clamp",
    "Lambda",
    "Mask",
    "Noise",
    "Normal",
    "Permute",
    "Scale",
]
