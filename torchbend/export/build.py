"""Building an export: the container module of copied weights, scripted callbacks and graphs."""

from __future__ import annotations

import copy
import math  # noqa: F401  (read by the TorchScript source defined in script())
import warnings
import weakref
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from ..callbacks.base import BendingCallback
from ..controls import rules  # noqa: F401  (called by the TorchScript source script() defines)
from ..engine.folding import fold_slots
from ..engine.rewriting import ActivationSlot, build_graph_module, graph_module_record
from ..errors import ExportError
from ..tracing.factories import generator_at, legacy_tensor
from ..tracing.surgery import strip_guards
from .contract import error_summary
from .plan import ExportPlan, leaves, start_from_silence
from .source import methods_source

__all__ = ["ExportedModule", "ScriptedCallback", "ScriptedWeightCallback", "build", "script"]

# How controls reach scripted callbacks. A callback reads its declared arguments as plain
# number attributes, into which controls push their values when they change
# (torchbend/callbacks/argument.py); the controls themselves are Python objects that
# TorchScript ignores. So each callback is exported as a copy, and each ``set_<control>`` of
# the exported module assigns the new number to every copy that reads it, as the control would
# push it (export/source.py, through the functions of torchbend/controls/rules.py).
# TorchScript duplicates a submodule met at two places of a module tree unless it is already
# scripted: the copies are scripted first, so that the slots of every method and the container
# share one object, and one assignment reaches them all (``torch.jit.save`` keeps the sharing).


class ScriptedCallback(nn.Module):
    """A callback copy as exported: its controls replaced by numbers the container sets."""

    def __init__(self, callback: nn.Module) -> None:
        super().__init__()
        self.callback = callback

    def forward(self, x: torch.Tensor, name: str = "") -> torch.Tensor:
        return self.callback(x, name)


class ScriptedWeightCallback(ScriptedCallback):
    """An exported callback that also bends weights again when one of its controls changes."""

    @torch.jit.export
    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return self.callback.bend_weight(weight, name)  # type: ignore[operator]


class ExportedModule(nn.Module):
    """The container a bended module is exported as.

    It holds one graph module per method (``tb_method_<name>``), the scripted callbacks
    (``tb_callback_<i>``), the cached base weights of weight bendings that depend on a control
    (``tb_weight_base_<k>``) next to the live weights they are recomputed into
    (``tb_weight_live_<k>``), and the controls' values (``tb_control_<name>``). Its methods
    (the traced ones, ``set_<control>``, ``get_<control>``) are defined from TorchScript source
    once scripted: see :mod:`torchbend.export.source`.
    """

    def __init__(
        self,
        graphs: dict[str, nn.Module],
        callbacks: Sequence[nn.Module],
        weights: Sequence[tuple[torch.Tensor, torch.Tensor]],
        controls: Mapping[str, float | int | bool | torch.Tensor],
        ramps: dict[str, tuple[float, int]] | None = None,
        faded: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None,
        fading: Sequence[str] = (),
    ) -> None:
        super().__init__()
        for name, gm in graphs.items():
            self.add_module(f"tb_method_{name}", gm)
        for i, cb in enumerate(callbacks):
            self.add_module(f"tb_callback_{i}", cb)
        for k, (base, live) in enumerate(weights):
            self.register_buffer(f"tb_weight_base_{k}", base)
            self.register_buffer(f"tb_weight_live_{k}", live)
        for name, value in controls.items():
            if isinstance(value, torch.Tensor):  # a tensor control: moves with the module
                self.register_buffer(f"tb_control_{name}", value)
            else:
                setattr(self, f"tb_control_{name}", value)
        # A control's ramp: where it started and how many calls it went (see source.py).
        for name, (start, step) in (ramps or {}).items():
            setattr(self, f"tb_start_{name}", float(start))
            setattr(self, f"tb_step_{name}", int(step))
            setattr(self, f"tb_fading_{name}", name in fading)
        for k, (before, after) in (faded or {}).items():  # crossfaded over a ramp
            self.register_buffer(f"tb_weight_before_{k}", before)
            self.register_buffer(f"tb_weight_after_{k}", after)


# -- building --------------------------------------------------------------------------------


def build(plan: ExportPlan) -> ExportedModule:
    """The unscripted container: copies of the weights, callbacks and graphs."""
    view = copy.deepcopy(plan.bended.weights_view)
    for p in view.parameters():
        p.requires_grad_(False)
    start_from_silence(view)  # what the module's reference run starts from too (plan.py)
    weight_leaves = {i for w in plan.weights for i in w.callbacks}
    scripted = [_script_callback(leaf, i in weight_leaves) for i, leaf in enumerate(plan.leaves)]
    graphs = {n: _graph(plan, n, view, scripted) for n in plan.methods}
    weights = []
    for w in plan.weights:
        base = plan.bended.base_weight(w.name).detach().clone()
        weights.append((base, view.get_parameter(w.name).detach()))
    values = {name: c.control.get() for name, c in plan.controls.items()}
    # The exported controls ramp on from where the Python ones are, weights crossfades too.
    ramps = {name: c.control.ramp_position() for name, c in plan.controls.items() if c.control.ramp}
    fades = plan.bended.fades()
    faded = {}
    for name, c in plan.controls.items():
        for k in c.weights if c.control.ramp else []:
            live = weights[k][1]
            before, after = fades.get(name, ({}, {}))
            weight = plan.weights[k].name
            faded[k] = (
                before.get(weight, live).detach().clone(),
                after.get(weight, live).detach().clone(),
            )
    return ExportedModule(graphs, scripted, weights, values, ramps, faded, list(fades))


