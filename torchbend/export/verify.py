"""Checking an export against the bended module, on the inputs its methods were traced with."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ..engine.selfcheck import first_difference
from ..engine.shaping import Shaped
from ..errors import ExportError
from ..tracing.values import clone_inputs
from .plan import ExportPlan

__all__ = ["check_export"]


def check_export(plan: ExportPlan, exported: torch.nn.Module) -> None:
    """Run the graph of each method of ``exported`` (the container
    :func:`~torchbend.export.build.build` made, scripted or not) on the inputs it was traced
    with, from the random state the bended module ran them from (and from silence, as the
    module's run: :func:`~torchbend.export.plan.from_silence`), and raise
    :class:`ExportError` if it does not give what the module gave
    (:attr:`ExportPlan.expected`). The export is left as it was: its buffers, the generators
    and window counters of its callbacks, and torch's global generator are put back."""
    for method, (inputs, expected) in plan.expected.items():
        graph = getattr(exported, f"tb_method_{method}")
        args = [clone_inputs(inputs[a.name]) for a in plan.arguments[method] if a.in_graph]
        with torch.no_grad(), _untouched(plan, exported):
            got = graph(*args)
        problem = first_difference(expected, got)
        if problem is not None:
            raise ExportError(
                f"the exported {method!r} of {plan.bended.owner} does not compute what the "
                f"bended module computes on the inputs it was traced with ({problem}); "
                "nothing was saved. Please report it with the model and the bendings."
            )


@contextlib.contextmanager
def _untouched(plan: ExportPlan, exported: torch.nn.Module) -> Iterator[None]:
    """Put back after the block what a run of ``exported`` moves on."""
    cpu = torch.random.get_rng_state()
    buffers = [(b, b.clone()) for b in exported.buffers()]
    kept = [(holder, attr, _copy(getattr(holder, attr))) for holder, attr in _state(plan, exported)]
    try:
        yield
    finally:
        torch.random.set_rng_state(cpu)
        for b, value in buffers:
            b.copy_(value)
        for holder, attr, value in kept:
            if isinstance(value, torch.Tensor):  # a generator's state
                getattr(holder, attr).set_state(value)
            else:
                setattr(holder, attr, value)


def _state(plan: ExportPlan, exported: torch.nn.Module) -> Iterator[tuple[Any, str]]:
    """``(module, attribute)`` of each generator and window counter of the exported
    callbacks (the copies of ``plan.leaves``, found by the paths of their originals)."""
    for i, leaf in enumerate(plan.leaves):
        root = getattr(exported, f"tb_callback_{i}").callback
        for path, cb in leaf.named_modules():
            holder = root
            for part in path.split(".") if path else []:
                holder = getattr(holder, part)
            for attr, value in vars(cb).items():
                if isinstance(value, torch.Generator):
                    yield holder, attr
            if isinstance(cb, Shaped):
                yield holder, "steps"


def _copy(value: Any) -> Any:
    return value.get_state() if isinstance(value, torch.Generator) else dict(value)
