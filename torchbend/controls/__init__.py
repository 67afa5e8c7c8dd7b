"""Named live controls: numbers (or vectors) that push their values into the callback arguments
they drive."""

from .bounds import MAX_RAMP, Bound, Number
from .parameter import (
    BendingParameter,
    Control,
    ControlView,
    Reader,
    control_of,
    is_control,
)
from .tensor_control import ControlValue, TensorParameter, checked_tensor
from .widgets import CURVES, WIDGETS, Widget

__all__ = [
    "CURVES",
    "MAX_RAMP",
    "WIDGETS",
    "BendingParameter",
    "Bound",
    "Control",
    "ControlValue",
    "ControlView",
    "Number",
    "Reader",
    "TensorParameter",
    "Widget",
    "checked_tensor",
    "control_of",
    "is_control",
]
