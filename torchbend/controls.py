"""Named live controls: scalars that push their values into the callback arguments they drive."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .errors import BendingError, did_you_mean

__all__ = [
    "CURVES",
    "MAX_RAMP",
    "WIDGETS",
    "BendingParameter",
    "Bound",
    "Control",
    "ControlView",
    "Number",
    "Reader",
    "Widget",
    "control_of",
    "is_control",
]

Number = float | int | bool

MAX_RAMP = 1 << 16
"""The longest ramp of a control, in calls: minutes of audio at any usual block size. A longer
one is surely a mistake (a number of samples given for a number of calls, say)."""


class Reader(Protocol):
    """What a control pushes its values into: a bending callback."""

    def follow(self, control: BendingParameter) -> None:
        """Take the control's new value (and its ramp over the current call)."""


@dataclass(frozen=True, eq=False)
class Bound:
    """What an argument driven by a control takes of the control's values: those for which
    ``scale * value + offset`` (the argument's value, read through a view) is finite (if
    ``finite``) and within ``[low, high]``.

    An :class:`~torchbend.callbacks.Argument` given a control makes one and hands it to the
    control (:meth:`BendingParameter.restrict`), so that the control refuses values the
    argument would not take, or clamps them if it clamps.
    """

    reader: str
    """The argument, as errors name it: ``"Noise.std"``."""
    requirement: str
    """What the argument takes, as errors say it: ``"std must be a finite number >= 0"``."""
    low: float | None = None
    high: float | None = None
    finite: bool = True
    scale: float = 1.0
    offset: float = 0.0

    def value(self, control_value: float) -> float:
        """The argument's value when the control has ``control_value``."""
        return control_value * self.scale + self.offset

    def admits(self, control_value: float) -> bool:
        """Whether the argument takes the control's ``control_value``."""
        value = self.value(control_value)
        if math.isnan(value) or (self.finite and math.isinf(value)):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def interval(self) -> tuple[float, float]:
        """``(low, high)``: the control's values that the argument takes (bounds included)."""
        if self.scale == 0.0:  # the argument holds the offset, whatever the control's value
            return -math.inf, math.inf
        if self.scale == 1.0 and self.offset == 0.0:  # exact, for the bounds of 64-bit ints
            return (
                -math.inf if self.low is None else self.low,
                math.inf if self.high is None else self.high,
            )
        if self.scale < 0:  # a reversed view: the argument's high bound is the control's low
            low = -math.inf if self.high is None else (self.high - self.offset) / self.scale
            high = math.inf if self.low is None else (self.low - self.offset) / self.scale
            return low, high
        low = -math.inf if self.low is None else (self.low - self.offset) / self.scale
        high = math.inf if self.high is None else (self.high - self.offset) / self.scale
        return low, high


def _interval_text(low: float, high: float) -> str:
    """``"a value >= 0"``: the values between ``low`` and ``high``, for errors."""

    def show(number: float) -> str:
        return str(number) if isinstance(number, int) else f"{number:g}"

    if math.isinf(low) and math.isinf(high):
        return "another value"
    if math.isinf(high):
        return f"a value >= {show(low)}"
    if math.isinf(low):
        return f"a value <= {show(high)}"
    return f"a value between {show(low)} and {show(high)}"


def _finite_float(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool); else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


WIDGETS = ("knob", "slider", "toggle", "menu", "number")
"""The kinds of :class:`Widget`: a knob, a slider, a toggle (bool controls), a menu (int
controls, the index of one of its ``choices``) and a number box."""

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
        if step is not None and (_finite_float(step) is None or not step > 0):
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


