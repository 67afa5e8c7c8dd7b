"""The bending callback contract: a small module that bends a weight or an activation."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from ..controls import BendingParameter, ControlView, current, is_control
from ..errors import BendingError
from .args import non_default_arguments

__all__ = ["BendingCallback", "Chain"]


class BendingCallback(nn.Module):
    """Base class of every bending callback.

    A callback bends *targets*: weights (named by their dotted parameter name, e.g.
    ``"conv.weight"``) and activations (named ``"<method>:<node>"``, e.g. ``"forward:conv"``).
    The same instance may bend several targets; per-target state (a mask, a permutation) is
    allocated once per target by :meth:`register_target` and kept in buffers, so that
    ``.to(device)`` and ``state_dict`` carry it.

    Subclasses implement :meth:`bend`. Weights are bent once, when the bending changes, by
    :meth:`bend_weight` (``bend`` by default), on a copy: the wrapped model's own weights are
    never modified. Activations are bent on every call by :meth:`forward`.

    Notes:
        A callback that holds state shaped like its target (``Mask()`` without ``dim``) only
        fits activations of that shape. Give ``dim=`` to keep the state along some axes only,
        so that it broadcasts over any batch size or length.
    """

    scriptable: ClassVar[bool] = True
    """Whether ``torch.jit.script`` can compile this callback (checked before exporting)."""

    live_arguments: ClassVar[tuple[str, ...] | None] = None
    """Numeric arguments whose new values need no state derived again (read as they are at
    each call), so that an exported module can take them as controls. ``None``: all of them
    if the callback keeps its default :meth:`control_changed` and no per-target state."""

    __jit_ignored_attributes__: ClassVar[list[str]] = ["scriptable", "live_arguments"]

    def __init__(self) -> None:
        super().__init__()
        self._state_names: dict[str, str] = {}
        self._targets: dict[str, tuple[torch.Size, torch.dtype, torch.device]] = {}

    # -- to implement -------------------------------------------------------------------------

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """Return ``x`` bent. ``name`` is the target being bent (weight or activation)."""
        raise NotImplementedError(f"{type(self).__name__} must implement bend(x, name)")

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        """Allocate the state this callback needs for target ``name`` (nothing by default)."""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        # Targets registered later in control_changed() must land where the state now lives.
        super()._apply(fn, recurse)
        for name, (shape, dtype, device) in list(self._targets.items()):
            moved = fn(torch.empty(0, dtype=dtype, device=device))
            self._targets[name] = (shape, moved.dtype, moved.device)
        return self

    def control_changed(self) -> None:
        """React to a change of one of this callback's controls.

        By default, the state of every target is allocated again by :meth:`register_target`,
        so that a new ``seed`` draws new masks and a new ``prob`` applies to them.
        """
        for name, (shape, dtype, device) in self._targets.items():
            self.register_target(name, shape, dtype, device)

    # -- entry points -------------------------------------------------------------------------

    def register(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        """Record target ``name`` and allocate its state (what ``BendedModule.bend`` calls)."""
        self._targets[name] = (torch.Size(shape), dtype, device)
        self.register_target(name, torch.Size(shape), dtype, device)

    def forward(self, x: torch.Tensor, name: str = "") -> torch.Tensor:
        return self.bend(x, name)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        """Return a bent copy of ``weight`` (never modify ``weight`` in place)."""
        return self.bend(weight, name)

    def __rshift__(self, other: BendingCallback) -> Chain:
        return Chain(self, other)

    # -- arguments and controls -----------------------------------------------------------------

    def number(self, arg: str, value: Any, check: Callable[[Any], Any] | None = None) -> None:
        """Keep numeric argument ``arg`` as ``self._<arg>``: a number, or a live control.

        ``check`` validates (and may convert) a number; a control's current value is checked
        the same way here, and its later values by its own range.
        """
        if is_control(value):
            if check is not None:
                check(current(value))
            setattr(self, "_" + arg, value)
        else:
            setattr(self, "_" + arg, check(value) if check is not None else value)

    def value(self, arg: str) -> Any:
        """Current value of argument ``arg`` (a control's value if it is one)."""
        return current(getattr(self, "_" + arg))

    def along(self, arg: str, x: torch.Tensor) -> Any:
        """Value of ``arg`` over the call on ``x``: a number, or, while its control ramps, a
        tensor spreading the change along ``x``'s last (time) axis."""
        value = getattr(self, "_" + arg)
        # A scalar has no time axis to ramp along: it gets the current value.
        if isinstance(value, (BendingParameter, ControlView)) and value.ramping() and x.dim() > 0:
            ramp = value.along(x.shape[-1], x.device)
            if isinstance(ramp, torch.Tensor) and x.is_floating_point():
                return ramp.to(x.dtype)
            return ramp
        return current(value)

    def controls(self) -> list[BendingParameter]:
        """The controls this callback reads (through any view of them)."""
        found: list[BendingParameter] = []
        for m in self.modules():
            control = m.control if isinstance(m, ControlView) else m
            if isinstance(control, BendingParameter) and all(control is not c for c in found):
                found.append(control)
        return found

    def arguments(self) -> dict[str, Any]:
        """The arguments this callback was built with (controls as themselves), by name."""
        args: dict[str, Any] = {}
        for name, param in inspect.signature(type(self).__init__).parameters.items():
            if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if hasattr(self, "_" + name):
                args[name] = getattr(self, "_" + name)
            elif hasattr(self, name):
                args[name] = getattr(self, name)
            else:
                raise BendingError(
                    f"{type(self).__name__} keeps no attribute for its argument {name!r}; "
                    f"store it as self.{name} or self._{name} so it can be saved"
                )
        return args

    # -- per-target state ---------------------------------------------------------------------

    def add_state(self, name: str, tensor: torch.Tensor) -> None:
        """Keep ``tensor`` as this callback's state for target ``name`` (a buffer)."""
        buffer = self._state_names.get(name)
        if buffer is None:
            buffer = f"state_{len(self._state_names)}_{re.sub(r'[^0-9a-zA-Z_]', '_', name)}"
            self._state_names[name] = buffer
        self.register_buffer(buffer, tensor)

    def has_state(self, name: str) -> bool:
        return name in self._state_names

    def state(self, name: str) -> torch.Tensor:
        """The state kept for target ``name``."""
        if torch.jit.is_scripting():
            # TorchScript cannot getattr by a name known only at run time; it can loop over the
            # buffers (the loop is unrolled when compiling) and compare their names. The eager
            # lookup lives in another method because TorchScript rejects its f-string (``!r``)
            # when parsing, even in a branch it would not compile.
            if name in self._state_names:
                key = self._state_names[name]
                for buffer_name, buffer in self.named_buffers():
                    if buffer_name == key:
                        return buffer
            raise BendingError(f"no state for target '{name}'")
        return self._eager_state(name)

    def _eager_state(self, name: str) -> torch.Tensor:
        buffer = self._state_names.get(name)
        if buffer is None:
            raise BendingError(
                f"{self!r} has no state for target '{name}'; it was registered for "
                f"{sorted(self._state_names) or 'no target'}. Bend targets through "
                "BendedModule.bend so that their state is allocated."
            )
        return getattr(self, buffer)

    def check_broadcast(self, state: torch.Tensor, x: torch.Tensor, name: str) -> None:
        """Raise a :class:`BendingError` if ``state`` cannot broadcast onto ``x``."""
        fits = state.dim() <= x.dim()
        if fits:
            for i in range(1, state.dim() + 1):
                if state.shape[-i] != 1 and state.shape[-i] != x.shape[-i]:
                    fits = False
        if not fits:
            if torch.jit.is_scripting():
                owner = "a bending callback"
            else:
                owner = repr(self)
            raise BendingError(
                f"{owner} holds state of shape {list(state.shape)} for '{name}', which was "
                f"traced with that shape, but was called on a tensor of shape {list(x.shape)}. "
                f"Give the callback dim= (for instance dim=-2 to act on channels only) so that "
                f"its state broadcasts over any shape."
            )

    def extra_repr(self) -> str:
        """The arguments that differ from their defaults (none if they cannot be recovered)."""
        try:
            return non_default_arguments(self)
        except BendingError:
            return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.extra_repr()})"