_FAILED: weakref.WeakKeyDictionary[type, dict[bool, str]] = weakref.WeakKeyDictionary()
"""What TorchScript said the first time it could not compile a callback class (for weights or
not): compiling it again only says that the class is half-defined ("Can't redefine method")."""


def _script_callback(leaf: BendingCallback, weights: bool) -> nn.Module:
    cb = copy.deepcopy(leaf)
    wrapper = ScriptedWeightCallback(cb) if weights else ScriptedCallback(cb)
    try:
        return _script(wrapper)
    except Exception as e:
        said = error_summary(e)
        first = _FAILED.setdefault(type(leaf), {})
        if "Can't redefine method" in said and weights in first:
            said = first[weights]  # what was wrong, not the half-compiled class it left
        first.setdefault(weights, said)
        what = "bend(x, name) and bend_weight(weight, name)" if weights else "bend(x, name)"
        raise ExportError(
            f"TorchScript could not compile {leaf!r}: its {what} must be scriptable "
            f"(see docs/callbacks.md). TorchScript said: {said}"
        ) from e


def _graph(
    plan: ExportPlan, method: str, view: nn.Module, callbacks: Sequence[nn.Module]
) -> nn.Module:
    entry = plan.entries[method]
    assert entry.gm is not None
    slots: dict[str, ActivationSlot] = {}
    for node, slot in graph_module_record(entry.gm).slots.items():
        exported = [callbacks[plan.index(leaf)] for cb in slot.originals() for leaf in leaves(cb)]
        slots[node] = ActivationSlot(
            slot.name, exported, standing_for=slot.originals(), copy=slot.copy
        )
    constants = {k: v.clone() for k, v in entry.result.constants.items()}
    gm = build_graph_module(entry.result, view, slots, f"Exported_{method}", constants)
    # The graph takes its arguments as the exported method passes them: all of them, typed
    # as they were traced (an ``Optional`` traced with a value is checked and passed as one).
    graph_types = {a.name: a.graph_type for a in plan.arguments[method]}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.type, node.args = graph_types[str(node.target)], ()
    gm.recompile()
    # The export runs without autograd on weights of its own: static channel bendings are
    # folded into the layers that read them, as bended graphs do when streaming.
    fold_slots(gm, view)
    guards, assigned = strip_guards(gm.graph)
    if guards or assigned:
        gm.recompile()
    if guards:
        warnings.warn(
            f"{method}: {guards} decision(s) read from tensor values are not checked in "
            "the exported module; it always takes the branches taken when traced",
            stacklevel=4,
        )
    if assigned:
        warnings.warn(
            f"{method}: forward replaces {sorted(set(assigned))} (a cache made again); the "
            "exported module does not, and computes as the graph traced, from the values "
            "the trace made",
            stacklevel=4,
        )
    unscriptable = [n for n in gm.graph.nodes if n.target in _PYTHON_ONLY]
    if unscriptable:
        raise ExportError(
            f"TorchScript cannot compile the bended graph of {method!r} of "
            f"{plan.bended.owner}: it {_PYTHON_ONLY[unscriptable[0].target]} "
            f"(node {unscriptable[0].name!r}), which only Python runs. Bended calls run it; "
            "to export, change the model's code as the message says."
        )
    try:
        return _script(gm)
    except Exception as e:
        raise ExportError(
            f"TorchScript could not compile the bended graph of {method!r} of "
            f"{plan.bended.owner}: {error_summary(e)}. Methods must take and "
            "return tensors (or tuples and lists of them)."
        ) from e


_PYTHON_ONLY = {
    legacy_tensor: "builds a tensor with a legacy constructor (torch.Tensor([...]), "
    "torch.FloatTensor(...)): write torch.tensor(data, dtype=...) or x.float()",
    generator_at: "makes a random generator in forward (torch.Generator().manual_seed(...)): "
    "draw with torch.manual_seed or without a generator",
}
"""Graph calls that torchbend records for Python idioms TorchScript has no form of."""


def script(
    plan: ExportPlan, container: ExportedModule, getters: str = "value", extra: str = ""
) -> torch.jit.ScriptModule:
    """Script ``container`` and define its methods (``getters="tuple"``: nn~'s getters;
    ``extra``: more TorchScript source, such as nn~'s contract)."""
    scripted = _script(container)
    source = methods_source(plan, getters) + extra
    try:
        # ``define`` resolves the names the source uses (``math``, ``rules``) in this
        # function's globals.
        scripted.define(source)
    except Exception as e:
        raise ExportError(
            f"TorchScript could not compile the methods of the exported {plan.bended.owner} "
            f"({', '.join(plan.methods)}): {error_summary(e)}"
        ) from e
    return scripted


def _script(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        # Raised for empty containers annotated in a model's __init__, which TorchScript then
        # leaves out: an error follows only if scripted code reads them.
        warnings.filterwarnings("ignore", "The TorchScript type system doesn't support")
        return torch.jit.script(module)
