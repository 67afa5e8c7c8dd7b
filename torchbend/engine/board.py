"""The control board: the named controls of the bendings, their updates and ramps."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..callbacks.base import BendingCallback
from ..controls import BendingParameter, ControlValue, TensorParameter
from ..controls.rules import fade_weight
from ..errors import BendingError, did_you_mean
from .bendings import Bending, BendingSet
from .tables import Table, controls_table
from .weights import WeightBank

__all__ = ["ControlBoard"]


class ControlBoard:
    """Finds the controls the bendings read and applies ``update`` to them.

    An update reaches activation callbacks through the control itself (they read it when they
    run); weight bendings that read the control are computed again, once, for the weights they
    bend. A control with a ramp spreads its change over calls: :meth:`advance`, called after
    each call of the model, moves ramps on and crossfades weights from their old to their new
    bent values.
    """

    def __init__(self, bendings: BendingSet, weights: WeightBank) -> None:
        self.bendings = bendings
        self.weights = weights
        self.ramping: dict[str, BendingParameter] = {}
        """Controls whose change is still being spread over calls, by name."""
        self._fades: dict[str, tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = {}
        self._map: dict[str, tuple[BendingParameter, list[Bending]]] = {}
        self._generation = -1
        self._written: object = None
        """The bent weights as the last crossfade left them: if they are another mapping when
        a ramp moves on, something else bent weights since (a bending, a version)."""

    def controls(self) -> dict[str, tuple[BendingParameter, list[Bending]]]:
        """Each control with the bendings that read it (cached until bendings change)."""
        if self._generation != self.bendings.generation:
            found: dict[str, tuple[BendingParameter, list[Bending]]] = {}
            for b in self.bendings:
                for control in b.callback.controls():
                    found.setdefault(control.name, (control, []))[1].append(b)
            self._map, self._generation = found, self.bendings.generation
        return self._map

    def controllables(self) -> dict[str, BendingParameter]:
        return {name: control for name, (control, _) in self.controls().items()}

    def tensor_controls(self) -> list[str]:
        """The names of the tensor controls (:class:`~torchbend.TensorParameter`)."""
        return [name for name, c in self.controllables().items() if isinstance(c, TensorParameter)]

    def table(self) -> Table:
        """The controls as a table: value, values taken, clamp, ramp and widget of each."""
        return controls_table(self.controllables().values())

    def check(self, callback: BendingCallback) -> None:
        """Refuse a callback whose control has the name of another control already in use."""
        known = self.controllables()
        for control in callback.controls():
            if control.name in known and known[control.name] is not control:
                raise BendingError(
                    f"another control is already named {control.name!r}; reuse that control "
                    f"(bended.controllables[{control.name!r}]) or give this one another name"
                )

    def update(self, name: str, value: ControlValue, ramp: bool = True) -> None:
        controls = self.controls()
        if name not in controls:
            raise BendingError(
                f"no control named {name!r}; known controls: {sorted(controls) or 'none'}"
                + did_you_mean(name, controls)
            )
        control, readers = controls[name]
        # The control pushes the value into the callbacks (they derive state).
        if isinstance(control, TensorParameter):
            control.set(value)
        elif isinstance(value, (torch.Tensor, Sequence)):
            raise BendingError(
                f"control {name!r} takes a number, got {type(value).__name__}; tensor controls "
                f"(tb.TensorParameter) take tensors: {sorted(self.tensor_controls()) or 'none'}"
            )
        else:
            control.set(value, ramp)
        weights = list(dict.fromkeys(w for b in readers for w in b.weights))
        if control.ramping():
            self.ramping[name] = control
        if weights:
            before = {w: self.weights.current(w) for w in weights}
            self.weights.rebend(weights)
            self._fades.pop(name, None)
            if any(w in after for _, after in self._fades.values() for w in weights):
                self._settle()  # another control fades some of these weights: both land
            else:
                self._written = self.weights.bent  # other fades touch other weights
            if control.ramping():
                after = {w: self.weights.current(w) for w in weights}
                self._fades[name] = (before, after)
                self._fade(control)

    def _fade(self, control: BendingParameter) -> None:
        before, after = self._fades[control.name]
        _, step = control.ramp_position()
        self.weights.crossfade(before, after, fade_weight(step, control.ramp))
        self._written = self.weights.bent

    def advance(self) -> None:
        """Move every ramp on by one call."""
        if self._fades and self.weights.bent is not self._written:
            self._settle()
        for name, control in list(self.ramping.items()):
            control.advance()
            if name in self._fades:
                if control.ramping():
                    self._fade(control)
                else:  # bent again from where the base and the bendings are now
                    _, after = self._fades.pop(name)
                    self.weights.rebend(list(after))
            if not control.ramping():
                del self.ramping[name]

    def _settle(self) -> None:
        """End the weight crossfades at once, their weights bent again from the base and
        bendings as they are now: another operation bent weights during them, and a fade
        between values taken before it would undo it."""
        weights = list(dict.fromkeys(w for _, after in self._fades.values() for w in after))
        self._fades.clear()
        self.weights.rebend(weights)

    def fades(self) -> dict[str, tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        """The weight crossfades under way: per control, the weights before and after its
        change, by name."""
        return dict(self._fades)

    def clear(self) -> None:
        """Forget the bendings' ramps: each ramp under way ends at its value."""
        for control in self.ramping.values():
            control.finish()
        self.ramping.clear()
        self._fades.clear()
