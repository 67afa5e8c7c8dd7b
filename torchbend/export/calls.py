"""What nn~ calls an exported method with: its params (channels and ratios, read from the
traced shapes), the smallest buffer, and the check that one graph takes every call."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from ..errors import ExportError, TracingError
from ..tracing.facts import describe_fact
from ..tracing.records import record_of
from .arguments import MISSING, ExportedArgument
from .contract import MAX_BUFFER_SIZE, TEST_BATCHES, buffer_sizes

if TYPE_CHECKING:
    from ..engine.dispatch import Entry
    from ..engine.readonly import BendedView

__all__ = ["check_one_graph", "default_labels", "infer_params", "least_buffer"]


def least_buffer(model: Any, given: int | None, method_params: Iterable[Sequence[int]]) -> int:
    """The smallest buffer nn~ runs the file's methods on, in samples.

    nn~ takes the largest in or out ratio among all the methods of a file as its smallest
    buffer (a smaller one is raised to it), so an autoencoder whose ``forward`` maps ``T`` to
    ``T`` is only ever called with buffers its ``encode`` ratio divides, though ``forward``'s
    own ratios are 1. ``given`` (``min_buffer_size=``) or the model's ``ratio`` attribute may
    ask for more, never for less.
    """
    highest = max((max(p[1], p[3]) for p in method_params), default=1)
    if given is None:
        inner = getattr(model, "ratio", 1)
        given = inner if isinstance(inner, int) and not isinstance(inner, bool) else 1
    return max(int(given), highest)


def check_one_graph(
    bended: BendedView, method: str, entry: Entry, values: Sequence[int], least: int
) -> None:
    """The exported file holds one graph per method: make sure nn~'s calls all take it.

    Graphs whose decisions read the batch size or the length (a length check, say) are
    traced again on every input nn~ will give; each must take the same decisions, so that
    the one graph is right for all of them.
    """
    if not any(f[1] in ("shape", "value", "sig") and f[2] not in (1, -2) for f in entry.facts):
        return
    in_channels, in_ratio = values[0], values[1]
    ratio = max(values[1], values[3], least)
    first = bended.signature(method).first
    if first is None:
        raise ExportError(f"method {method!r} takes no input for nn~ to feed a signal to")
    for batch in TEST_BATCHES:
        for size in buffer_sizes(ratio):
            x = torch.zeros(batch, in_channels, size // in_ratio)
            try:
                fits = bended.entry_for(method, {first: x}) is entry
            except TracingError as e:
                raise ExportError(
                    f"method {method!r} cannot run on an input of shape {list(x.shape)}, "
                    f"which nn~ gives it (batches {list(TEST_BATCHES)}, buffers of {ratio} to "
                    f"{MAX_BUFFER_SIZE} samples): {e}"
                ) from e
            if not fits:
                facts = ", ".join(describe_fact(f) for f in entry.facts)
                if entry.backend != "concrete":
                    fixed_batch = (first, "shape", 0) in entry.facts
                    if fixed_batch:
                        advice = "Trace it on a batch of 2 or more (torch.export fixes sizes of 1)"
                    else:
                        advice = "torch.export's guards leave this length out of the graph's range"
                    if entry.backend == "export":
                        advice += ", or with the concrete tracer: BendedModule(model, "
                        advice += "backend='concrete')"
                    raise ExportError(
                        f"method {method!r} was traced by the {entry.backend} backend, whose "
                        f"graph holds for the sizes torch.export left symbolic, not for an "
                        f"input of shape {list(x.shape)} (it fixed {facts}); nn~ calls it with "
                        f"batches {list(TEST_BATCHES)} and buffers of {ratio} to "
                        f"{MAX_BUFFER_SIZE} samples. {advice}."
                    )
                raise ExportError(
                    f"method {method!r} takes other decisions on an input of shape "
                    f"{list(x.shape)} than on the one it was traced with (they read {facts}); "
                    f"nn~ calls it with batches {list(TEST_BATCHES)} and buffers of {ratio} to "
                    f"{MAX_BUFFER_SIZE} samples, and the exported "
                    "file holds one graph. Make those decisions independent of the batch size "
                    "and length."
                )


def infer_params(
    method: str, entry: Entry, arguments: Sequence[ExportedArgument] = ()
) -> tuple[int, int, int, int]:
    """``[in_channels, in_ratio, out_channels, out_ratio]`` from the traced shapes (nn~ gives
    the first argument; the others, which must have defaults, keep them)."""
    inputs = [n for n in entry.graph.nodes if n.op == "placeholder"]
    names = [str(n.target) for n in inputs]
    if arguments:  # the first input, and any other argument without a default
        names = [a.name for a in arguments if a.default is MISSING or a.name in names[:1]]
    if len(names) != 1 or not inputs or names[0] != str(inputs[0].target):
        raise ExportError(
            f"method {method!r} takes {len(names)} inputs ({', '.join(names)}); nn~ gives "
            "one [batch, channels, time] tensor (give the others defaults)"
        )
    in_shape = shape_of(method, "input", record_of(inputs[0]).shape)
    out = next(n for n in entry.graph.nodes if n.op == "output").args[0]
    out_shape = shape_of(
        method, "output", record_of(out).shape if isinstance(out, torch.fx.Node) else out
    )
    t_in, t_out = in_shape[2], out_shape[2]
    if t_in % t_out == 0:
        return in_shape[1], 1, out_shape[1], t_in // t_out
    if t_out % t_in == 0:
        return in_shape[1], t_out // t_in, out_shape[1], 1
    raise ExportError(
        f"method {method!r} maps {t_in} time steps to {t_out}: not a whole ratio; nn~ needs "
        "out_ratio = input length / output length (or its inverse) to be a power of two"
    )


def shape_of(method: str, side: str, shape: Any) -> torch.Size:
    if not isinstance(shape, torch.Size):
        raise ExportError(
            f"method {method!r}: nn~ needs one {side} tensor [batch, channels, time], the "
            f"traced {side} is {shape!r}"
        )
    if len(shape) != 3:
        raise ExportError(
            f"method {method!r}: nn~ needs a 3-D {side} [batch, channels, time], the traced "
            f"{side} is {len(shape)}-D {list(shape)}"
        )
    return shape


def default_labels(side: str, count: int) -> list[str]:
    return [f"(signal) model {side} {i}" for i in range(count)]
