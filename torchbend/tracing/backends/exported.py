"""A tracing backend on torch.export (non-strict), for Python the concrete tracer cannot follow.

torch.export runs the method with fake tensors and records ATen operations. Its graph is
rebuilt here in the form the rest of torchbend reads: weights as ``get_attr`` of their paths in
the wrapped module (so that weight bending reaches them), one record per node (shape, dtype),
node names taken from the module that ran them (``layers_0`` for the output of ``layers.0``,
``layers_0_pad``... for the operations before it), and torch.export's own guards: sizes of
tensor arguments are left symbolic where the code allows, the program's guard function
decides whether a call's sizes are in its ranges, and the sizes it fixed and the values of
other arguments are facts (other inputs are traced again).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ...errors import TracingError
from ..attributes import module_state
from ..compat import pytree
from ..facts import Fact
from ..introspection import is_user_file
from ..objects import check_object_input
from ..records import TracedGraph
from ..values import is_proxied_input
from .packing import Packer
from .program_graph import program_guards, quiet, rebuild_program, signature_facts, summary
from .protocol import ValueHook, call_method

__all__ = ["ExportBackend"]


class _Call(nn.Module):
    """``root.<method>`` as a module's forward, for torch.export: by keyword, or positionally
    in the order of ``names`` (torch.export takes dynamic sizes of positional arguments)."""

    def __init__(
        self,
        root: nn.Module,
        method: str,
        names: list[str] | None = None,
        fixed: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.root = root
        self.method = method
        self.names = names or []
        self.fixed = fixed or {}
        """Inputs passed as they are (``None``: no placeholder, no size to make symbolic)."""
        self.packer = Packer()

    def forward(self, *args: Any, **inputs: Any) -> Any:
        given = {**self.fixed, **dict(zip(self.names, args)), **inputs}
        return self.packer.pack(call_method(self.root, self.method, given))


class ExportBackend:
    """torch.export, non-strict, as a :class:`~torchbend.tracing.backends.TracingBackend`.

    Sizes of tensor arguments are left for torch.export to make symbolic where the code allows
    (``Dim.AUTO``): a graph then holds for every size in the ranges torch.export guards
    (``TracedGraph.accepts`` runs its guards), and the sizes it specialized are facts.
    Concrete values are not bent while exporting (``on_value`` is not called): decisions are
    taken on unbent values, and bendings apply in the slots of the graph.
    """

    name = "export"

    def trace(
        self, root: nn.Module, method: str, inputs: dict[str, Any], on_value: ValueHook
    ) -> TracedGraph:
        owner = f"{type(root).__name__}.{method}"
        names = list(inputs)
        values = tuple(inputs.values())
        dynamic = all(v is None or isinstance(v, (torch.Tensor, bool, int, float)) for v in values)
        for name, value in inputs.items():
            if not is_proxied_input(value) and type(value) not in pytree.SUPPORTED_NODES:
                check_object_input(owner, name, value)
        if not dynamic:  # containers of tensors: every size as it is
            call = _Call(root, method)
            program = _export(owner, lambda: torch.export.export(call, (), inputs, strict=False))
            gm = program.module()
            graph, constants = rebuild_program(
                gm, root, program.call_spec.out_spec, unpack=call.packer.unpacked
            )
            facts, accepts = signature_facts(names), None
        else:
            graph, constants, facts, accepts = _read_dynamic(owner, root, method, names, values)
        traced = TracedGraph(graph, constants, [], facts)
        traced.accepts = accepts
        # What torch.export does not guard: the plain attributes (modes, flags) of every module
        # (torch.export inlines them all, ``training`` of a batch norm included), and the grad
        # mode, which their code may read.
        traced.module_state = module_state(root.modules())
        traced.grad_mode = torch.is_grad_enabled()
        return traced

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        return call_method(root, method, inputs)


def _user_line(e: BaseException) -> str:
    """``" at model.py:12 (code)"``: the innermost line of the user's code where ``e`` was
    raised, or ``""``."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if is_user_file(f.filename)]
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" + (f" ({code})" if code else "")


def _export(owner: str, export: Callable[[], torch.export.ExportedProgram]) -> Any:
    """``export()``, quiet, its failure a :class:`TracingError` naming the user's line."""
    try:
        with quiet():
            return export()
    except Exception as e:
        raise TracingError(
            f"torch.export could not trace {owner}{_user_line(e)}: {summary(e)}"
        ) from e


def _read_dynamic(
    owner: str, root: nn.Module, method: str, names: list[str], values: tuple[Any, ...]
) -> tuple[torch.fx.Graph, dict[str, torch.Tensor], tuple[Fact, ...], Any]:
    """The graph, constants, facts and guards of ``root.<method>`` exported with automatic
    dynamic sizes; if anything in that fails (torch.export's symbolic-shape solver on the
    arithmetic of chunked code, which may depend on the hash seed; reading its program or its
    guards), exported again with static sizes, every size of every tensor input a fact."""
    # ``None`` inputs are passed as they are: the program's placeholders are the others, in
    # order, whatever the signature's order of the two.
    leaves = [n for n, v in zip(names, values) if v is not None]
    given = tuple(v for v in values if v is not None)
    call = _Call(root, method, leaves, {n: v for n, v in zip(names, values) if v is None})
    try:
        with quiet():
            program = torch.export.export(
                call, given, dynamic_shapes={"args": _auto_shapes(given)}, strict=False
            )
        gm = program.module()
        out_spec = program.call_spec.out_spec
        graph, constants = rebuild_program(gm, root, out_spec, leaves, unpack=call.packer.unpacked)
        facts, accepts = program_guards(gm, names, leaves)
        if accepts is not None and not accepts(dict(zip(names, values))):
            raise TracingError("its guards refuse the inputs it was exported on")
        return graph, constants, facts, accepts
    except Exception as dynamic:
        try:
            call.packer = Packer()
            with quiet():
                program = torch.export.export(call, given, strict=False)
            gm = program.module()
            out_spec = program.call_spec.out_spec
            graph, constants = rebuild_program(
                gm, root, out_spec, leaves, unpack=call.packer.unpacked
            )
            facts = _static_facts(names, values)
        except Exception as static:
            raise TracingError(
                f"torch.export could not trace {owner}{_user_line(static)}: with dynamic "
                f"sizes, {summary(dynamic)}; with static sizes, {summary(static)}"
            ) from static
        return graph, constants, facts, None


def _static_facts(names: list[str], values: tuple[Any, ...]) -> tuple[Fact, ...]:
    """Facts on every size of every tensor argument (and the dtype and rank), and the values
    of the others: what a program exported with static sizes holds for."""
    facts: list[Fact] = []
    for name, value in zip(names, values):
        if not isinstance(value, torch.Tensor):
            facts.append((name, "sig", None))
            continue
        facts += [(name, "dtype", None), (name, "ndim", None)]
        facts += [(name, "shape", d) for d in range(value.ndim)]
    return tuple(facts)


def _auto_shapes(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Every size of every tensor argument left to torch.export to make symbolic."""
    auto = torch.export.Dim.AUTO
    return tuple(
        {d: auto for d in range(v.ndim)} if isinstance(v, torch.Tensor) and v.ndim else None
        for v in values
    )
