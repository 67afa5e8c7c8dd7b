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
    "BendingError",
    "BendingTracer",
    "Bias",
    "Chain",
    "Clamp",
    "FlowStep",
    "GuardError",
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
