"""Undoing what the concrete run of a trace changed: buffers, attributes, random generators."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.fx

from ..errors import TracingError
from .assignments import is_tensor_like
from .attributes import is_plain

__all__ = ["held_generators", "kept_attributes", "kept_generators", "restore_state"]

_ABSENT = object()


@contextlib.contextmanager
def restore_state(root: torch.nn.Module) -> Iterator[None]:
    """Undo what running ``root`` on example inputs changed: buffers and random generators.

    Tracing runs the module once; without this, a call that traces a new graph would update
    batch-norm statistics and draw random numbers twice, unlike an eager call. Buffers that
    forward replaced are put back too (the tracer records the replacement as an assignment
    its graph makes: see ``assignments.py``); changing a plain attribute is an error (see
    :func:`kept_attributes`).
    """
    modules = list(root.named_modules(remove_duplicate=False))
    buffers = [
        (m, name, b, b.clone())
        for prefix, m in modules
        for name, b in m._buffers.items()
        if b is not None
    ]
    names = [(m, set(m._buffers)) for _, m in modules]
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with kept_attributes(root), kept_generators(root), torch.random.fork_rng(devices=cuda):
            yield
    finally:
        for m, before in names:
            for name in set(m._buffers) - before:  # registered by forward
                del m._buffers[name]
        with torch.no_grad():
            for m, name, b, saved in buffers:
                m._buffers[name] = b
                b.copy_(saved)
                if b.grad_fn is not None:  # an in-place update from parameters left history
                    b.detach_()


@contextlib.contextmanager
def kept_attributes(root: torch.nn.Module) -> Iterator[None]:
    """Put back the plain attributes (numbers, strings, flags...) of ``root``'s modules that a
    run of the block changed or added, and raise :class:`TracingError` naming them.

    A graph does not record such changes: its calls would not make them, and would keep what
    the run saw (a call counter, a cached length). Leaves (``torchbend_leaf = True``) and
    their submodules raise nothing, since their code runs at every call; what they changed is
    put back all the same. Tensors set or replaced (traced values, caches made again) are
    put back silently: the tracer records them as assignments its graph makes.
    """
    modules = list(root.named_modules(remove_duplicate=False))
    leaves = [f"{prefix}." for prefix, m in modules if getattr(m, "torchbend_leaf", False)]
    attributes = [(prefix, m, dict(vars(m))) for prefix, m in modules]
    changed: list[str] = []
    try:
        yield
    finally:
        for prefix, m, before in attributes:
            for key, value in list(vars(m).items()):
                old = before.get(key, _ABSENT)
                if value is old or (is_plain(value) and is_plain(old) and value == old):
                    continue
                tensor = is_tensor_like(value) or is_tensor_like(old)
                if not (tensor or is_plain(value)):
                    continue  # a container, an object: not state a graph decides on
                # A plain value changed is state no graph makes (a call counter); a tensor
                # set, or replaced (a cache grown), is an assignment the tracer records.
                # A leaf's own code runs at every call: what it sets, its calls set again.
                # Either way, it is put back: tracing, or a check, is not a call.
                leaf = any(f"{prefix}.".startswith(p) for p in leaves)
                if not tensor and not leaf:
                    changed.append(f"{prefix}.{key}".lstrip(".") + f" ({old!r} -> {value!r})")
                if old is not _ABSENT:
                    vars(m)[key] = old
                else:
                    del vars(m)[key]
    if changed:
        raise TracingError(
            f"{type(root).__name__} changes its Python attributes in forward: "
            f"{', '.join(sorted(changed))}. Graphs do not record that: their calls would not "
            "change them, and would keep what tracing saw. Keep such state in a buffer updated "
            "in place (self.calls.add_(1)), or make the module a leaf of graphs "
            "(torchbend_leaf = True) so that its code runs at every call."
        )


@contextlib.contextmanager
def kept_generators(root: torch.nn.Module) -> Iterator[None]:
    """Put the random generators ``root``'s modules hold (``self.generator``) back in the
    state they were in: a run made to trace or to check draws nothing a call would miss."""
    states = [(g, g.get_state()) for g in held_generators(root)]
    try:
        yield
    finally:
        for g, state in states:
            g.set_state(state)


def held_generators(root: torch.nn.Module) -> list[torch.Generator]:
    """The random generators ``root``'s modules hold as attributes, each once (by type: while
    tracing, ``isinstance`` is the tracer's)."""
    found = {
        id(v): v for m in root.modules() for v in vars(m).values() if type(v) is torch.Generator
    }
    return list(found.values())
