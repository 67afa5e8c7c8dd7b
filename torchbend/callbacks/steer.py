"""Steer: push an activation along a direction, per channel, by a multiple of its own RMS."""

# TorchScript reads the types of the buffers ``vector`` and ``unit`` only from class
# annotations that are real types, not strings: this is why this module, unlike most, does not
# import ``annotations`` from ``__future__``.

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..controls import BendingParameter, Control, TensorParameter, is_control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dim, call_axis, normalized_dim
from .base import BendingCallback
from .capture import at_zero

__all__ = ["Gains", "Steer", "steer_shape_error"]


def steer_shape_error(owner: str, name: str, shape: list[int], vector: list[int], dim: int) -> str:
    """The message for a target whose axes from ``dim`` on are not the vector's (scriptable)."""
    return (
        f"{owner} cannot bend '{name}' of shape {shape}: its vector has shape {vector}, which "
        f"must be the target's sizes from axis dim={dim} on (its channels, and its frequencies "
        "where it has them); compute the vector at this node, or give the dim of its channels"
    )


class Steer(BendingCallback):
    """Add a steering vector to the target, scaled by ``strength`` times the target's RMS.

    The output is ``x + strength * rms * unit``, ``unit`` the given vector divided by its own
    RMS (the square root of the mean of its squares, so that ``unit`` has an RMS of 1) and
    laid along the target's axes from ``dim`` on: a vector of shape ``[channels]`` adds one
    number to each channel of a ``[batch, channels, time]`` activation (``dim=-2``), at every
    time step; one of shape ``[channels, freq]`` adds one number to each channel and frequency
    of a ``[batch, channels, freq, time]`` activation (``dim=-3``, or ``1``). The vector is
    usually a difference of the mean activations on two example sounds:
    :func:`torchbend.discover.steering_vector` computes it and the RMS, and
    :func:`torchbend.discover.steer_between` returns the Steer.

    Args:
        vector: the direction, a tensor of finite floats, not all zero (a list of numbers is
            taken too). Kept as a buffer: ``.to()`` moves it and exported files hold it as a
            constant. Or a :class:`~torchbend.TensorParameter` of the vector's length, which
            sets it live (``bended.update``, a Pd array in nn~): its value is then used as
            given, not divided by its RMS (``unit`` is the value, ``rms`` is 1 and may not be
            given), so that zeros are the identity.
        strength: how far to push, in multiples of ``rms``: the offset added to the target
            has an RMS (over its elements) of ``abs(strength) * rms``, so that ``strength=1``
            moves the activation by as much as its own RMS on the examples; ``0`` is the
            identity (exact), a negative strength pushes the other way (from B back past A).
            May be a control; while it ramps, activations get the change spread along their
            last (time) axis.
        dim: the axis of the target's channels (negative counting from the end), where the
            vector's first axis lies; its other axes lie on the next ones.
        rms: the RMS of the target on the examples, a finite number > 0, in the target's own
            units; ``None`` takes the vector's own RMS, so that ``strength=1`` adds the vector
            as given.

    Shape:
        - Input: any shape whose sizes from axis ``dim`` on start with the vector's shape.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Steer
        >>> steer = Steer(torch.tensor([1.0, -1.0]), strength=0.5, rms=2.0)
        >>> steer(torch.zeros(1, 2, 3), "act")
        tensor([[[ 1.,  1.,  1.],
                 [-1., -1., -1.]]])
        >>> steer.strength = 0.0
        >>> steer(torch.ones(1, 2, 1), "act")
        tensor([[[1.],
                 [1.]]])
    """

    vector: torch.Tensor
    """The vector as given (what a configuration saves)."""
    unit: torch.Tensor
    """The vector divided by its RMS: the direction, whose RMS is 1."""

    strength = Argument(float, neutral=0.0, meaning="a multiple of the target's RMS", ramps=True)

    def __init__(
        self,
        vector: torch.Tensor | Sequence[Any] | TensorParameter,
        strength: float | Control = 1.0,
        dim: int = -2,
        rms: float | None = None,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if isinstance(vector, TensorParameter):
            self._init_controlled(vector, strength, dim, rms)
            return
        given = vector if isinstance(vector, torch.Tensor) else _as_tensor(owner, vector)
        if not given.is_floating_point() or given.dim() == 0 or given.numel() == 0:
            raise BendingError(
                f"{owner}: vector must be a tensor of floats with at least one axis (its "
                f"channels) and one element, got a {given.dtype} tensor of shape "
                f"{list(given.shape)}"
            )
        if not bool(torch.isfinite(given).all()):
            raise BendingError(f"{owner}: vector must hold finite numbers, got {given}")
        own = float(given.double().pow(2).mean().sqrt())
        if own == 0.0:
            raise BendingError(
                f"{owner}: vector is zero everywhere, so it has no direction; the two "
                "examples it was computed from give the same means at this node"
            )
        if rms is not None and (
            isinstance(rms, bool) or not isinstance(rms, (int, float)) or not 0 < rms < math.inf
        ):
            raise BendingError(
                f"{owner}: rms must be a finite number > 0 (the target's RMS, in its own "
                f"units) or None (the vector's own), got {rms!r}"
            )
        self.dim = as_dim(owner, dim)
        self._rms = None if rms is None else float(rms)
        self.rms: float = own if rms is None else float(rms)
        """The RMS that ``strength`` counts in: the offset at ``strength=1`` has this RMS."""
        data = given.detach().clone()
        self.register_buffer("vector", data)
        self.register_buffer("unit", (data.double() / own).to(data.dtype))
        self.strength = strength

    def _init_controlled(
        self, control: TensorParameter, strength: float | Control, dim: int, rms: float | None
    ) -> None:
        """A vector that a tensor control sets live, used as given (``unit`` is the vector,
        ``rms`` is 1): the RMS of a vector a patch draws may be 0 (the identity)."""
        owner = type(self).__name__
        if rms is not None:
            raise BendingError(
                f"{owner}: a vector given as tensor control {control.name!r} is used as "
                f"given (strength * vector); leave rms out, got rms={rms!r}"
            )
        self.dim = as_dim(owner, dim)
        self._rms = None
        self.rms = 1.0
        data = control.get()
        self.register_buffer("vector", data)
        self.register_buffer("unit", data.clone())
        self.strength = strength
        self._controlled["vector"] = control
        control.attach(self)

    def follow(self, control: BendingParameter) -> None:
        """Take the new value of ``control``: a tensor control's into the vector."""
        if isinstance(control, TensorParameter) and control is self._controlled.get("vector"):
            self.revision += 1
            with torch.no_grad():
                self.set_vector(control.get())
            return
        super().follow(control)

    @torch.jit.export
    def set_vector(self, value: torch.Tensor) -> None:
        """Copy ``value`` (a tensor control's) into ``vector`` and ``unit``, in place:
        what an exported module's setter calls, scripted."""
        self.vector.copy_(value)
        self.unit.copy_(value)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        owner = repr(self)
        axis = normalized_dim(owner, self.dim, shape, name)
        size = list(self.unit.shape)
        if list(shape)[axis : axis + len(size)] != size:
            raise BendingError(steer_shape_error(owner, name, list(shape), size, self.dim))

    def shaped(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """``unit`` laid along ``x``'s axes from ``dim`` on (size 1 on the axes after it), of
        ``x``'s dtype and device (scriptable)."""
        axis = call_axis(x, self.dim, self.label(), name)
        size = list(self.unit.shape)
        if list(x.shape)[axis : axis + len(size)] != size:
            raise BendingError(steer_shape_error(self.label(), name, list(x.shape), size, self.dim))
        trailing = x.dim() - axis - len(size)
        return self.unit.reshape(size + [1] * trailing).to(dtype=x.dtype, device=x.device)

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        strength = self.along("strength", x)
        if at_zero(strength):
            return x
        unit = self.shaped(x, name)
        # One line per type of ``strength``: TorchScript needs the branch to know the product.
        if isinstance(strength, torch.Tensor):
            return self.move(x, unit * (strength * self.rms))
        return self.move(x, unit * (strength * self.rms))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        strength = self.strength
        if strength == 0.0:
            return weight
        return self.move(weight, self.shaped(weight, name) * (strength * self.rms))

    def move(self, x: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
        """``x`` moved by ``step`` (``strength * rms * unit``, laid along ``x``): added."""
        return x + step

    def extra_repr(self) -> str:
        """The vector's shape (not its values), and the other arguments that differ from
        their defaults (controls by name)."""
        vector = self._controlled.get("vector")
        shown = [
            f"vector=<{list(self.vector.shape)}>" if vector is None else f"vector={vector.name}"
        ]
        strength: Any = self._controlled.get("strength", self.strength)
        if isinstance(strength, BendingParameter):
            shown.append(f"strength={strength.name}")
        elif is_control(strength) or strength != 1.0:
            shown.append(f"strength={strength!r}")
        if self.dim != -2:
            shown.append(f"dim={self.dim}")
        if self._rms is not None:
            shown.append(f"rms={self._rms!r}")
        return ", ".join(shown)


def _as_tensor(owner: str, vector: Any) -> torch.Tensor:
    try:
        return torch.tensor(vector, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError) as e:
        raise BendingError(
            f"{owner}: vector must be a tensor (or a list) of numbers, got {vector!r}"
        ) from e


class Gains(Steer):
    """Multiply each channel of the target by its own gain: ``x * exp(strength * rms * unit)``,
    the multiplicative twin of :class:`Steer` (its vector, ``unit``, ``dim`` and ``rms``
    are read the same way).

    The exponent is in nepers: at ``strength * rms = 1`` a channel whose ``unit`` value is
    ``u`` is multiplied by ``e**u`` (``u = 0.115`` is 1 dB). ``strength`` 0 is the identity
    (exact), a negative strength divides where a positive one multiplies. A gain cannot
    change a channel's sign nor bring a silent channel in: where :class:`Steer` moves an
    activation along a direction, ``Gains`` re-balances the channels it has (the bands of a
    filter-bank latent, say). :func:`torchbend.discover.knob` builds one from a ranking made
    with ``probe="scale"``.

    Args:
        vector: the log-gain direction, a tensor of finite floats, not all zero; or a
            :class:`~torchbend.TensorParameter` that sets it live, used as given: a log-gain
            per channel, in nepers at ``strength=1`` (zeros: the identity).
        strength: how far to go along it: the exponent's RMS over the channels is
            ``abs(strength) * rms``. May be a control; it ramps along the last axis.
        dim: the axis of the target's channels, where the vector's first axis lies.
        rms: the exponent's RMS at ``strength=1`` (in nepers), a finite number > 0; ``None``
            takes the vector's own, so that ``strength=1`` uses the vector as given.

    Example:
        >>> import math, torch
        >>> from torchbend.callbacks import Gains
        >>> gains = Gains(torch.tensor([1.0, -1.0]), strength=1.0, rms=math.log(2))
        >>> gains(torch.ones(1, 2, 2), "act")
        tensor([[[2.0000, 2.0000],
                 [0.5000, 0.5000]]])
    """

    def move(self, x: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
        """``x`` multiplied by ``exp(step)``: the step is in nepers."""
        return x * torch.exp(step)
