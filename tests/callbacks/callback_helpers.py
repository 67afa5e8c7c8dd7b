"""Helpers shared by the callback tests, and the lists of cases drawn from the registry.

``BUILT``, ``CONTROLLED`` and ``NEUTRAL`` are made from every class of
``torchbend.callbacks.CALLBACKS`` and the arguments it declares, so that a new callback cannot
escape the round-trip, control, identity and scripting tests: its example arguments must be
added to ``EXAMPLES`` (a test fails until they are), and its neutral setting comes from its
declarations.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchbend.callbacks import CALLBACKS, BendingCallback, Capture, Chain
from torchbend.callbacks.argument import NO_NEUTRAL, declared
from torchbend.controls import BendingParameter
from torchbend.errors import BendingError

CPU = torch.device("cpu")
ACT = "forward:conv"
WEIGHT = "conv.weight"
SHAPE = torch.Size([2, 4, 16])


def registered(
    cb: BendingCallback, shape: list[int], name: str = ACT, dtype: torch.dtype = torch.float32
) -> BendingCallback:
    """``cb`` with its state allocated for target ``name`` of ``shape``."""
    cb.register_target(name, torch.Size(shape), dtype, CPU)
    return cb


def signed_randn(*shape: int) -> torch.Tensor:
    """Random values with a -0.0 first, which a sloppy identity would turn into +0.0."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x.view(-1)[0] = -0.0
    return x


