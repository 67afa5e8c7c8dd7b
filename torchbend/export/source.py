"""TorchScript source of exported modules: methods, control setters and getters, nn~'s contract.

Every line of TorchScript that torchbend writes as text is written here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ..errors import ExportError
from .arguments import (
    MISSING,
    ExportedArgument,
    default_source,
    is_optional,
    type_source,
    value_source,
)
from .plan import ExportPlan, PlannedControl
from .reader import FORMAT, VERSION

__all__ = ["CONTROLS_METHOD", "contract_source", "controls_metadata", "methods_source"]

CONTROLS_METHOD = "get_controls_json"
"""The method of an exported module that returns its controls' metadata, as JSON text."""


def methods_source(plan: ExportPlan, getters: str = "value") -> str:
    """TorchScript source of the container's methods: the traced methods, the controls'
    setters and getters, the weights' recomputation, and :data:`CONTROLS_METHOD`."""
    lines: list[str] = []
    for method in plan.methods:
        lines += _method_source(plan, method)
    for k, w in enumerate(plan.weights):
        lines += [f"def tb_rebend_{k}(self):", f"    w = self.tb_weight_base_{k}.clone()"]
        lines += [f"    w = self.tb_callback_{i}.bend_weight(w, {w.name!r})" for i in w.callbacks]
        lines += [f"    self.tb_weight_live_{k}.copy_(w)"]
    for name, c in plan.controls.items():
        lines += _control_source(name, c, getters)
    lines += _metadata_source(plan, getters)
    return "\n".join(lines) + "\n"


def controls_metadata(plan: ExportPlan, getters: str = "value") -> dict[str, Any]:
    """The controls' metadata of an export (docs/export.md, "Control metadata"): each
    control as :meth:`~torchbend.BendingParameter.describe` gives it, without its ramp (not
    exported), with the names of its setter and getter."""
    controls = []
    for name, c in plan.controls.items():
        described = c.control.describe()
        del described["ramp"]
        controls.append({**described, "setter": f"set_{name}", "getter": f"get_{name}"})
    return {"format": FORMAT, "version": VERSION, "getters": getters, "controls": controls}


def _metadata_source(plan: ExportPlan, getters: str) -> list[str]:
    """:data:`CONTROLS_METHOD`, returning the metadata as a string constant."""
    clash = CONTROLS_METHOD.removeprefix("get_")
    if clash in plan.controls:
        raise ExportError(
            f"control {clash!r} would have a getter {CONTROLS_METHOD}, the method exports keep "
            "for their controls' metadata; rename the control"
        )
    # ASCII on one line: Python's repr of it is then a string literal TorchScript reads back
    # as it is (non-ASCII characters are escaped by JSON, quotes and backslashes by repr).
    text = json.dumps(controls_metadata(plan, getters), ensure_ascii=True, separators=(",", ":"))
    return [f"def {CONTROLS_METHOD}(self) -> str:", f"    return {text!r}"]


def _method_source(plan: ExportPlan, method: str) -> list[str]:
    """``method`` with the arguments, types and defaults of the traced one, checking the
    arguments whose values its graph baked in, then running its graph."""
    where = f"{plan.bended.owner}.{method}"
    arguments = plan.arguments[method]
    params = []
    defaulted = None
    for a in arguments:
        at = f"argument {a.name!r} of {where}"
        param = f"{a.name}: {type_source(a.type)}"
        if a.default is not MISSING:
            param += f" = {default_source(a.default, a.type, at)}"
            defaulted = a.name
        elif defaulted is not None:
            raise ExportError(
                f"cannot export {where}: its argument {a.name!r} has no default but follows "
                f"{defaulted!r}, which has one; TorchScript methods cannot take keyword-only "
                "arguments. Give it a default or move it before the arguments with one."
            )
        params.append(param)
    lines = [f"def {method}(self{''.join(', ' + p for p in params)}):"]
    for a in arguments:
        lines += ["    " + line for line in _checks(where, a)]
    passed = ", ".join(a.name for a in arguments if a.in_graph)
    return [*lines, f"    return self.tb_method_{method}({passed})"]


