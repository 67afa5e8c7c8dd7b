"""What callbacks keep and compute per target: the buffer of its state, the error for a target
without any, the check that it broadcasts onto a call, the product of static factors."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ..errors import BendingError

__all__ = ["check_broadcast", "missing_state", "state_buffer_name", "static_product"]


def state_buffer_name(name: str, taken: Iterable[str]) -> str:
    """The name of a new buffer for the state of target ``name``: ``state_<i>_<name>`` with
    every character of ``name`` a buffer name cannot hold replaced, and the first ``i`` not
    ``taken``."""
    safe, used = re.sub(r"[^0-9a-zA-Z_]", "_", name), set(taken)
    index = 0
    while f"state_{index}_{safe}" in used:
        index += 1
    return f"state_{index}_{safe}"


def missing_state(owner: str, name: str, registered: Iterable[str]) -> BendingError:
    """The error for a lookup of the state of target ``name`` in callback ``owner`` (its
    repr), which keeps state for ``registered`` targets only."""
    return BendingError(
        f"{owner} has no state for target '{name}'; it was registered for "
        f"{sorted(registered) or 'no target'}. Bend targets through "
        "BendedModule.bend so that their state is allocated."
    )


def check_broadcast(owner: str, state: torch.Tensor, x: torch.Tensor, name: str) -> None:
    """Raise a :class:`BendingError` if ``state``, kept by callback ``owner`` for target
    ``name``, cannot broadcast onto ``x`` (scriptable)."""
    fits = state.dim() <= x.dim()
    if fits:
        for i in range(1, state.dim() + 1):
            if state.shape[-i] != 1 and state.shape[-i] != x.shape[-i]:
                fits = False
    if not fits:
        raise BendingError(
            f"{owner} holds state of shape {list(state.shape)} for '{name}', which "
            f"was traced with that shape, but was called on a tensor of shape "
            f"{list(x.shape)}. Give the callback dim= (for instance dim=-2 to act on "
            f"channels only) so that its state broadcasts over any shape."
        )


def static_product(callbacks: Sequence[Any], name: str) -> torch.Tensor | None:
    """The product of the :meth:`~BendingCallback.static_factor` of ``callbacks`` on target
    ``name`` (what applying them in turn multiplies by), if each has one; else ``None``."""
    factor: torch.Tensor | None = None
    for cb in callbacks:
        f = cb.static_factor(name)
        if f is None:
            return None
        factor = f if factor is None else factor * f
    return factor
