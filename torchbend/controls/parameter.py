"""BendingParameter, a named live control, and ControlView, a scaled and offset view of one."""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

import torch

from ..errors import BendingError
from .bounds import Bound, Number, check_settings, checked_value, finite_float, kind_of, limits_of
from .rules import call_range, viewed
from .widgets import Widget, resolve_widget

__all__ = [
    "BendingParameter",
    "Control",
    "ControlView",
    "Reader",
    "control_of",
    "is_control",
]


class Reader(Protocol):
    """What a control pushes its values into: a bending callback."""

    def follow(self, control: BendingParameter) -> None:
        """Take the control's new value (and its ramp over the current call)."""


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
        check_settings(name, value, range, clamp, ramp)
        self.name: str = name
        self.kind: str = kind_of(value)
        self.range: tuple[Number, Number] | None = None if range is None else (range[0], range[1])
        self.clamp: bool = clamp
        self.ramp: int = ramp
        self.widget: Widget = resolve_widget(widget, name, self.kind, self.range)
        """How a host should draw the control: the widget given, its left-out fields derived."""
        self._bounds: list[weakref.ref[Bound]] = []
        self.value: float = self._check(value)
        self._start: float = self.value
        self._step: int = ramp  # at rest: nothing to spread until a change
        self._readers: list[weakref.ref[Reader]] = []

    def _check(self, value: Any) -> float:
        """``value`` as a float, checked against the control's kind, its range and the bounds
        of the arguments it drives (brought into them if the control clamps)."""
        return checked_value(value, self.name, self.kind, self.range, self.clamp, self.bounds())

    def limits(self) -> tuple[float, float]:
        """``(low, high)``: the values this control takes, within its range and the bounds of
        the arguments it drives (where a control that clamps brings other values)."""
        return limits_of(self.kind, self.range, self.bounds())

    def widget_changes(self) -> dict[str, Any]:
        """The fields of :attr:`widget` that differ from those derived from the control alone,
        as :meth:`Widget.to_dict` gives them: what the repr shows and a configuration saves."""
        derived = resolve_widget(None, self.name, self.kind, self.range).to_dict()
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
        return self.call_range()[0]

    def current_end(self) -> float:
        """Value at the end of the current call."""
        return self.call_range()[1]

    def call_range(self) -> tuple[float, float]:
        """Values at the start and at the end of the current call (equal unless ramping):
        :func:`~torchbend.controls.rules.call_range`, which exported modules call too."""
        return call_range(self._start, self.value, self._step, self.ramp)

    def ramp_position(self) -> tuple[float, int]:
        """``(start, step)``: where the ramp under way started, and how many of its
        :attr:`ramp` calls went (``step == ramp`` at rest). An export starts its ramps there."""
        return self._start, self._step

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
            self.widget = resolve_widget(None, self.name, self.kind, self.range)

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
        if control.kind == "tensor":
            control.view()  # refuses: a tensor control does not combine with numbers
        for label, number in (("scale", scale), ("offset", offset)):
            if finite_float(number) is None:
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
        return viewed(self.control.get(), self.scale, self.offset)

    def call_range(self) -> tuple[float, float]:
        """Values at the start and at the end of the current call (equal unless ramping)."""
        start, end = self.control.call_range()
        return viewed(start, self.scale, self.offset), viewed(end, self.scale, self.offset)

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
