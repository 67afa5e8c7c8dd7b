"""Small models shipped with torchbend: a streamable waveform autoencoder and its weights."""

from ..errors import ModelError
from .cached_conv import CachedConv1d, CachedConvTranspose1d
from .checkpoints import MODELS, WeightsError, default_weights, load
from .pqmf import PQMF
from .tiny_rave import TinyRave

__all__ = [
    "MODELS",
    "PQMF",
    "CachedConv1d",
    "CachedConvTranspose1d",
    "ModelError",
    "TinyRave",
    "WeightsError",
    "default_weights",
    "load",
]
