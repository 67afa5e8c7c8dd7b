"""What ``bend()`` is given, checked: the callback and its patterns, and for a
:class:`~torchbend.Rewire` the activation it reads, added to its targets."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..callbacks.base import BendingCallback
from ..callbacks.rewire import Rewire
from ..errors import BendingError, SelectionError, did_you_mean
from ..tracing import record_of
from .dispatch import Entry, Method
from .selection import Selection

__all__ = ["check_callback", "rewire_sources"]


def rewire_sources(
    rewire: Rewire, selection: Selection, entries: Iterable[tuple[Method, Entry]]
) -> tuple[str, ...]:
    """The patterns selecting the source of ``rewire`` in each method whose activations
    ``selection`` holds, checked: the source is an activation of the method, computed before
    every target in each of its graphs."""
    if selection.weights:
        raise SelectionError(
            f"{rewire!r} feeds activations from an activation; the patterns select weights "
            f"too: {selection.weights[:3]}"
        )
    methods = {}
    for method, entry in entries:
        targets = selection.activations.get(method.key)
        if not targets:
            continue
        nodes = entry.nodes(tensors_only=True)
        order = {n.name: i for i, n in enumerate(nodes)}
        if rewire.source not in order:
            raise SelectionError(
                f"{rewire!r}: {method.key} has no activation {rewire.source!r}"
                + did_you_mean(rewire.source, list(order), 3)
            )
        ranks = {n.name: len(record_of(n).shape) for n in nodes}
        rank = ranks[rewire.source]
        other = [t for t in targets if t in ranks and ranks[t] != rank]
        if other:
            raise SelectionError(
                f"{rewire!r} cannot feed {other[:3]} of {method.key}: their ranks differ from "
                f"that of {rewire.source!r} ({rank} axes)"
            )
        first = [t for t in targets if t in order and order[t] <= order[rewire.source]]
        if first:
            raise SelectionError(
                f"{rewire!r} cannot feed {first[:3]} of {method.key}: they are computed before "
                f"{rewire.source!r} (or are it); pick targets after it"
            )
        methods[method.key] = rewire.sources(method.key)
    return tuple(methods.values())


def check_callback(callback: Any, patterns: Sequence[str], weights: Sequence[str]) -> None:
    """Refuse what ``bend(callback, *patterns)`` cannot take, saying what it takes."""
    if isinstance(callback, type) and issubclass(callback, BendingCallback):
        raise BendingError(
            f"bend() takes a callback instance, got the class {callback.__name__}; "
            f"call it: {callback.__name__}(...)"
        )
    if not isinstance(callback, BendingCallback):
        raise BendingError(
            f"bend() takes a BendingCallback (tb.Mask(), tb.Scale()...), got "
            f"{type(callback).__name__}: {callback!r}"
        )
    if not patterns:
        raise SelectionError(
            "bend() needs at least one pattern, e.g. bended.bend(tb.Mask(0.3), 'conv$'); "
            f"weights: {list(weights[:5])}..."
        )
