"""torchbend: trace, inspect and bend the weights and activations of PyTorch modules."""

from .bended import ActivationInfo, BendedModule, Bending
from .callbacks import (
    Affine,
    BendingCallback,
    Bias,
    Chain,
    Clamp,
    Lambda,
    Mask,
    Noise,
    Normal,
    Permute,
    Scale,
)
from .callbacks.capture import Capture, InterpolateActivation, InterpolationFromCapture
from .config import BendingConfig
from .controls import BendingParameter
from .errors import (
    BendingError,
    GuardError,
    SelectionError,
    TorchbendError,
    TracingError,
)
from .tables import Table
from .tracing import BendingTracer, FlowStep

__version__ = "0.1.0"

__all__ = [
    "ActivationInfo",
    "Affine",
    "BendedModule",
    "Bending",
    "BendingCallback",
    "BendingConfig",
    "BendingError",
    "BendingParameter",
    "BendingTracer",
    "Bias",
    "Capture",
    "Chain",
    "Clamp",
    "FlowStep",
    "GuardError",
    "InterpolateActivation",
    "InterpolationFromCapture",
    "Lambda",
    "Mask",
    "Noise",
    "Normal",
    "Permute",
    "Scale",
    "SelectionError",
    "Table",
    "TorchbendError",
    "TracingError",
    "__version__",
]
