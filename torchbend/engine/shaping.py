"""How a bending applies, whatever its callback: dry/wet blend, a subset of the target, a
window in time or in calls, and a guard against blow-ups.

``bended.bend(cb, "conv$", blend=0.3, subset=0.25, window=tb.Window(0, 4096), guard=True)``
applies ``cb`` through a :class:`Shaped` callback that holds these settings. They are one
mechanism: the output is the unbent value ``x`` moved towards the bent one ``cb(x)`` by a
weight ``w = blend * subset mask * window envelope``, then guarded.
"""

# No ``from __future__ import annotations``: TorchScript reads the types of the class
# annotations of Shaped (``steps``: an empty dict at first) only from real types.

import math
from typing import Any

import torch

from ..callbacks.argument import Argument
from ..callbacks.axes import as_dims
from ..callbacks.base import BendingCallback
from ..callbacks.bend_options import Guard, Subset, Window
from ..callbacks.draws import draw_key
from ..callbacks.seeded import Seeded
from ..controls import Control
from ..errors import BendingError

__all__ = ["Shaped", "Steps", "shaping"]


class Shaped(Seeded):
    """``callback`` applied with a blend, to a subset, inside a window, under a guard (see
    :func:`shaping`, which ``BendedModule.bend`` calls; build one through ``bend``).

    Args:
        callback: the callback that bends.
        blend: dry/wet, from 0 (the unbent value, bit for bit) to 1 (the bent one, bit for
            bit). May be a control; while it ramps, activations get the change spread along
            time.
        subset: the part of the target bent (see :class:`Subset`), or ``None`` for all of it.
        window: where activations are bent (see :class:`Window`), or ``None``: everywhere.
        guard: what keeps the bent value in check (see :class:`Guard`), or ``None``.

    Notes:
        Where the weight is 0 the unbent value passes untouched (a NaN the callback gave
        there is not mixed in). Outside a window in calls, the callback is not called.
    """

    subset_dims: list[int] | None
    """The axes the subset varies along (``None``: every axis)."""
    steps: dict[str, int]
    """Per target, the calls counted (a window in calls) or the samples passed (a window
    along a stream)."""
    rates: dict[str, float]
    """Per target, its sample rate (for a window in seconds)."""
    envelopes: dict[str, torch.Tensor]
    """Per target, the window's envelope of the last call (not along a stream)."""
    _state_names: dict[str, str]  # empty without a subset: TorchScript needs its type

    blend = Argument(float, low=0.0, high=1.0, neutral=0.0, meaning="a dry/wet mix", ramps=True)
    subset = Argument(
        float, low=0.0, high=1.0, meaning="the fraction of the target bent", derives=True
    )

    def __init__(
        self,
        callback: BendingCallback,
        blend: float | Control = 1.0,
        subset: Subset | None = None,
        window: Window | None = None,
        guard: Guard | None = None,
    ) -> None:
        super().__init__(0 if subset is None else subset.seed)
        if not isinstance(callback, BendingCallback):
            raise BendingError(f"Shaped bends with a BendingCallback, got {callback!r}")
        self.callback = callback
        self.scriptable = callback.scriptable  # type: ignore[misc]
        self.blend = blend
        self._subset, self._window, self._guard = subset, window, guard
        self.subsetted = subset is not None
        self.subset = 1.0 if subset is None else subset.fraction
        self.subset_dims = None if subset is None else as_dims("Subset", subset.dim)
        self.window_unit = "" if window is None else window.unit
        self.window_start = 0.0 if window is None else float(window.start)
        self.window_end = math.inf if window is None or window.end is None else float(window.end)
        self.window_fade = 0.0 if window is None else float(window.fade)
        self.window_period = 0 if window is None or window.period is None else window.period
        self.window_stream = window is not None and window.stream
        self.steps = {}
        self.rates = {}
        self.envelopes = {}
        self.guard_finite = guard is not None and guard.finite
        self.guard_std = 0.0 if guard is None or guard.std is None else float(guard.std)
        self.guard_norm = guard is not None and guard.norm

    # -- targets ---------------------------------------------------------------------------------

    def register(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        new = name not in self.callback._targets
        self.callback.register(name, shape, dtype, device)
        try:
            super().register(name, shape, dtype, device)
        except BaseException:
            if new:
                self.callback.unregister(name)
            raise

    def unregister(self, name: str) -> None:
        super().unregister(name)
        self.callback.unregister(name)
        self.steps.pop(name, None)
        self.envelopes.pop(name, None)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        if self.window_unit and ":" not in name:
            raise BendingError(
                f"{self!r} cannot bend weight '{name}': a window applies to activations (a "
                "weight is bent once, not along time or calls); bend the weight without one"
            )
        if self.window_unit in ("samples", "seconds") and len(shape) == 0:
            raise BendingError(f"{self!r} cannot bend '{name}': it has no time axis (a scalar)")
        if self.subsetted:
            self.check_axes(name, shape, self.subset_dims)
        self.draw(name, list(shape), dtype, device)

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        if not self.subsetted:
            return
        self.draw_uniform(name, shape, self.subset_dims, device)
        self.derive(name, shape, dtype, device)

    def derive(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        if self.subsetted:
            noise = self.state(draw_key(name))
            self.add_state(name, (noise < self.subset).to(dtype))

    def place(self, name: str, rate: float | None) -> None:
        """Give target ``name`` its sample rate, for a window in seconds (what
        ``BendedModule.bend`` does: ``rate`` is ``None`` where it cannot tell)."""
        if rate is None:
            raise BendingError(
                f"{self!r} cannot bend '{name}': a window in seconds needs the model's "
                "sample rate and the activation's time axis; set bended.sample_rate, or "
                "give the window in samples"
            )
        self.rates[name] = float(rate)
        self.envelopes.pop(name, None)

    def rewind(self) -> None:
        """Count calls (or samples along a stream) from 0 again (a new diffusion loop, a new
        sound)."""
        self.steps.clear()

    def counters(self) -> "Steps":
        """The calls counted, as state a trace puts back (it counts no call of the user's)."""
        return Steps(self.steps)

    # -- bending ---------------------------------------------------------------------------------

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if self.window_unit == "calls":
            step = self.steps.get(name, 0)
            self.steps[name] = step + 1
            if self.window_period > 0:
                step = step % self.window_period
            if step < self.window_start or step >= self.window_end:
                return x
        offset = 0  # where x starts along the stream
        if self.window_stream:
            offset = self.steps.get(name, 0)
            self.steps[name] = offset + x.shape[-1]
        blend = self.along("blend", x)
        if isinstance(blend, torch.Tensor):
            bent = self.callback(x, name)
            return self._guarded(self._mixed(x, bent, name, blend, offset), x)
        if blend == 0.0:
            return x
        return self._guarded(self._mixed(x, self.callback(x, name), name, blend, offset), x)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        blend = self.blend
        if blend == 0.0:
            return weight
        bent = self.callback.bend_weight(weight, name)
        return self._guarded(self._mixed(weight, bent, name, blend), weight)

    def _mask(self, x: torch.Tensor, name: str, offset: int) -> torch.Tensor | None:
        """Where the bending applies, if not everywhere: the subset's mask times the
        window's envelope."""
        mask: torch.Tensor | None = None
        if self.subsetted:
            mask = self.state(name)
            self.check_broadcast(mask, x, name)
        if self.window_unit == "samples" or self.window_unit == "seconds":
            envelope = self._envelope(x, name, offset)
            mask = envelope if mask is None else mask * envelope
        return mask

    def _mixed(
        self,
        x: torch.Tensor,
        bent: torch.Tensor,
        name: str,
        blend: float | torch.Tensor,
        offset: int = 0,
    ) -> torch.Tensor:
        """``x`` moved towards ``bent`` by ``blend`` where the mask is 1."""
        mask = self._mask(x, name, offset)
        if mask is None:
            if isinstance(blend, torch.Tensor):
                return torch.lerp(x, bent.to(x.dtype), blend.to(x.dtype))
            if blend == 1.0:
                return bent
            if not x.is_floating_point():
                return bent if blend >= 0.5 else x
            return torch.lerp(x, bent.to(x.dtype), blend)
        if not self.window_unit and not isinstance(blend, torch.Tensor):
            # A subset alone: a mask of 0 and 1, where the bent value is taken or not.
            if blend != 1.0 and x.is_floating_point():
                bent = torch.lerp(x, bent.to(x.dtype), blend)
            return torch.where(mask != 0.0, bent, x)
        if isinstance(blend, torch.Tensor):
            weight = mask * blend
        else:
            weight = mask * blend
        w = torch.broadcast_to(weight, torch.broadcast_shapes(weight.shape, x.shape))
        if not x.is_floating_point():
            return torch.where(w > 0.5, bent, x)
        # lerp gives the ends exactly; where w is 0, x passes as it is (not x + 0 * nan).
        return torch.where(w == 0.0, x, torch.lerp(x, bent.to(x.dtype), w.to(x.dtype)))

    def _envelope(self, x: torch.Tensor, name: str, offset: int) -> torch.Tensor:
        """1 inside the window, 0 outside, faded over ``fade`` samples inside its edges (kept
        for the next call of the same length, unless the window moves along a stream)."""
        if not self.window_stream and name in self.envelopes:
            kept = self.envelopes[name]
            if kept.shape[-1] == x.shape[-1] and kept.device == x.device:
                if kept.dtype == x.dtype or not x.is_floating_point():
                    return kept
        envelope = self._new_envelope(x, name, offset)
        if not self.window_stream:
            self.envelopes[name] = envelope
        return envelope

    def _new_envelope(self, x: torch.Tensor, name: str, offset: int) -> torch.Tensor:
        scale = 1.0
        if self.window_unit == "seconds":
            if name not in self.rates:
                raise BendingError(f"no sample rate for '{name}': a window in seconds needs one")
            scale = self.rates[name]
        start, end, fade = (
            self.window_start * scale,
            self.window_end * scale,
            self.window_fade * scale,
        )
        t = torch.arange(x.shape[-1], device=x.device, dtype=torch.float64) + offset
        inside = (t >= start) & (t < end)
        envelope = inside.to(torch.float64)
        if fade > 0.0:
            rise = (t - start + 1.0) / fade
            envelope = torch.minimum(envelope, rise.clamp(0.0, 1.0))
            if not math.isinf(end):
                fall = (end - t) / fade
                envelope = torch.minimum(envelope, fall.clamp(0.0, 1.0))
        return envelope.to(x.dtype) if x.is_floating_point() else envelope

    def _guarded(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if not y.is_floating_point():
            return y
        if self.guard_finite:
            y = torch.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0)
        if self.guard_std > 0.0 and y.numel() > 1:
            limit = self.guard_std * x.to(y.dtype).std()
            spread, mean = torch.std_mean(y)
            scaled = mean + (y - mean) * (limit / spread)
            y = torch.where(spread > limit, scaled, y)
        if self.guard_norm:
            norm = torch.linalg.vector_norm(y)
            target = torch.linalg.vector_norm(x.to(y.dtype))
            y = torch.where(norm > 0.0, y * (target / norm), y)
        return y

    # -- description -----------------------------------------------------------------------------

    def arguments(self) -> dict[str, Any]:
        return {
            "callback": self.callback,
            "blend": self._controlled.get("blend", self.blend),
            "subset": self._subset,
            "window": self._window,
            "guard": self._guard,
        }

    def settings(self) -> dict[str, Any]:
        """The settings it applies with, as ``bend`` takes them (the model's guard too):
        :meth:`arguments` but the callback, those left out, and a plain ``blend`` of 1."""
        settings = {k: v for k, v in self.arguments().items() if v is not None}
        del settings["callback"]
        if "blend" not in self._controlled and settings["blend"] == 1.0:
            del settings["blend"]
        return settings

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={_shown(v)}" for k, v in self.settings().items())
        return f"{self.callback!r} [{shown}]"


class Steps:
    """The calls a :class:`Shaped` counted, saved and put back as a generator's state is."""

    def __init__(self, steps: dict[str, int]) -> None:
        self.steps = steps

    def get_state(self) -> dict[str, int]:
        return dict(self.steps)

    def set_state(self, state: dict[str, int]) -> None:
        self.steps.clear()
        self.steps.update(state)


def _shown(value: Any) -> str:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else repr(value)


def shaping(
    callback: BendingCallback, given: dict[str, Any], default: Guard | None = None
) -> BendingCallback:
    """``callback`` applied with the :func:`options` ``given`` (a :class:`Shaped`), or
    ``callback`` itself when there are none: what ``BendedModule.bend(callback, ...,
    blend=, subset=, window=, guard=)`` bends with. Without a guard, the ``default`` one (the
    model's) applies; ``guard=False`` applies none."""
    guard = given.get("guard")
    guard = default if guard is None else guard or None
    blend, subset, window = given.get("blend"), given.get("subset"), given.get("window")
    if blend is None and subset is None and window is None and guard is None:
        return callback
    try:
        return Shaped(callback, 1.0 if blend is None else blend, subset, window, guard)
    except BendingError as e:  # named as bend() takes them, not by the class applying them
        raise BendingError(f"bend(): {str(e).removeprefix('Shaped: ')}") from None
