"""Small models shipped with torchbend, streamable, with their weights: a transparent waveform
autoencoder (TinyRave) and a resynthesis model with a named latent (TinyDDSP)."""

from ..errors import ModelError
from .analysis import FrameAnalysis
from .cached_conv import CachedConv1d, CachedConvTranspose1d
from .checkpoints import MODELS, WeightsError, default_weights, load
from .pqmf import PQMF
from .synth import HarmonicNoiseSynth
from .tiny_ddsp import TinyDDSP
from .tiny_rave import TinyRave

__all__ = [
    "MODELS",
    "PQMF",
    "CachedConv1d",
    "CachedConvTranspose1d",
    "FrameAnalysis",
    "HarmonicNoiseSynth",
    "ModelError",
    "TinyDDSP",
    "TinyRave",
    "WeightsError",
    "default_weights",
    "load",
]
