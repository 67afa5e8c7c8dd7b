"""Undoing what the concrete run of a trace changed: buffers, attributes, random generators."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.fx

from ..errors import TracingError

__all__ = ["restore_state"]


@contextlib.contextmanager
def restore_state(root: torch.nn.Module) -> Iterator[None]:
    """Undo what running ``root`` on example inputs changed: buffers and random generators.

    Tracing runs the module once; without this, a call that traces a new graph would update
    batch-norm statistics and draw random numbers twice, unlike an eager call. Traced values
    assigned to module attributes are taken back too (they would leak proxies into the module),
    and assigning one to a buffer is an error: graphs do not record assignments.
    """
    modules = list(root.named_modules(remove_duplicate=False))
    buffers = [
        (m, f"{prefix}.{name}".lstrip("."), name, b, b.clone())
        for prefix, m in modules
        for name, b in m._buffers.items()
        if b is not None
    ]
    attributes = [(m, dict(vars(m))) for _, m in modules]
    assigned: list[str] = []
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=cuda):
            yield
    finally:
        with torch.no_grad():
            for m, qualname, name, b, saved in buffers:
                if isinstance(m._buffers.get(name), torch.fx.Proxy):
                    assigned.append(qualname)
                m._buffers[name] = b
                b.copy_(saved)
                if b.grad_fn is not None:  # an in-place update from parameters left history
                    b.detach_()
        for m, before in attributes:
            for key, value in list(vars(m).items()):
                if isinstance(value, torch.fx.Proxy):
                    if key in before:
                        vars(m)[key] = before[key]
                    else:
                        del vars(m)[key]
    if assigned:
        raise TracingError(
            f"{type(root).__name__} assigns traced values to its buffers {sorted(set(assigned))} "
            "in forward: graphs do not record assignments, so their calls would not update them. "
            "Update the buffers in place instead (self.buf.copy_(new), self.buf.add_(x))."
        )
