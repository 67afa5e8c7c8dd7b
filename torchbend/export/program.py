"""Export to torch.export (``.pt2``) and ONNX: the bended graph of one method, standalone."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch import nn

from ..errors import ExportError, TorchbendError
from ..tracing.surgery import copy_graph, strip_guards
from ..tracing.tensordict import is_tensordict_module

if TYPE_CHECKING:
    from ..bended import BendedModule

__all__ = ["exportable", "onnx", "pt2"]


def _without_guards(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` without the checks of data-dependent decisions: exported programs keep
    the branches taken when tracing (torch.export cannot branch on tensor values)."""
    graph, _ = copy_graph(gm.graph)
    strip_guards(graph)
    return torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)


class _ControlsAsInputs(nn.Module):
    """Runs a bended graph with its activation controls given as extra tensor inputs."""

    def __init__(self, gm: nn.Module, inputs: Sequence[str], controls: Mapping[str, Any]) -> None:
        super().__init__()
        self.gm = gm
        self.inputs = list(inputs)
        self.controls = dict(controls)

    def forward(self, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for name, c in self.controls.items():
                stack.enter_context(c.tensor_input(kwargs[name]))
            return self.gm(**{n: kwargs[n] for n in self.inputs})


class _TensorDictKeywords(nn.Module):
    """A tensordict module called with its input keys as keyword tensors (nested keys joined
    by ``_``), returning its output keys as a tuple, as in tensordict's export tutorial."""

    def __init__(self, gm: nn.Module, in_keys: Sequence[Any], out_keys: Sequence[Any]) -> None:
        super().__init__()
        self.gm = gm
        self.in_keys = list(in_keys)
        self.out_keys = list(out_keys)

    def forward(self, **kwargs: Any) -> Any:
        from tensordict import TensorDict

        td = TensorDict({}, batch_size=[])
        for key in self.in_keys:
            td.set(key, kwargs[_flat(key)])
        out = self.gm(td)
        values = tuple(out.get(key) for key in self.out_keys)
        return values[0] if len(values) == 1 else values


def _flat(key: Any) -> str:
    return "_".join(key) if isinstance(key, tuple) else str(key)


def exportable(
    bended: BendedModule, fn: str, inputs: dict[str, Any], controls_as_inputs: bool = False
) -> tuple[nn.Module, dict[str, Any]]:
    """The module to hand to torch.export or ONNX, and its keyword inputs."""
    view = bended.view()
    if fn not in view.traced():
        raise ExportError(
            f"method {fn!r} of {view.owner} is not traced (traced: "
            f"{view.traced() or 'none'}); call bended.trace({fn!r}, ...) first"
        )
    root = view.module
    if fn == "forward" and is_tensordict_module(root) and "tensordict" not in inputs:
        in_keys: list[Any] = list(getattr(root, "in_keys", []))
        out_keys: list[Any] = list(getattr(root, "out_keys", []))
        flat = {_flat(k): k for k in in_keys}
        unknown = sorted(set(inputs) - set(flat))
        if unknown:
            raise ExportError(
                f"{type(root).__name__} takes keyword inputs {sorted(flat)}, got {unknown}"
            )
        from tensordict import TensorDict

        example = TensorDict({}, batch_size=[])
        for name, key in flat.items():
            example.set(key, inputs[name])
        entry = view.running(fn, {"tensordict": example})[0]
        assert entry.gm is not None
        return _TensorDictKeywords(_without_guards(entry.gm), in_keys, out_keys), dict(inputs)
    try:
        bound = view.signature(fn).bind((), inputs)
        entry = view.running(fn, bound)[0]
    except TorchbendError as e:
        raise ExportError(str(e)) from None
    assert entry.gm is not None
    gm = _without_guards(entry.gm)
    kwargs = {n: bound[n] for n in entry.input_names}
    if not controls_as_inputs:
        return gm, kwargs
    controls = view.controllables
    weight_controls = sorted(
        c.name for b in view.bendings if b.weights for c in b.callback.controls()
    )
    if weight_controls:
        raise ExportError(
            f"controls {weight_controls} drive weight bendings, which an exported program cannot "
            "recompute; export with controls_as_inputs=False (controls frozen at their values), "
            "or bend activations with them"
        )
    tensors = sorted(name for name, c in controls.items() if c.kind == "tensor")
    if tensors:
        raise ExportError(
            f"tensor controls {tensors} cannot be inputs of an exported program (its control "
            "inputs are numbers); export with controls_as_inputs=False (controls frozen at "
            "their values), or to TorchScript or nn~, whose setters take tensors"
        )
    clash = sorted(set(controls) & set(kwargs))
    if clash:
        raise ExportError(f"controls {clash} have the names of inputs of {fn}; rename them")
    for name, c in controls.items():
        kwargs[name] = torch.tensor(float(c.get()))
    return _ControlsAsInputs(gm, entry.input_names, controls), kwargs


def pt2(
    bended: BendedModule,
    path: str | Path | None = None,
    fn: str = "forward",
    *,
    controls_as_inputs: bool = False,
    dynamic_shapes: Any = None,
    **inputs: Any,
) -> torch.export.ExportedProgram:
    """Export the bended ``fn`` as a ``torch.export.ExportedProgram`` (saved to ``path``).

    Callbacks are inlined; controls are frozen at their current values, or become extra
    tensor inputs named like them with ``controls_as_inputs=True`` (activation controls only).
    ``dynamic_shapes`` is passed to ``torch.export.export`` (e.g. ``{"x": {2: Dim("time")}}``).
    ``torch.export.load(path).module()`` runs without torchbend.
    """
    module, kwargs = exportable(bended, fn, inputs, controls_as_inputs)
    try:
        program = torch.export.export(module, args=(), kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    except Exception as e:
        raise ExportError(f"torch.export failed on the bended {fn}: {type(e).__name__}: {e}") from e
    if path is not None:
        torch.export.save(program, str(path))
    return program


def onnx(
    bended: BendedModule,
    path: str | Path,
    fn: str = "forward",
    *,
    controls_as_inputs: bool = False,
    dynamic_shapes: Any = None,
    **inputs: Any,
) -> Path:
    """Export the bended ``fn`` to an ONNX file that onnxruntime runs (needs the ``export``
    extra: onnx, onnxscript). Inputs are named like ``fn``'s arguments."""
    try:
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "ONNX export needs the export extra: pip install torchbend[export]"
        ) from e
    module, kwargs = exportable(bended, fn, inputs, controls_as_inputs)
    try:
        torch.onnx.export(
            module,
            (),
            str(path),
            kwargs=kwargs,
            dynamo=True,
            dynamic_shapes=dynamic_shapes,
            input_names=list(kwargs),
        )
    except Exception as e:
        raise ExportError(f"ONNX export failed on the bended {fn}: {type(e).__name__}: {e}") from e
    return Path(path)