def _resolve_widget(
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
            "menu" if widget.choices else {"bool": "toggle", "int": "slider"}.get(kind, "knob")
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


class BendingParameter:
    """A named scalar control (a knob), usable wherever a callback takes a number.

    Arithmetic gives views of the same control, so one knob can drive several callbacks
    differently: ``tb.Scale(2. * p)``, ``tb.Bias(1 - p)``.

    A control pushes its values into the callbacks that read it, its *readers*: a callback
    given the control (or a view of it) attaches itself, and :meth:`set` and :meth:`advance`
    call ``reader.follow(control)`` on each, so that callbacks always hold plain numbers, read
    by the same code eagerly and in TorchScript. Readers are held weakly: a callback that is
    dropped stops following.

    Args:
        name: the control's name, as used by ``bended.update(name, value)`` (an identifier).
        value: initial value: a float, an int or a bool (the kind is kept on update).
        range: ``(low, high)`` bounds of the value, two finite numbers, or ``None`` for no
            bounds. The arguments the control drives bound it too, through the views that
            drive them: a control driving ``Mask(prob=2 * p)`` takes values from 0 to 0.5.
        clamp: bring values out of range, or out of the bounds of the arguments the control
            drives, into them instead of refusing them.
        ramp: number of calls over which a change is spread (``0``: at once; at most
            :data:`MAX_RAMP`). Activation callbacks see a ramp along the last (time) axis of
            each activation, so a jump from 0 to 1 between two audio blocks does not click;
            weight bendings crossfade from the old to the new bent weights over the same
            number of calls.
        widget: how a host should draw the control (a :class:`Widget` of interface hints:
            kind, unit, curve, label, group); fields left out are derived from the control.
            Read the result from :attr:`widget`, all of it as data from :meth:`describe`.

    Example:
        >>> import torchbend as tb
        >>> p = tb.BendingParameter("gain", 0.5, range=(0., 1.))
        >>> (2 * p).get(), (1 - p).get()
        (1.0, 0.5)
        >>> p.set(0.8); (2 * p).get()
        1.6
    """

    def __init__(
        self,
        name: str,
        value: Number,
        range: tuple[Number, Number] | None = None,
        clamp: bool = False,
        ramp: int = 0,
        *,
        widget: Widget | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise BendingError(f"a control's name must be an identifier, got {name!r}")
        if isinstance(value, torch.Tensor) or not isinstance(value, numbers.Real):
            raise BendingError(
                f"control {name!r}: value must be a float, an int or a bool, got "
                f"{type(value).__name__}: {value!r}"
            )
        if range is not None:
            bounds = list(range) if isinstance(range, (tuple, list)) else []
            finite = [_finite_float(bound) for bound in bounds]
            if len(finite) != 2 or None in finite:
                raise BendingError(
                    f"control {name!r}: range is (low, high), two finite numbers, or None; "
                    f"got {range!r}"
                )
            if not bounds[0] <= bounds[1]:
                raise BendingError(f"control {name!r}: range {range} has low > high")
        if not isinstance(clamp, bool):
            raise BendingError(f"control {name!r}: clamp is True or False, got {clamp!r}")
        if isinstance(ramp, bool) or not isinstance(ramp, int) or not 0 <= ramp <= MAX_RAMP:
            raise BendingError(
                f"control {name!r}: ramp is a number of calls between 0 and {MAX_RAMP}, "
                f"got {ramp!r}"
            )
        self.name: str = name
        self.kind: str = "bool" if isinstance(value, bool) else "float"
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            self.kind = "int"
        self.range: tuple[Number, Number] | None = None if range is None else (range[0], range[1])
        self.clamp: bool = clamp
        self.ramp: int = ramp
        self.widget: Widget = _resolve_widget(widget, name, self.kind, self.range)
        """How a host should draw the control: the widget given, its left-out fields derived."""
        self._bounds: list[weakref.ref[Bound]] = []
        self.value: float = self._check(value)
        self._start: float = self.value
        self._step: int = ramp  # at rest: nothing to spread until a change
        self._readers: list[weakref.ref[Reader]] = []

    def _check(self, value: Any) -> float:
        """``value`` as a float, checked against the control's kind, its range and the bounds
        of the arguments it drives (brought into them if the control clamps)."""
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        is_bool = isinstance(value, bool)
        if self.kind == "bool":
            if not (is_bool or (isinstance(value, numbers.Real) and value in (0, 1))):
                raise BendingError(
                    f"control {self.name!r} takes True or False, got {type(value).__name__}: "
                    f"{value!r}"
                )
            return float(value)
        number = None if is_bool else _finite_float(value)
        if number is None:
            raise BendingError(
                f"control {self.name!r} takes a finite {self.kind}, got "
                f"{type(value).__name__}: {value!r}"
            )
        if self.kind == "int" and not number.is_integer():
            raise BendingError(f"control {self.name!r} takes an int, got {value!r}")
        if self.range is not None:
            low, high = self.range
            if not low <= number <= high:
                if not self.clamp:
                    raise BendingError(
                        f"control {self.name!r}: {value!r} is out of its range [{low}, {high}]"
                    )
                number = float(min(max(number, low), high))
        refused = [bound for bound in self.bounds() if not bound.admits(number)]
        if refused and self.clamp:
            low, high = self._limits(self.bounds())
            return float(min(max(number, low), high))
        if refused:
            bound = refused[0]
            low, high = self._limits([bound], ranged=False)
            raise BendingError(
                f"control {self.name!r}: {value!r} would make {bound.reader} "
                f"{bound.value(number)!r}, but {bound.requirement}; give {self.name!r} "
                f"{_interval_text(low, high)}, or make the control clamp (clamp=True)"
            )
        return number

    def limits(self) -> tuple[float, float]:
        """``(low, high)``: the values this control takes, within its range and the bounds of
        the arguments it drives (where a control that clamps brings other values)."""
        return self._limits(self.bounds())

    def _limits(self, bounds: list[Bound], ranged: bool = True) -> tuple[float, float]:
        """``(low, high)``: the values of the control that ``bounds`` admit (and its range, if
        ``ranged``), whole for an int control. The current value is within them: they meet."""
        low, high = -math.inf, math.inf
        if ranged and self.range is not None:
            low, high = self.range
        for bound in bounds:
            bound_low, bound_high = bound.interval()
            low, high = max(low, bound_low), min(high, bound_high)
        if self.kind == "int":
            low = low if math.isinf(low) else math.ceil(low)
            high = high if math.isinf(high) else math.floor(high)
        return low, high

    def widget_changes(self) -> dict[str, Any]:
        """The fields of :attr:`widget` that differ from those derived from the control alone,
        as :meth:`Widget.to_dict` gives them: what the repr shows and a configuration saves."""
        derived = _resolve_widget(None, self.name, self.kind, self.range).to_dict()
        return {k: v for k, v in self.widget.to_dict().items() if v != derived[k]}

    def describe(self) -> dict[str, Any]:
        """The control as JSON-able data, for a host building its interface.

        ``name``; ``type`` (``"float"``, ``"int"`` or ``"bool"``); ``value``; ``range``
        (``[low, high]`` or ``None``); ``limits``, ``[low, high]``, the values the control
        takes within its range and the bounds of the arguments it drives (``None`` where
        unbounded; ``[0, 1]`` for a bool); ``clamp``; ``ramp``; and ``widget``
        (:meth:`Widget.to_dict`).

        Example:
            >>> import torchbend as tb
            >>> tb.BendingParameter("gain", 0.5, range=(0.0, 2.0)).describe()["limits"]
            [0.0, 2.0]
        """
        low, high = (0, 1) if self.kind == "bool" else self.limits()
        return {
            "name": self.name,
            "type": self.kind,
            "value": self.get(),
            "range": None if self.range is None else list(self.range),
            "limits": [None if math.isinf(low) else low, None if math.isinf(high) else high],
            "clamp": self.clamp,
            "ramp": self.ramp,
            "widget": self.widget.to_dict(),
        }

    def get(self) -> Number:
        """The current value, of the control's kind."""
        if self.kind == "int":
            return int(self.value)
        if self.kind == "bool":
            return bool(self.value)
        return self.value

    def set(self, value: Number, ramp: bool = True) -> None:
        """Change the value; starts a ramp if ``ramp > 0``, unless ``ramp=False`` (a jump:
        between two sounds, say).

        The value must be of the control's kind, finite, within its range and within the
        bounds of the arguments it drives (see :meth:`restrict`); a control that clamps brings
        it into them, any other raises a :class:`BendingError` and keeps its value. The
        readers follow at once (see :meth:`attach`).
        """
        checked = self._check(value)
        self._start = self.current_start()
        self._step = 0 if ramp and self.ramp else self.ramp
        self.value = checked
        self._push()

    # -- ramps ---------------------------------------------------------------------------------

    def ramping(self) -> bool:
        """Whether a change is still being spread over calls."""
        return self._step < self.ramp

    def current_start(self) -> float:
        """Value at the start of the current call (the ramp's position)."""
        if not self.ramping():
            return self.value
        return self._start + (self.value - self._start) * self._step / self.ramp

    def current_end(self) -> float:
        """Value at the end of the current call."""
        if not self.ramping():
            return self.value
        return self._start + (self.value - self._start) * (self._step + 1) / self.ramp

    def call_range(self) -> tuple[float, float]:
        """Values at the start and at the end of the current call (equal unless ramping)."""
        return self.current_start(), self.current_end()

    def advance(self) -> None:
        """Move the ramp on by one call (``BendedModule`` does it after each call); the
        readers follow."""
        if self.ramping():
            self._step += 1
            self._push()

    def finish(self) -> None:
        """End a ramp under way at once: the value is reached; the readers follow."""
        if self.ramping():
            self._step = self.ramp
            self._push()

    # -- readers ---------------------------------------------------------------------------------

    def attach(self, reader: Reader) -> None:
        """Push this control's values into ``reader`` from now on (callbacks attach themselves
        when given the control)."""
        if all(r() is not reader for r in self._readers):
            self._readers.append(weakref.ref(reader))

    def detach(self, reader: Reader) -> None:
        """Stop pushing into ``reader``."""
        self._readers = [r for r in self._readers if r() is not None and r() is not reader]

    def readers(self) -> list[Reader]:
        """The callbacks this control pushes its values into (those still alive)."""
        return [reader for r in self._readers if (reader := r()) is not None]

    def restrict(self, bound: Bound) -> None:
        """Take from now on only values that ``bound`` admits (clamp into it, if the control
        clamps), for as long as something else holds ``bound``.

        Notes:
            The control holds ``bound`` weakly, as it holds its readers: the callback whose
            argument it bounds holds it, so that the bound goes when the callback does, or
            when the argument is given something else. A bound that nothing holds is gone at
            once. Copies of a callback hold copies of its bounds, which the copies of its
            controls take (see :meth:`__getstate__`).
        """
        if not bound.admits(self.value):
            raise BendingError(
                f"control {self.name!r}: its value {self.get()!r} would make {bound.reader} "
                f"{bound.value(self.value)!r}, but {bound.requirement}"
            )
        self._bounds = [b for b in self._bounds if b() is not None and b() is not bound]
        self._bounds.append(weakref.ref(bound))

    def bounds(self) -> list[Bound]:
        """The bounds of the arguments this control drives (see :meth:`restrict`)."""
        return [bound for b in self._bounds if (bound := b()) is not None]

    @contextlib.contextmanager
    def tensor_input(self, value: torch.Tensor) -> Iterator[None]:
        """Within ``with``, push the 0-dim tensor ``value`` into the readers as the control's
        value, then the control's own value again: what ``torch.export`` traces when the
        control is an input of the exported program. Only arguments read along time (declared
        with ``ramps=True``) take a tensor."""
        saved = self.value
        self.value = value  # type: ignore[assignment]
        try:
            self._push()
            yield
        finally:
            self.value = saved
            self._push()

    def _push(self) -> None:
        for reader in self.readers():
            reader.follow(self)

    def __getstate__(self) -> dict[str, Any]:
        # Weak references neither pickle nor copy; a copied callback attaches itself again to
        # the copy of its control (BendingCallback.__setstate__). Bounds are kept as they are:
        # copied with the callbacks that hold them, the copies are the ones this copy takes
        # (pickle and deepcopy copy an object once); copied alone, nothing holds them.
        state = dict(vars(self))
        state["_readers"] = []
        state["_bounds"] = self.bounds()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        bounds: list[Bound] = state.pop("_bounds", [])
        vars(self).update(state)
        self._bounds = [weakref.ref(bound) for bound in bounds]
        if "widget" not in state:  # pickled before controls had widgets
            self.widget = _resolve_widget(None, self.name, self.kind, self.range)

    # -- arithmetic: views of the same control ---------------------------------------------------

    def view(self, scale: float = 1.0, offset: float = 0.0) -> ControlView:
        return ControlView(self, scale, offset)

    def __mul__(self, other: float) -> ControlView:
        return self.view().__mul__(other)

    __rmul__ = __mul__

    def __add__(self, other: float) -> ControlView:
        return self.view().__add__(other)

    __radd__ = __add__

    def __sub__(self, other: float) -> ControlView:
        return self.view().__sub__(other)

    def __rsub__(self, other: float) -> ControlView:
        return self.view().__rsub__(other)

    def __neg__(self) -> ControlView:
        return self.view(-1.0)

    def __truediv__(self, other: float) -> ControlView:
        return self.view().__truediv__(other)

    def __repr__(self) -> str:
        args = [repr(self.name), repr(self.get())]
        if self.range is not None:
            args.append(f"range={self.range}")
        if self.clamp:
            args.append("clamp=True")
        if self.ramp:
            args.append(f"ramp={self.ramp}")
        changes = self.widget_changes()
        if changes:
            changes["choices"] = tuple(changes.get("choices", ()))
            args.append(f"widget={Widget(**changes)!r}")
        return f"BendingParameter({', '.join(args)})"


class ControlView:
    """``scale * control + offset``: a derived view of a :class:`BendingParameter`."""

    def __init__(self, control: BendingParameter, scale: float = 1.0, offset: float = 0.0) -> None:
        if not isinstance(control, BendingParameter):
            raise BendingError(
                f"a control view reads a BendingParameter, got {type(control).__name__}: "
                f"{control!r}"
            )
        for label, number in (("scale", scale), ("offset", offset)):
            if _finite_float(number) is None:
                raise BendingError(
                    f"controls combine with finite numbers only; got {label} "
                    f"{type(number).__name__}: {number!r}"
                )
        self.control = control
        self.scale = float(scale)
        self.offset = float(offset)

    @property
    def name(self) -> str:
        return self.control.name

    def get(self) -> float:
        return self.control.get() * self.scale + self.offset

    def call_range(self) -> tuple[float, float]:
        """Values at the start and at the end of the current call (equal unless ramping)."""
        start, end = self.control.call_range()
        return start * self.scale + self.offset, end * self.scale + self.offset

    def ramping(self) -> bool:
        return self.control.ramping()

    def __mul__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale * other, self.offset * other)

    __rmul__ = __mul__

    def __add__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale, self.offset + other)

    __radd__ = __add__

    def __sub__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale, self.offset - other)

    def __rsub__(self, other: float) -> ControlView:
        return ControlView(self.control, -self.scale, other - self.offset)

    def __neg__(self) -> ControlView:
        return ControlView(self.control, -self.scale, -self.offset)

    def __truediv__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale / other, self.offset / other)

    def __repr__(self) -> str:
        return f"{self.scale} * {self.control.name} + {self.offset}"


Control = BendingParameter | ControlView
"""A live control, or a view of one, given where a callback takes a number."""


def is_control(value: Any) -> bool:
    """Whether ``value`` is a control or a view of one."""
    return isinstance(value, (BendingParameter, ControlView))


def control_of(value: Control) -> BendingParameter:
    """The control behind ``value`` (itself, or the control a view reads)."""
    return value.control if isinstance(value, ControlView) else value