class Chain(BendingCallback):
    """Callbacks applied one after the other (``cb1 >> cb2``).

    Example:
        >>> import torchbend as tb
        >>> chain = tb.Scale(2.0) >> tb.Bias(1.0)
        >>> chain(torch.ones(2), "x")
        tensor([3., 3.])
    """

    def __init__(self, *callbacks: BendingCallback) -> None:
        super().__init__()
        flat: list[BendingCallback] = []
        for cb in callbacks:
            if not isinstance(cb, BendingCallback):
                raise BendingError(
                    f"can only chain bending callbacks, got {type(cb).__name__}: {cb!r}"
                )
            flat.extend(cb.chained() if isinstance(cb, Chain) else [cb])
        self.callbacks: nn.ModuleList = nn.ModuleList(flat)
        self.scriptable = all(cb.scriptable for cb in flat)  # type: ignore[misc]

    def chained(self) -> list[BendingCallback]:
        """The callbacks of this chain, in order."""
        return [cb for cb in self.callbacks if isinstance(cb, BendingCallback)]

    def register(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        for cb in self.chained():
            cb.register(name, shape, dtype, device)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        for cb in self.chained():
            cb.register_target(name, shape, dtype, device)

    def control_changed(self) -> None:
        for cb in self.chained():
            cb.control_changed()

    def arguments(self) -> dict[str, Any]:
        return {"callbacks": self.chained()}

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        for cb in self.callbacks:
            x = cb(x, name)
        return x

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        for cb in self.chained():
            weight = cb.bend_weight(weight, name)
        return weight

    def __repr__(self) -> str:
        return " >> ".join(repr(cb) for cb in self.callbacks)
