"""The options of ``bend`` that say how any callback applies: a subset of the target, a window
in time or in calls, a guard against blow-ups (see :mod:`torchbend.engine.shaping`, which
applies them)."""

# No ``from __future__ import annotations``: the options are dataclasses whose signatures
# (shown by ``help`` and checked by the API snapshot) keep their real types.

import math
from dataclasses import dataclass
from typing import Any

from ..controls import Control
from ..errors import BendingError

__all__ = ["UNITS", "Guard", "Subset", "Window", "options"]

UNITS = ("samples", "seconds", "calls")


@dataclass(frozen=True)
class Subset:
    """Bend only a ``fraction`` of the target: of its elements (``dim=None``), or of whole
    slices along ``dim`` (``dim=-2``: channels of ``[batch, channels, time]``), drawn from
    ``seed`` once per target. ``fraction`` may be a control: raising it keeps what was bent
    and bends more."""

    fraction: float | Control
    dim: int | tuple[int, ...] | None = None
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        dim = list(self.dim) if isinstance(self.dim, tuple) else self.dim
        return {"fraction": self.fraction, "dim": dim, "seed": self.seed}


@dataclass(frozen=True)
class Window:
    """Where a bending of activations applies.

    ``unit="samples"``: from sample ``start`` to ``end`` (excluded; ``None``: the end) of the
    last (time) axis of each call's activation, faded in and out over ``fade`` samples inside
    the window. ``unit="seconds"``: the same in seconds, at the rate of each activation (the
    model's sample rate times the activation's length over the input's: a latent at 1/2048
    of the rate has its window 2048 times shorter in samples). With ``stream=True``, positions
    count along the calls (blocks of a stream) since the bending was made (or since
    :meth:`Shaped.rewind`) instead of from each call's start.

    ``unit="calls"``: in calls ``start`` to ``end`` (excluded) of the target, counted from 0
    since it was bent (or since :meth:`Shaped.rewind`), modulo ``period`` if given: calls 10
    to 20 of each 50-step diffusion loop are ``Window(10, 20, unit="calls", period=50)``.
    """

    start: float = 0
    end: float | None = None
    unit: str = "samples"
    fade: float = 0
    period: int | None = None
    stream: bool = False

    def __post_init__(self) -> None:
        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool)

        if self.unit not in UNITS:
            raise BendingError(
                f"Window: unit must be one of {', '.join(map(repr, UNITS))}, got {self.unit!r}"
            )
        if not (number(self.start) and math.isfinite(self.start) and self.start >= 0):
            raise BendingError(f"Window: start must be a finite number >= 0, got {self.start!r}")
        if self.end is not None and not (
            number(self.end) and math.isfinite(self.end) and self.end > self.start
        ):
            raise BendingError(
                f"Window: end must be None (the end) or a number > start ({self.start!r}), "
                f"got {self.end!r}"
            )
        if not (number(self.fade) and math.isfinite(self.fade) and self.fade >= 0):
            raise BendingError(f"Window: fade must be a finite number >= 0, got {self.fade!r}")
        if not isinstance(self.stream, bool) or (self.stream and self.unit == "calls"):
            raise BendingError(
                f"Window: stream is True or False, for a window in samples or seconds; got "
                f"{self.stream!r} (unit={self.unit!r})"
            )
        if self.unit == "calls":
            if self.fade:
                raise BendingError("Window: a window in calls has no fade; give fade=0")
            whole = [v for v in (self.start, self.end) if v is not None]
            if any(float(v) != int(v) for v in whole):
                raise BendingError(f"Window: calls are counted in whole numbers, got {self}")
        if self.period is not None and (
            not isinstance(self.period, int)
            or isinstance(self.period, bool)
            or self.period < 1
            or self.unit != "calls"
        ):
            raise BendingError(
                f"Window: period is a number of calls >= 1 (unit='calls'), got {self.period!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "unit": self.unit,
            "fade": self.fade,
            "period": self.period,
            "stream": self.stream,
        }


@dataclass(frozen=True)
class Guard:
    """Keep a bending from blowing up: non-finite values (NaN, Inf) become 0 (``finite``),
    the spread of the bent value is brought down to at most ``std`` times the unbent one's,
    around its mean (``std=None``: no limit), and the bent value is rescaled to the norm of
    the unbent one (``norm``)."""

    finite: bool = True
    std: float | None = 4.0
    norm: bool = False

    def __post_init__(self) -> None:
        for name in ("finite", "norm"):
            if not isinstance(getattr(self, name), bool):
                raise BendingError(f"Guard: {name} is True or False, got {getattr(self, name)!r}")
        std = self.std
        if std is not None and not (
            isinstance(std, (int, float))
            and not isinstance(std, bool)
            and math.isfinite(std)
            and std > 0
        ):
            raise BendingError(f"Guard: std must be None or a finite number > 0, got {std!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"finite": self.finite, "std": self.std, "norm": self.norm}


def options(
    blend: float | Control | None = None,
    subset: float | Control | Subset | None = None,
    window: Window | tuple[float, float | None] | None = None,
    guard: bool | Guard | None = None,
) -> dict[str, Any]:
    """The options given to ``bend``, checked, in their own types (a fraction as a
    :class:`Subset`, ``(start, end)`` as a :class:`Window`, ``True`` as a :class:`Guard`,
    ``guard=False`` kept: no guard, not even the model's), without those not given."""
    if isinstance(subset, bool) or isinstance(window, bool):
        raise BendingError(
            f"subset is a fraction or a tb.Subset and window a tb.Window or (start, end); got "
            f"subset={subset!r}, window={window!r}"
        )
    if subset is not None and not isinstance(subset, Subset):
        subset = Subset(subset)
    if isinstance(window, tuple):
        if len(window) != 2:
            raise BendingError(f"window=(start, end) takes two numbers, got {window!r}")
        window = Window(*window)
    if window is not None and not isinstance(window, Window):
        raise BendingError(f"window is a tb.Window or (start, end), got {window!r}")
    if guard is True:
        guard = Guard()
    if guard is not None and guard is not False and not isinstance(guard, Guard):
        raise BendingError(f"guard is True, False or a tb.Guard, got {guard!r}")
    given = {"blend": blend, "subset": subset, "window": window, "guard": guard}
    return {k: v for k, v in given.items() if v is not None}
