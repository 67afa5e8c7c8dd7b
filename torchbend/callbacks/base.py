"""The bending callback contract: a small module that bends a weight or an activation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from ..controls import BendingParameter, Control, control_of
from ..controls.rules import ramp_along
from ..errors import BendingError
from .argument import pull_control
from .axes import check_axes
from .settings import given_arguments, neutral_values, shown_arguments
from .targets import check_broadcast, missing_state, state_buffer_name, static_product

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

    Numeric arguments are declared once on the class with :class:`Argument`; they may be
    given live controls, which push their values in (see :meth:`follow`), so that ``bend``
    reads plain numbers, eagerly and in TorchScript alike.

    Notes:
        A callback that holds state shaped like its target (``Mask()`` without ``dim``) only
        fits activations of that shape. Give ``dim=`` to keep the state along some axes only,
        so that it broadcasts over any batch size or length.
    """

    scriptable: ClassVar[bool] = True
    """Whether ``torch.jit.script`` can compile this callback (checked before exporting)."""

    # The controls given as arguments are Python objects TorchScript has no type for; scripted
    # code reads the numbers they push into the arguments' attributes instead.
    __jit_ignored_attributes__: ClassVar[list[str]] = [
        "scriptable",
        "_controlled",
        "_fitted",
        "revision",
    ]

    def __init__(self) -> None:
        super().__init__()
        # Typed by construction rather than annotated: TorchScript warns about annotations of
        # empty containers in __init__ (and has no use for these bookkeeping dicts).
        self._state_names = dict[str, str]()
        self._targets = dict[str, tuple[torch.Size, torch.dtype, torch.device]]()
        self._controlled = dict[str, Control]()
        """The arguments given as controls (or views of them), by name."""
        self._ramps = dict[str, tuple[Any, Any, Any]]()
        """For each argument declared with ``ramps=True``: its values at the start and at the
        end of the current call, and its value (see :meth:`along`)."""
        self._fitted = dict[str, tuple[torch.Size, torch.Size]]()
        """For each target, the shapes of state and input last found to broadcast (see
        :meth:`check_broadcast`): the check runs again only when one of them changes."""
        self.revision = 0
        """Counts the changes of this callback's state and arguments (a value set directly or
        pushed by a control, a mask drawn again): what kept a result of :meth:`static_factor`
        compares to know that it is out of date."""

    # -- to implement -------------------------------------------------------------------------

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """Return ``x`` bent. ``name`` is the target being bent (weight or activation)."""
        raise NotImplementedError(f"{type(self).__name__} must implement bend(x, name)")

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        """Allocate the state this callback needs for target ``name`` (nothing by default)."""

    @torch.jit.unused
    def check_axes(self, name: str, shape: torch.Size, dims: list[int] | None) -> None:
        """Refuse target ``name`` of ``shape`` if it lacks an axis of ``dims`` (``None``:
        every axis, which any shape has), with an error naming this callback and the target:
        what ``register_target`` of a callback with a ``dim=`` argument checks."""
        check_axes(repr(self), name, shape, dims)

    def static_factor(self, name: str) -> torch.Tensor | None:
        """The tensor ``f`` such that ``bend(x, name)`` is ``x * f`` in the coming call, if
        there is one (``None`` by default, and while an argument ramps along time).

        A bended graph uses it to fold the bending of an activation into the weights of the
        linear layers that read it (see :mod:`torchbend.engine.folding`), so that the bending costs
        nothing per call; ``f`` must broadcast onto the target's traced shape. A change of
        ``f`` (a control moved, an argument set) must count in :attr:`revision`, as changes of
        arguments and state do: the graph folds again then.
        """
        return None

    def control_changed(self) -> None:
        """Derive state again after an argument declared with ``derives=True`` changed.

        By default, the state of every target is allocated again by :meth:`register_target`,
        so that a new ``seed`` draws new masks and a new ``prob`` applies to them.
        """
        for name, (shape, dtype, device) in self._targets.items():
            self.register_target(name, shape, dtype, device)

    @classmethod
    def neutral_setting(cls) -> dict[str, Any] | None:
        """Keyword arguments at which this callback is the identity, bit for bit; ``None`` if it
        has none (``Lambda``).

        By default, every declared argument that has a ``neutral``, at that value. A callback
        that declares none must override this method (the identity test requires it).
        """
        return neutral_values(cls)

    # -- entry points -------------------------------------------------------------------------

    def register(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        """Record target ``name`` and allocate its state (what ``BendedModule.bend`` calls).

        All or nothing: a target that :meth:`register_target` refuses is left as it was (not
        recorded if new), so that a control moved later does not derive state for it.
        """
        before = self._targets.get(name)
        buffer = self._state_names.get(name)
        state = None if buffer is None else getattr(self, buffer)
        self._targets[name] = (torch.Size(shape), dtype, device)
        try:
            self.register_target(name, torch.Size(shape), dtype, device)
        except BaseException:
            self.unregister(name)
            if before is not None:
                self._targets[name] = before
            if state is not None:
                self.add_state(name, state)
            raise

    def unregister(self, name: str) -> None:
        """Forget target ``name`` and the state kept for it (a bending taken back)."""
        self._targets.pop(name, None)
        self._fitted.pop(name, None)
        buffer = self._state_names.pop(name, None)
        if buffer is not None:
            delattr(self, buffer)
            self.revision += 1

    def forward(self, x: torch.Tensor, name: str = "") -> torch.Tensor:
        return self.bend(x, name)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        """Return a bent copy of ``weight`` (never modify ``weight`` in place)."""
        return self.bend(weight, name)

    def __rshift__(self, other: BendingCallback) -> Chain:
        return Chain(self, other)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        # Targets registered later in control_changed() must land where the state now lives.
        super()._apply(fn, recurse)
        for name, (shape, dtype, device) in list(self._targets.items()):
            moved = fn(torch.empty(0, dtype=dtype, device=device))
            self._targets[name] = (shape, moved.dtype, moved.device)
        return self

    # -- arguments and controls -----------------------------------------------------------------

    def along(self, arg: str, x: torch.Tensor) -> float | torch.Tensor:
        """Argument ``arg`` (declared with ``ramps=True``) over the call on ``x``: its value,
        or, while its control ramps, a tensor of ``x.shape[-1]`` values going from the value
        at the start of the call to the value at its end, which broadcasts along ``x``'s last
        (time) axis. A scalar ``x`` has no time axis: it gets the value."""
        ramp = self._ramps.get(arg)
        if ramp is None:
            raise BendingError(
                f"{self.label()} has no argument '{arg}' read along time: declare it with "
                "Argument(float, ramps=True), and read it only when it is not None"
            )
        start, end, value = ramp
        # A tensor value is a control fed as an input of a program being exported.
        if isinstance(value, torch.Tensor) or start == end or x.dim() == 0:
            return value
        return ramp_along(start, end, x)

    def follow(self, control: BendingParameter) -> None:
        """Take the new value of ``control`` into the arguments it drives.

        The control calls this on every reader when it is set or advances along a ramp; if an
        argument declared with ``derives=True`` changed, :meth:`control_changed` follows.
        """
        if pull_control(self, self._controlled, control):
            self.control_changed()

    def controlled(self) -> dict[str, Control]:
        """The arguments given as controls (or views of them), by name (not inner callbacks')."""
        return dict(self._controlled)

    @torch.jit.export
    def set_call_range(self, arg: str, start: float, end: float, value: float) -> None:
        """Set what :meth:`along` reads of argument ``arg`` (declared with ``ramps=True``) in
        the coming call: its values at the start and at the end of the call, and its value.
        Exported modules call it, scripted, as a control's push does in Python."""
        # TorchScript cannot type the table empty (nothing read along time): ``hasattr``,
        # decided when compiling, makes the method empty there (an export never calls it).
        if hasattr(self, "_ramps"):
            self._ramps[arg] = (start, end, value)

    def controls(self) -> list[BendingParameter]:
        """The controls this callback reads (through any view), its inner callbacks' included."""
        found: list[BendingParameter] = []
        for m in self.modules():
            if isinstance(m, BendingCallback):
                for source in m._controlled.values():
                    control = control_of(source)
                    if all(control is not c for c in found):
                        found.append(control)
        return found

    def arguments(self) -> dict[str, Any]:
        """The arguments this callback was built with (controls as themselves), by name."""
        return given_arguments(self, self._controlled)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        # Controls hold their readers weakly and copy or pickle without them: attach again.
        for source in self._controlled.values():
            control_of(source).attach(self)

    # -- per-target state ---------------------------------------------------------------------

    def add_state(self, name: str, tensor: torch.Tensor) -> None:
        """Keep ``tensor`` as this callback's state for target ``name`` (a buffer).

        Scripted, ``tensor`` is copied into the state kept for ``name``, which must exist
        with its shape: TorchScript cannot add buffers, and state derived again in an
        exported module (a control set, see :class:`~torchbend.callbacks.seeded.Seeded`)
        keeps its shape.
        """
        if torch.jit.is_scripting():
            self.state(name).copy_(tensor)
            return
        self._eager_add_state(name, tensor)

    def _eager_add_state(self, name: str, tensor: torch.Tensor) -> None:
        buffer = self._state_names.get(name)
        if buffer is None:
            buffer = state_buffer_name(name, self._state_names.values())
            self._state_names[name] = buffer
        self.register_buffer(buffer, tensor)
        self.revision += 1

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
            raise missing_state(repr(self), name, self._state_names)
        return getattr(self, buffer)

    def check_broadcast(self, state: torch.Tensor, x: torch.Tensor, name: str) -> None:
        """Raise a :class:`BendingError` if ``state`` cannot broadcast onto ``x``."""
        if not torch.jit.is_scripting():
            # Called on every streamed block: shapes already found to fit are not walked again.
            shapes = (state.shape, x.shape)
            if self._fitted.get(name) == shapes:
                return
            check_broadcast(self.label(), state, x, name)
            self._fitted[name] = shapes
            return
        check_broadcast(self.label(), state, x, name)

    # -- printing -------------------------------------------------------------------------------

    def label(self) -> str:
        """How errors name this callback: its repr (``"a bending callback"`` in TorchScript,
        which cannot print modules)."""
        if torch.jit.is_scripting():
            owner = "a bending callback"
        else:
            owner = repr(self)
        return owner

    def extra_repr(self) -> str:
        """The arguments that differ from their defaults (controls always, by name); none if
        they cannot be recovered."""
        try:
            return shown_arguments(self, self.arguments())
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
        done: list[BendingCallback] = []
        try:
            for cb in self.chained():
                new = name not in cb._targets
                cb.register(name, shape, dtype, device)
                if new:
                    done.append(cb)
        except BaseException:
            for cb in done:  # all or nothing, as for one callback
                cb.unregister(name)
            raise

    def unregister(self, name: str) -> None:
        for cb in self.chained():
            cb.unregister(name)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        for cb in self.chained():
            cb.register_target(name, shape, dtype, device)

    def control_changed(self) -> None:
        for cb in self.chained():
            cb.control_changed()

    @classmethod
    def neutral_setting(cls) -> dict[str, Any] | None:
        return {}  # a chain of no callback

    def arguments(self) -> dict[str, Any]:
        return {"callbacks": self.chained()}

    def static_factor(self, name: str) -> torch.Tensor | None:
        return static_product(self.chained(), name)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        for cb in self.callbacks:
            x = cb(x, name)
        return x

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        # Over the ModuleList itself, which TorchScript unrolls (it has no filtered
        # comprehensions, as chained() is): a chain inside another callback scripts.
        for cb in self.callbacks:
            weight = cb.bend_weight(weight, name)  # type: ignore[operator]
        return weight

    def __repr__(self) -> str:
        return " >> ".join(repr(cb) for cb in self.callbacks)
