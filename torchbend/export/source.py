"""TorchScript source of exported modules: methods, control setters and getters, nn~'s contract.

Every line of TorchScript that torchbend writes as text is written here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ExportError
from .plan import ExportPlan, PlannedControl

__all__ = ["contract_source", "methods_source"]


def methods_source(plan: ExportPlan, getters: str = "value") -> str:
    """TorchScript source of the container's methods: the traced methods, the controls'
    setters and getters, and the weights' recomputation."""
    lines: list[str] = []
    for method in plan.methods:
        gm = plan.entries[method].gm
        assert gm is not None
        args = [str(n.target) for n in gm.graph.nodes if n.op == "placeholder"]
        if any(a.startswith("*") for a in args):
            raise ExportError(f"{method} takes *args or **kwargs, which TorchScript cannot")
        lines += [
            f"def {method}(self{''.join(', ' + a for a in args)}):",
            f"    return self.tb_method_{method}({', '.join(args)})",
        ]
    for k, w in enumerate(plan.weights):
        lines += [f"def tb_rebend_{k}(self):", f"    w = self.tb_weight_base_{k}.clone()"]
        lines += [f"    w = self.tb_callback_{i}.bend_weight(w, {w.name!r})" for i in w.callbacks]
        lines += [f"    self.tb_weight_live_{k}.copy_(w)"]
    for name, c in plan.controls.items():
        lines += _control_source(name, c, getters)
    return "\n".join(lines) + "\n"


def _control_source(name: str, c: PlannedControl, getters: str) -> list[str]:
    control = c.control
    kind = {"float": "float", "int": "int", "bool": "bool"}[control.kind]
    lines = [f"def set_{name}(self, value: {kind}) -> int:"]
    if kind == "float":
        lines += ["    if math.isnan(value):", "        return -1"]
    if control.range is not None and kind != "bool":
        low, high = control.range
        if kind == "int":
            lo, hi = repr(math.ceil(low)), repr(math.floor(high))
        else:
            lo, hi = repr(float(low)), repr(float(high))
        lines += [f"    if value < {lo} or value > {hi}:"]
        lines += [
            f"        value = min(max(value, {lo}), {hi})" if control.clamp else "        return -1"
        ]
    lines += [f"    self.tb_control_{name} = value"]
    for i, argument, source in c.writes:
        assignments = argument.assignments(f"self.tb_callback_{i}.callback", source, "value")
        lines += ["    " + line for line in assignments]
    lines += [f"    self.tb_rebend_{k}()" for k in c.weights]
    lines += ["    return 0"]
    if getters == "tuple":
        lines += [
            f"def get_{name}(self) -> Tuple[{kind}]:",
            f"    return (self.tb_control_{name},)",
        ]
    else:
        lines += [f"def get_{name}(self) -> {kind}:", f"    return self.tb_control_{name}"]
    return lines


def contract_source(methods: Sequence[str], attributes: Sequence[str]) -> str:
    """nn~'s contract: the methods and attributes it lists, and the sample rate."""
    return (
        "\n".join(
            [
                "def get_methods(self) -> List[str]:",
                f"    return {list(methods)!r}",
                "def get_attributes(self) -> List[str]:",
                f"    return torch.jit.annotate(List[str], {list(attributes)!r})",
                "def get_buffer_attributes(self) -> List[str]:",
                "    return torch.jit.annotate(List[str], [])",
                "def get_sample_rate(self) -> int:",
                "    return self.sr",
                "def set_sample_rate(self, sample_rate: Optional[int]) -> None:",
                "    if sample_rate is not None:",
                "        self.sr = sample_rate",
            ]
        )
        + "\n"
    )