def _checks(where: str, a: ExportedArgument) -> list[str]:
    """Checks of the argument ``a`` against the values the graph was traced for."""
    retrace = f"trace {where.rpartition('.')[2]} with the {a.name} you need before exporting"
    lines = []
    if a.traced_none is True:
        message = f"{where} was exported for {a.name}=None (its graph was traced so); {retrace}"
        lines += [f"if {a.name} is not None:", f"    raise Exception({message!r})"]
    elif a.traced_none is False:
        message = (
            f"{where} was exported for a {a.name} (its graph was traced with one), got None; "
            f"pass one, or trace {where.rpartition('.')[2]} with {a.name}=None before exporting"
        )
        lines += [f"if {a.name} is None:", f"    raise Exception({message!r})"]
    if a.values:
        graph_type = a.graph_type
        tested = " or ".join(f"{a.name} == {value_source(v, graph_type)}" for v in a.values)
        shown = " or ".join(map(repr, a.values))
        message = (
            f"{where} was exported for {a.name}={shown} only (its graph holds for that value); "
            f"{retrace}"
        )
        guard = f"not ({tested})"
        if is_optional(graph_type):  # traced with None as well: None passes
            guard = f"{a.name} is not None and {guard}"
        lines += [f"if {guard}:", f"    raise Exception({message!r})"]
    return lines


def _control_source(name: str, c: PlannedControl, getters: str) -> list[str]:
    control = c.control
    kind = {"float": "float", "int": "int", "bool": "bool"}[control.kind]
    lines = [f"def set_{name}(self, value: {kind}) -> int:"]
    if kind == "float":
        lines += ["    if math.isnan(value) or math.isinf(value):", "        return -1"]
    if kind != "bool":
        lines += _admits_source(c)
    lines += [f"    self.tb_control_{name} = value"]
    for i, path, argument, source in c.writes:
        held = f"self.tb_callback_{i}.callback" + "".join(
            f"[{part}]" if part.isdigit() else f".{part}" for part in path.split(".") if part
        )
        assignments = argument.assignments(held, source, "value")
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


def _admits_source(c: PlannedControl) -> list[str]:
    """What the control's ``set`` does with a value outside its range or outside the bounds
    of the arguments it drives: refuse it (return -1), or bring it into them if it clamps."""
    control = c.control
    tests = []
    if control.range is not None:
        low, high = control.range
        if control.kind == "int":
            low, high = math.ceil(low), math.floor(high)
        tests += [f"value < {_number(low)}", f"value > {_number(high)}"]
    for bound in control.bounds():  # as Bound.admits: the argument's value within its bounds
        value = "value"
        if (bound.scale, bound.offset) != (1.0, 0.0):
            value = f"(float(value) * {bound.scale!r} + {bound.offset!r})"
            if bound.finite:
                tests.append(f"math.isinf({value})")
        if bound.low is not None:
            tests.append(f"{value} < {_number(bound.low)}")
        if bound.high is not None:
            tests.append(f"{value} > {_number(bound.high)}")
    if not tests:
        return []
    lines = [f"    if {' or '.join(tests)}:"]
    if not control.clamp:
        return [*lines, "        return -1"]
    low, high = control.limits()
    clamped = "value"
    if not math.isinf(low):
        clamped = f"max({clamped}, {_number(low)})"
    if not math.isinf(high):
        clamped = f"min({clamped}, {_number(high)})"
    return [*lines, f"        value = {clamped}"]


def _number(x: float) -> str:
    """``x`` as TorchScript source (an int stays an int: 64-bit bounds are exact)."""
    return repr(x) if isinstance(x, int) and not isinstance(x, bool) else repr(float(x))


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
