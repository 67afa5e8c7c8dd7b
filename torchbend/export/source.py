"""TorchScript source of exported modules: methods, control setters and getters, nn~'s contract.

Every line of TorchScript that torchbend writes as text is written here, but for those with
which the setters of nn~'s text attributes read text (:mod:`.text_attributes`). The rules
controls follow (a ramp's values, the bounds of the arguments they drive, the conversion of
their values into those arguments) are not: the methods written here call the scriptable
functions of :mod:`torchbend.controls.rules`, which Python calls too, compiled into the exported
file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..controls import ControlView
from ..errors import ExportError
from .arguments import (
    MISSING,
    ExportedArgument,
    default_source,
    is_optional,
    type_source,
    value_source,
)
from .metadata import metadata_source
from .plan import ExportPlan, PlannedControl, PlannedWrite
from .tensor_attributes import held_source, tensor_control_source
from .text_attributes import attribute_type, from_text_source, text_getter_value

__all__ = ["contract_source", "methods_source"]


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
        lines += _control_source(name, c, getters, plan)
    lines += _ramps_source(plan)
    lines += metadata_source(plan, getters)
    return "\n".join(lines) + "\n"


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
    if not _ramped(plan):
        return [*lines, f"    return self.tb_method_{method}({passed})"]
    # Each call moves the ramps on, as a call of the bended module does.
    call = f"    out = self.tb_method_{method}({passed})"
    return [*lines, call, "    self.tb_advance()", "    return out"]


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


def _control_source(name: str, c: PlannedControl, getters: str, plan: ExportPlan) -> list[str]:
    control = c.control
    if control.kind == "tensor":
        return tensor_control_source(name, c, getters)
    kind = {"float": "float", "int": "int", "bool": "bool"}[control.kind]
    text = getters == "tuple" and attribute_type(control) == "str"
    if text:  # nn~ passes text; Python may pass the value itself
        lines = [f"def set_{name}(self, given: Union[{kind}, str]) -> int:"]
        lines += from_text_source(control)
    else:
        lines = [f"def set_{name}(self, value: {kind}) -> int:"]
    if kind == "float":
        lines += ["    if math.isnan(value) or math.isinf(value):", "        return -1"]
    if kind != "bool":
        lines += _admits_source(c)
    if control.ramp:
        lines += _ramp_from_source(name, control.kind, control.ramp)
    lines += [f"    self.tb_control_{name} = value"]
    for write in c.writes:
        lines += ["    " + line for line in _assignments(write, "value")]
    lines += _derive_source(c)
    if control.ramp:
        lines += [f"    self.tb_ramp_{name}()"]
        lines += _fade_source(name, c, plan)
    else:
        lines += [f"    self.tb_rebend_{k}()" for k in c.weights]
    lines += ["    return 0"]
    if text:
        lines += [
            f"def get_{name}(self) -> Tuple[str]:",
            f"    return ({text_getter_value(name, control)},)",
        ]
    elif getters == "tuple":
        lines += [
            f"def get_{name}(self) -> Tuple[{kind}]:",
            f"    return (self.tb_control_{name},)",
        ]
    else:
        lines += [f"def get_{name}(self) -> {kind}:", f"    return self.tb_control_{name}"]
    return lines


def _assignments(write: PlannedWrite, value: str) -> list[str]:
    """Statements that do what a push of the control, set to ``value`` (a variable), does to
    the argument ``write`` reaches. Scripted callbacks do not ramp while set: the call's start
    and end are the value (``tb_ramp_<control>`` writes them after, for a ramping control)."""
    held, name = held_source(write), write.argument.name
    lines = [f"{held}.{name} = {_argument_value(write, value)}"]
    if write.argument.ramps:
        now = f"float({held}.{name})"
        lines.append(f"{held}.set_call_range({name!r}, {now}, {now}, {now})")
    return lines


def _argument_value(write: PlannedWrite, value: str) -> str:
    """What the argument ``write`` reaches holds when its control is ``value`` (a variable):
    through the view that drives it, converted by :mod:`~torchbend.controls.rules`, as
    :meth:`~torchbend.callbacks.Argument.convert` does in Python."""
    argument, source = write.argument, write.source
    if isinstance(source, ControlView):
        value = f"rules.viewed(float({value}), {source.scale!r}, {source.offset!r})"
    if argument.kind is bool:
        return f"rules.bool_argument(float({value}))"
    if argument.kind is int:
        low, high = _optional(argument.low, int), _optional(argument.high, int)
        return f"rules.int_argument(int({value}), {low}, {high})"
    low, high = _optional(argument.low), _optional(argument.high)
    return f"rules.float_argument(float({value}), {low}, {high})"


def _optional(x: float | None, kind: type = float) -> str:
    """``x`` as TorchScript source of ``kind`` (an int or a float), or ``None``."""
    if x is None:
        return "None"
    return _number(int(x)) if kind is int else _number(float(x))


# -- ramps -------------------------------------------------------------------------------------
#
# A control with ``ramp=N`` spreads a change over the next N calls, as in Python
# (BendingParameter.set / advance, ControlBoard.update / advance): the arguments read along
# time go from the value at the start of each call to the value at its end, and the weights it
# bends crossfade from those before the change to those after it; the same float operations in
# the same order, so that the exported module gives Python's outputs bit for bit.


def _ramped(plan: ExportPlan) -> list[str]:
    return [name for name, c in plan.controls.items() if c.control.ramp]


def _as_float(name: str, kind: str) -> str:
    """The control's value as a float (what Python's control keeps)."""
    if kind == "bool":
        return f"(1.0 if self.tb_control_{name} else 0.0)"
    return f"float(self.tb_control_{name})"


def _ramp_from_source(name: str, kind: str, ramp: int) -> list[str]:
    """In ``set_``: the ramp starts where the one under way is (its value at rest)."""
    return [
        f"    now = rules.call_range(self.tb_start_{name}, {_as_float(name, kind)}, "
        f"self.tb_step_{name}, {ramp})[0]",
        f"    self.tb_start_{name} = now",
        f"    self.tb_step_{name} = 0",
    ]


def _fade_source(name: str, c: PlannedControl, plan: ExportPlan) -> list[str]:
    """In ``set_``: the weights it bends, bent again, crossfaded from where they are."""
    if not c.weights:
        return []
    n = c.control.ramp
    lines = [f"    self.tb_weight_before_{k}.copy_(self.tb_weight_live_{k})" for k in c.weights]
    lines += [f"    self.tb_rebend_{k}()" for k in c.weights]
    lines += [f"    self.tb_fading_{name} = False"]
    others = [
        other
        for other, o in plan.controls.items()
        if other != name and o.control.ramp and set(o.weights) & set(c.weights)
    ]
    if others:  # another fade of these weights: every fade lands (ControlBoard._settle)
        lines += [f"    if {' or '.join(f'self.tb_fading_{o}' for o in others)}:"]
        lines += ["        self.tb_settle()"]
    lines += [f"    self.tb_weight_after_{k}.copy_(self.tb_weight_live_{k})" for k in c.weights]
    lines += [f"    self.tb_fading_{name} = True"]
    lines += [_lerp_line(k, f"rules.fade_weight(0, {n})", "    ") for k in c.weights]
    return lines


def _lerp_line(k: int, weight: str, indent: str) -> str:
    return (
        f"{indent}self.tb_weight_live_{k}.copy_(torch.lerp(self.tb_weight_before_{k}, "
        f"self.tb_weight_after_{k}, {weight}))"
    )


def _ramps_source(plan: ExportPlan) -> list[str]:
    """``tb_ramp_<control>`` (the call's range into the arguments read along time),
    ``tb_settle`` and ``tb_advance`` (after each call)."""
    names = _ramped(plan)
    if not names:
        return []
    lines: list[str] = []
    for name in names:
        c = plan.controls[name]
        n = c.control.ramp
        lines += [
            f"def tb_ramp_{name}(self):",
            f"    s, e = rules.call_range(self.tb_start_{name}, "
            f"{_as_float(name, c.control.kind)}, self.tb_step_{name}, {n})",
        ]
        for write in c.writes:
            if write.argument.ramps:
                held, arg = held_source(write), write.argument.name
                start, end = _argument_value(write, "s"), _argument_value(write, "e")
                lines += [
                    f"    {held}.set_call_range({arg!r}, float({start}), float({end}), "
                    f"float({held}.{arg}))"
                ]
        lines += ["    pass"]
    faded = [name for name in names if plan.controls[name].weights]
    lines += ["def tb_settle(self):"]
    for name in faded:
        lines += [f"    if self.tb_fading_{name}:", f"        self.tb_fading_{name} = False"]
        lines += [f"        self.tb_rebend_{k}()" for k in plan.controls[name].weights]
    lines += ["    pass", "def tb_advance(self):"]
    for name in names:
        c = plan.controls[name]
        n = c.control.ramp
        lines += [
            f"    if self.tb_step_{name} < {n}:",
            f"        self.tb_step_{name} += 1",
            f"        self.tb_ramp_{name}()",
        ]
        if c.weights:
            lines += [
                f"        if self.tb_fading_{name}:",
                f"            if self.tb_step_{name} < {n}:",
            ]
            weight = f"rules.fade_weight(self.tb_step_{name}, {n})"
            lines += [_lerp_line(k, weight, "                ") for k in c.weights]
            lines += ["            else:", f"                self.tb_fading_{name} = False"]
            lines += [f"                self.tb_rebend_{k}()" for k in c.weights]
    lines += ["    pass"]
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
        span = f"{_optional(low)}, {_optional(high)}"
        tests += [f"not rules.admits(float(value), {span}, False, 1.0, 0.0)"]
    for bound in control.bounds():  # as Bound.admits
        admits = (
            f"rules.admits(float(value), {_optional(bound.low)}, {_optional(bound.high)}, "
            f"{bound.finite}, {bound.scale!r}, {bound.offset!r})"
        )
        tests.append(f"not {admits}")
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
    """``x`` as TorchScript source (an int stays an int: 64-bit bounds are exact; an infinite
    float is ``math.inf``)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return repr(x)
    return repr(float(x)) if math.isfinite(x) else ("math.inf" if x > 0 else "-math.inf")


def contract_source(
    methods: Sequence[str], attributes: Sequence[str], buffers: Sequence[str] = ()
) -> str:
    """nn~'s contract: the methods, attributes and buffer attributes it lists, and the sample
    rate."""
    return (
        "\n".join(
            [
                "def get_methods(self) -> List[str]:",
                f"    return {list(methods)!r}",
                "def get_attributes(self) -> List[str]:",
                f"    return torch.jit.annotate(List[str], {list(attributes)!r})",
                "def get_buffer_attributes(self) -> List[str]:",
                f"    return torch.jit.annotate(List[str], {list(buffers)!r})",
                "def get_sample_rate(self) -> int:",
                "    return self.sr",
                "def set_sample_rate(self, sample_rate: Optional[int]) -> None:",
                "    if sample_rate is not None:",
                "        self.sr = sample_rate",
            ]
        )
        + "\n"
    )


def _derive_source(c: PlannedControl) -> list[str]:
    """In ``set_``, after the control's values are written: ``control_changed()`` of each
    callback that derives state from an argument the control drives (a mask from ``prob``,
    draws from ``seed``), once, as the control's push calls it in Python."""
    held = dict.fromkeys(held_source(write) for write in c.writes if write.argument.derives)
    return [f"    {callback}.control_changed()" for callback in held]