def bits(x: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float32 tensor, to compare outputs bit for bit."""
    return x.view(torch.int32)


# -- cases drawn from the registry ---------------------------------------------------------------


def _captured() -> Capture:
    capture = Capture(capturing=True)
    capture(signed_randn(*SHAPE) + 1.0, ACT)
    capture.stop()
    return capture


# Arguments for each registered callback, other than its defaults and its neutral setting
# (seeded where it draws), which bend a target of SHAPE. Every declared argument is given.
EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    "Ablate": lambda: dict(channels=[0], fraction=0.25, dim=-2, seed=4),
    "Affine": lambda: dict(scale=2.0, bias=0.5),
    "Bias": lambda: dict(bias=0.5),
    "Capture": lambda: dict(capturing=True),
    "Clamp": lambda: dict(min=-0.5, max=0.25),
    "Dilate": lambda: dict(size=4),
    "Erode": lambda: dict(size=3),
    "Filter": lambda: dict(
        kind="bandpass", cutoff=0.2, resonance=2.0, dim=-1, mix=0.75, carry=False
    ),
    "Flip": lambda: dict(dim=(-2, -1), active=True),
    "InterpolateActivation": lambda: dict(sources=signed_randn(*SHAPE) + 1.0, weight=0.5),
    "InterpolationFromCapture": lambda: dict(capture=_captured(), weight=0.5, index=0),
    "Invert": lambda: dict(mode="one_minus", active=True),
    "Lambda": lambda: dict(fn=torch.sin),
    "Mask": lambda: dict(prob=0.5, dim=-2, seed=1),
    "Noise": lambda: dict(std=0.5, op="mul", dim=(-2, -1), seed=2),
    "Offset": lambda: dict(offset=0.5, dim=-2, seed=6),
    "Permute": lambda: dict(dim=-2, seed=3, amount=0.5),
    "Quantize": lambda: dict(bits=3),
    "Randomize": lambda: dict(fraction=0.5, std=2.0, seed=5),
    "Reverse": lambda: dict(block=5),
    "Roll": lambda: dict(shift=0.25, dim=-1),
    "Scale": lambda: dict(scale=-2.0),
    # A saved tensor of another batch size and length: fitted by repetition and cropping.
    "Rewire": lambda: dict(source="conv", amount=0.5),  # ACT is the source: it passes
    "Snapshot": lambda: dict(amount=0.5, saved={ACT: signed_randn(1, 4, 12) + 1.0}),
    "SoftClip": lambda: dict(drive=2.0),
    "Solo": lambda: dict(channels=[1, -1], dim=-2, active=True),
    "Spread": lambda: dict(amount=0.5),
    "Steer": lambda: dict(vector=signed_randn(4), strength=0.5, dim=-2, rms=2.0),
    "Gains": lambda: dict(vector=signed_randn(4), strength=0.5, dim=-2, rms=0.3),
    "Tanh": lambda: dict(active=True),
    "Threshold": lambda: dict(value=0.5),
    "ThresholdActivation": lambda: dict(keep=0.5, dim=-2),
    "TimeStretch": lambda: dict(factor=0.75),
    "Unphase": lambda: dict(shift=0.4, seed=7, dim=-2),
}

# Chain combines callbacks (and takes them as *callbacks): tests/callbacks/test_base.py tests it.
REGISTERED: list[type[BendingCallback]] = [cls for cls in CALLBACKS.values() if cls is not Chain]

# Those with examples: test_registry.py fails for the others, and for those that declare no
# neutral setting, which NEUTRAL leaves out.
_COVERED = [cls for cls in REGISTERED if cls.__name__ in EXAMPLES]


def _neutral_setting(cls: type[BendingCallback]) -> dict[str, Any] | None:
    try:
        return cls.neutral_setting()
    except BendingError:
        return None


def example(cls: type[BendingCallback], **changes: Any) -> BendingCallback:
    """``cls`` built with its example arguments, ``changes`` applied."""
    return cls(**{**EXAMPLES[cls.__name__](), **changes})


def _required(cls: type[BendingCallback]) -> dict[str, Any]:
    """The example values of the arguments of ``cls`` that have no default."""
    parameters = inspect.signature(cls.__init__).parameters
    given = EXAMPLES[cls.__name__]()
    return {n: given[n] for n, p in parameters.items() if n != "self" and p.default is p.empty}


def _other_value(cls: type[BendingCallback], arg: str, after: Any) -> Any:
    """A value of ``arg`` other than ``after``: its neutral value, its default, or near it."""
    neutral = declared(cls)[arg].neutral
    if neutral is not NO_NEUTRAL and neutral is not None:
        return neutral
    default = inspect.signature(cls.__init__).parameters[arg].default
    if default is not None and default != after:
        return default
    if isinstance(after, bool):
        return not after
    return after + 1 if isinstance(after, int) else after / 2


def _built(cls: type[BendingCallback]) -> Callable[[], BendingCallback]:
    return lambda: example(cls)


BUILT: list[Callable[[], BendingCallback]] = [_built(cls) for cls in _COVERED]
"""A factory of every registered callback with non-default arguments."""


def _controlled(cls: type[BendingCallback], arg: str) -> Callable[[Any], BendingCallback]:
    return lambda value: example(cls, **{arg: value})


CONTROLLED: list[tuple[str, Callable[[Any], BendingCallback], Any, Any]] = [
    (
        f"{cls.__name__}.{arg}",
        _controlled(cls, arg),
        _other_value(cls, arg, EXAMPLES[cls.__name__]()[arg]),
        EXAMPLES[cls.__name__]()[arg],
    )
    for cls in _COVERED
    for arg in declared(cls)
]
"""``(name, make from the argument's value, a value, another value)`` for every declared
argument of every registered callback: a control at the first value, set to the second, must
bend as the plain second value does."""


def _at_neutral(
    cls: type[BendingCallback], setting: dict[str, Any]
) -> Callable[[], BendingCallback]:
    def make() -> BendingCallback:
        # Every numeric neutral value as a control of its own.
        args = {
            name: None if value is None else BendingParameter(f"knob_{name}", value)
            for name, value in setting.items()
        }
        return cls(**_required(cls), **args)

    return make


NEUTRAL: list[tuple[str, Callable[[], BendingCallback]]] = [
    (cls.__name__, _at_neutral(cls, setting))
    for cls in _COVERED
    if (setting := _neutral_setting(cls)) is not None
]
"""``(name, make)`` for every registered callback that has a neutral setting: built with its
required arguments and its neutral setting, controls for numbers, it must be the identity."""


class ConvNet(nn.Module):
    """A small model with a ``conv`` activation and an ``out.weight``, to bend end to end."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3, padding=1)
        self.out = nn.Conv1d(4, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.conv(x)))
