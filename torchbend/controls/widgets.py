"""Widgets: how a host should draw a control (kind, unit, curve, label, group, menu choices)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import BendingError, did_you_mean
from .bounds import Number, finite_float

__all__ = ["CURVES", "WIDGETS", "Widget", "resolve_widget"]


WIDGETS = ("knob", "slider", "toggle", "menu", "number", "array")
"""The kinds of :class:`Widget`: a knob, a slider, a toggle (bool controls), a menu (int
controls, the index of one of its ``choices``), a number box and an array (tensor controls:
a table of values, a Pd array)."""

CURVES = ("linear", "log", "exp")
"""How a widget spreads a control's range over its travel: evenly (``"linear"``); evenly in
ratio (``"log"``: as much travel from 20 to 200 Hz as from 2 to 20 kHz; a range of positive
numbers); or finely at the low end of any range (``"exp"``: a host may use a power curve,
``low + (high - low) * t ** 2`` for a travel ``t`` from 0 to 1)."""


@dataclass(frozen=True, repr=False)
class Widget:
    """How a host should draw a control: hints for an interface, given to
    :class:`BendingParameter` as ``widget=``.

    A control's widget is saved with it in configurations, listed in tables of controls
    (:func:`torchbend.engine.tables.controls_table`), sent to OSC clients that ask
    (``/torchbend/controls``) and written into exported TorchScript and nn~ files
    (docs/export.md, "Control metadata"). Hints only: the values a
    control takes are set by its ``range``, ``clamp`` and the arguments it drives, never by
    its widget.

    Fields left out are derived from the control (:attr:`BendingParameter.widget` holds the
    result): a bool control is a toggle, an int control a slider (a menu, given ``choices``), a
    float control a knob; the label is the control's name.

    Example:
        >>> import torchbend as tb
        >>> from torchbend.controls import Widget
        >>> cutoff = tb.BendingParameter(
        ...     "cutoff", 1000.0, range=(20.0, 20000.0), widget=Widget(unit="Hz", curve="log")
        ... )
        >>> cutoff.widget
        Widget('knob', unit='Hz', curve='log', label='cutoff')
        >>> wave = tb.BendingParameter(
        ...     "wave", 0, range=(0, 2), widget=Widget(choices=("sine", "square", "saw"))
        ... )
        >>> wave.widget.kind, tb.BendingParameter("mute", False).widget.kind
        ('menu', 'toggle')
    """

    kind: str | None = None
    """One of :data:`WIDGETS`; ``None``: derived from the control."""
    unit: str = ""
    """The unit shown with the value (``"Hz"``, ``"dB"``, ``"s"``); ``""``: none."""
    curve: str = "linear"
    """How the widget spreads the control's range over its travel: one of :data:`CURVES`."""
    label: str | None = None
    """The name shown; ``None``: the control's name."""
    group: str = ""
    """The group a host shows the control in (a panel, a tab); ``""``: none."""
    choices: tuple[str, ...] = ()
    """A menu's entries: the int control's value ``i`` selects ``choices[i]``."""
    step: float | None = None
    """The widget's increment; ``None``: any value (any whole value for an int control)."""

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in WIDGETS:
            raise BendingError(
                f"Widget: kind is one of {', '.join(map(repr, WIDGETS))}, got {self.kind!r}"
                + (did_you_mean(self.kind, WIDGETS) if isinstance(self.kind, str) else "")
            )
        if self.curve not in CURVES:
            raise BendingError(
                f"Widget: curve is one of {', '.join(map(repr, CURVES))}, got {self.curve!r}"
                + (did_you_mean(self.curve, CURVES) if isinstance(self.curve, str) else "")
            )
        for field in ("unit", "group"):
            if not isinstance(getattr(self, field), str):
                raise BendingError(f"Widget: {field} is a string, got {getattr(self, field)!r}")
        if self.label is not None and (not isinstance(self.label, str) or not self.label):
            raise BendingError(f"Widget: label is a non-empty string or None, got {self.label!r}")
        choices = self.choices
        if isinstance(choices, (str, bytes)) or not isinstance(choices, (tuple, list)):
            raise BendingError(
                f"Widget: choices are a list of strings (a menu's entries), got {choices!r}"
            )
        if not all(isinstance(c, str) and c for c in choices) or len(set(choices)) < len(choices):
            raise BendingError(
                f"Widget: choices are distinct non-empty strings (a menu's entries), got "
                f"{list(choices)!r}"
            )
        object.__setattr__(self, "choices", tuple(choices))
        if choices and self.kind not in (None, "menu"):
            raise BendingError(
                f"Widget: choices are the entries of a menu, not of a {self.kind}; give "
                "kind='menu' (or leave it out)"
            )
        if self.kind == "menu" and not choices:
            raise BendingError("Widget: a menu needs its choices, e.g. choices=('sine', 'saw')")
        step = self.step
        if step is not None and (finite_float(step) is None or not step > 0):
            raise BendingError(f"Widget: step is a finite number > 0 or None, got {step!r}")

    def to_dict(self) -> dict[str, Any]:
        """The widget as JSON-able data: its fields, ``choices`` as a list."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["choices"] = list(self.choices)
        return data

    def __repr__(self) -> str:
        args = [] if self.kind is None else [repr(self.kind)]
        for f in dataclasses.fields(self)[1:]:
            value = getattr(self, f.name)
            if value != f.default:
                args.append(f"{f.name}={value!r}")
        return f"Widget({', '.join(args)})"


def resolve_widget(
    widget: Widget | None, name: str, kind: str, range: tuple[Number, Number] | None
) -> Widget:
    """``widget`` with its left-out fields derived from the control ``name`` of ``kind`` and
    ``range``, checked against them."""
    where = f"control {name!r}"
    if widget is None:
        widget = Widget()
    elif not isinstance(widget, Widget):
        raise BendingError(
            f"{where}: widget is a Widget(...) of interface hints (from torchbend.controls "
            f"import Widget), got {type(widget).__name__}: {widget!r}"
        )
    derived = widget.kind
    if derived is None:
        derived = (
            "menu"
            if widget.choices
            else {"bool": "toggle", "int": "slider", "tensor": "array"}.get(kind, "knob")
        )
    if (kind == "tensor") != (derived == "array"):
        raise BendingError(
            f"{where}: an array draws tensor controls only, and a tensor control is drawn as "
            f"an array; {name!r} is a {kind}, got widget kind {derived!r}"
        )
    if kind == "bool" and derived != "toggle":
        raise BendingError(f"{where} is a bool, drawn as a toggle; got widget kind {derived!r}")
    if kind != "bool" and derived == "toggle":
        raise BendingError(f"{where}: a toggle draws bool controls, and {name!r} is a {kind}")
    if derived == "menu":
        if kind != "int":
            raise BendingError(
                f"{where}: a menu draws an int control (the index of a choice), and {name!r} "
                f"is a {kind}; give it an int value"
            )
        expected = (0, len(widget.choices) - 1)
        if range is None or tuple(range) != expected:
            raise BendingError(
                f"{where}: a menu of {len(widget.choices)} choices takes values 0 to "
                f"{expected[1]}; give the control range={expected}, got range={range}"
            )
    if derived in ("toggle", "menu") and (widget.curve != "linear" or widget.step is not None):
        raise BendingError(f"{where}: a {derived} has no curve or step; leave them out")
    if widget.curve != "linear" and range is None:
        raise BendingError(
            f"{where}: curve {widget.curve!r} spreads a range over the widget; give the "
            "control a range=(low, high)"
        )
    if widget.curve == "log" and range is not None and not range[0] > 0:
        raise BendingError(
            f"{where}: a log curve needs a range of positive numbers, got range={range}; "
            "curve='exp' also takes ranges from 0 or below"
        )
    if widget.step is not None and kind == "int" and not float(widget.step).is_integer():
        raise BendingError(
            f"{where}: an int control steps by whole numbers, got step={widget.step}"
        )
    return dataclasses.replace(widget, kind=derived, label=widget.label or name)
