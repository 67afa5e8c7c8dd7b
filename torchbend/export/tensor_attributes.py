"""Tensor controls in exported files: their setters and getters, and nn~'s buffer attributes.

A :class:`~torchbend.TensorParameter` is exported as a buffer ``tb_control_<name>`` that
``set_<name>(tensor)`` copies into the vectors it drives. In an nn~ file it is also a buffer
attribute (type code 5): a patch's ``[set NAME ARRAY(`` makes nn~ call
``set_buffer_attribute("NAME#0", values, sample_rate)`` with the array's values, which
:func:`~torchbend.controls.rules.tensor_from_buffer` resamples to the control's length, then
``set_NAME("ARRAY")`` with the array's name (docs/export.md, "Tensor controls").
"""

from __future__ import annotations

import torch

from ..controls import TensorParameter
from .plan import ExportPlan, PlannedControl, PlannedTensorWrite, PlannedWrite

__all__ = [
    "add_buffer_state",
    "buffer_attributes",
    "buffer_source",
    "held_source",
    "tensor_control_source",
]


def held_source(write: PlannedWrite | PlannedTensorWrite) -> str:
    """The scripted callback a write reaches: callback ``write.callback`` of the export, or
    the one it holds at ``write.path``."""
    return f"self.tb_callback_{write.callback}.callback" + "".join(
        f"[{part}]" if part.isdigit() else f".{part}" for part in write.path.split(".") if part
    )


def buffer_attributes(plan: ExportPlan) -> list[str]:
    """The names nn~'s ``get_buffer_attributes()`` lists: ``<name>#0`` per tensor control."""
    return [f"{name}#0" for name, c in plan.controls.items() if c.control.kind == "tensor"]


def tensor_control_source(name: str, c: PlannedControl, getters: str) -> list[str]:
    """``set_<name>`` and ``get_<name>`` of tensor control ``name``. The setter takes a 1-D
    float tensor of the control's length, of finite values (else it returns -1 and keeps the
    value); for nn~ (``getters="tuple"``) it also takes the name of the Pd array or Max
    ``buffer~`` whose values came through ``set_buffer_attribute``, which the getter gives."""
    length = c.control.describe()["length"]
    nntilde = getters == "tuple"
    if nntilde:
        lines = [
            f"def set_{name}(self, given: Union[str, torch.Tensor]) -> int:",
            "    if isinstance(given, str):",
            f"        self.tb_array_{name} = given",
            "        return 0",
            "    value = given",
        ]
    else:
        lines = [f"def set_{name}(self, value: torch.Tensor) -> int:"]
    lines += [
        f"    if value.dim() != 1 or value.numel() != {length} or not value.is_floating_point():",
        "        return -1",
        "    if not bool(torch.isfinite(value).all()):",
        "        return -1",
        f"    self.tb_control_{name}.copy_(value)",
    ]
    for write in c.tensor_writes:
        lines += [f"    {held_source(write)}.set_{write.name}(self.tb_control_{name})"]
    lines += [f"    self.tb_rebend_{k}()" for k in c.weights]
    lines += ["    return 0"]
    if nntilde:
        return [
            *lines,
            f"def get_{name}(self) -> Tuple[str]:",
            f"    return (self.tb_array_{name},)",
        ]
    return [
        *lines,
        f"def get_{name}(self) -> torch.Tensor:",
        f"    return self.tb_control_{name}.clone()",
    ]


def add_buffer_state(container: torch.nn.Module, plan: ExportPlan) -> None:
    """Give an nn~ container what its buffer attributes keep: per tensor control, the name
    of the array last set (``tb_array_<name>``) and the initial value ``clear`` restores
    (``tb_default_<name>``)."""
    for name, c in plan.controls.items():
        if isinstance(c.control, TensorParameter):
            setattr(container, f"tb_array_{name}", "")
            container.register_buffer(f"tb_default_{name}", c.control.default.clone())


def buffer_source(plan: ExportPlan) -> str:
    """nn~'s ``set_buffer_attribute`` and ``clear_buffer_attribute`` for the tensor controls
    of ``plan`` (none without one): a buffer's values resampled to the control's length, or
    the control's initial value again. Both return 0, or -1 for a name that is no buffer
    attribute and a buffer that is empty or holds NaN or infinite values (the value kept)."""
    tensors = {name: c for name, c in plan.controls.items() if c.control.kind == "tensor"}
    if not tensors:
        return ""
    lines = ["def set_buffer_attribute(self, name: str, values: torch.Tensor, sr: int) -> int:"]
    for name, c in tensors.items():
        length = c.control.describe()["length"]
        lines += [
            f"    if name == {name + '#0'!r}:",
            f"        taken = rules.tensor_from_buffer(values, {length})",
            "        if taken is None:",
            "            return -1",
            f"        return self.set_{name}(taken)",
        ]
    lines += ["    return -1", "def clear_buffer_attribute(self, name: str) -> int:"]
    for name in tensors:
        lines += [
            f"    if name == {name + '#0'!r}:",
            f'        self.tb_array_{name} = ""',
            f"        return self.set_{name}(self.tb_default_{name})",
        ]
    return "\n".join([*lines, "    return -1"]) + "\n"
