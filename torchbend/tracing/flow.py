"""Control-flow decisions baked into a traced graph, and the guards that check them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.fx

from .compat import has_side_effect

__all__ = [
    "EFFECTS",
    "READERS",
    "DecisionChanged",
    "FlowStep",
    "check_decision",
    "effect",
    "is_guard",
]


@dataclass(frozen=True)
class FlowStep:
    """One decision the tracer took from a concrete value and baked into the graph."""

    kind: str
    """``"logical"`` (an ``if``/``bool``), ``"loop"`` (iterating a traced value or ``range``
    over a traced number) or ``"value"`` (a traced number read as a Python ``int``/``float``)."""
    name: str
    """Name of the graph node the decision was read from."""
    value: Any
    """The value taken at trace time (a bool, a length or a number)."""
    file: str
    """``path:line`` of the user code that took the decision."""
    function: str
    """Name of the user function that took the decision."""
    checked: str
    """``"signature"`` when the decision is a function of input shapes or scalar arguments
    (checked before the call), ``"runtime"`` when it depends on tensor data (checked inside
    the graph), ``"constant"`` when it depends on nothing that can change between calls."""

    def __repr__(self) -> str:
        kind = {"logical": "LogicalFlowStep", "loop": "LoopFlowStep"}.get(
            self.kind, "ValueFlowStep"
        )
        return f"{kind}(name={self.name}, value={self.value!r}, file={self.file}:{self.function})"


class DecisionChanged(Exception):
    """Raised inside a graph when a data-dependent decision differs from the traced one."""

    def __init__(self, step: int, expected: Any, got: Any) -> None:
        super().__init__(step, expected, got)
        self.step = step
        self.expected = expected
        self.got = got


READERS: dict[str, Callable[[Any], Any]] = {
    "bool": bool,
    "len": len,
    "int": int,
    "float": float,
    "none": lambda value: value is None,
    "str": lambda value: value if type(value) is str else None,
}


EFFECTS: set[Callable[..., Any]] = set()
"""Functions graphs call for their effect alone (they return nothing, are no activation)."""


def effect(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a graph call made for its effect (kept by dead-code elimination too)."""
    EFFECTS.add(fn)
    return has_side_effect(fn)


@effect
def check_decision(value: Any, how: str, expected: Any, step: int) -> None:
    """Raise :class:`DecisionChanged` when ``value`` no longer gives the traced decision.

    Inserted into graphs right after the node a data-dependent decision was read from.
    """
    got = READERS[how](value)
    if got != expected:
        raise DecisionChanged(step, expected, got)


def is_guard(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls an :data:`EFFECTS` function (:func:`check_decision`, an
    attribute's assignment): it runs for its effect, returns nothing, and is no activation."""
    return node.op == "call_function" and node.target in EFFECTS
