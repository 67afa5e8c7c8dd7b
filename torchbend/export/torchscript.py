"""TorchScript export: one ScriptModule holding every traced method, the callbacks and controls."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch import nn

from ..callbacks.argument import Argument, declared
from ..callbacks.base import BendingCallback, Chain
from ..controls import BendingParameter, Control, control_of
from ..errors import ExportError
from ..rewriting import SLOTS, ActivationSlot, build_graph_module
from ..tracing.surgery import strip_guards
from .check import error_summary

if TYPE_CHECKING:
    from ..bended import BendedModule
    from ..parts.dispatch import Entry

__all__ = [
    "ExportPlan",
    "ExportedModule",
    "ScriptedCallback",
    "ScriptedWeightCallback",
    "torchscript",
]

# How controls reach scripted callbacks. A callback reads its declared arguments as plain
# number attributes, into which controls push their values when they change
# (torchbend/callbacks/argument.py); the controls themselves are Python objects that
# TorchScript ignores. So each callback is exported as a copy, and each ``set_<control>`` of
# the exported module assigns the new number to every copy that reads it, as the control would
# push it (``Argument.assignments``).
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
    once scripted: see :class:`ExportPlan`.
    """

    def __init__(
        self,
        graphs: dict[str, nn.Module],
        callbacks: Sequence[nn.Module],
        weights: Sequence[tuple[torch.Tensor, torch.Tensor]],
        controls: dict[str, float | int | bool],
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
            setattr(self, f"tb_control_{name}", value)


@dataclass
class _Control:
    control: BendingParameter
    writes: list[tuple[int, Argument, Control]] = field(default_factory=list)
    """``(callback index, argument, what drives it)``: the arguments to assign on set."""
    weights: list[int] = field(default_factory=list)
    """Indices of the weights bent again on set."""


@dataclass
class _Weight:
    name: str
    callbacks: list[int]


def _leaves(cb: BendingCallback) -> list[BendingCallback]:
    if isinstance(cb, Chain):
        return [leaf for inner in cb.chained() for leaf in _leaves(inner)]
    return [cb]


class ExportPlan:
    """Everything an export needs, checked before anything is scripted.

    Raises :class:`ExportError` for a method that is not traced, a callback that cannot be
    scripted, or a control that a scripted callback cannot follow.
    """

    def __init__(self, bended: BendedModule, methods: Sequence[str] | None = None) -> None:
        self.bended = bended.view()
        owner = self.bended.owner
        traced = self.bended.traced()
        names = list(traced if methods is None else methods)
        if isinstance(methods, str):
            names = [methods]
        missing = [n for n in names if n not in traced]
        if missing or not names:
            raise ExportError(
                f"cannot export {', '.join(map(repr, missing)) or 'nothing'} of {owner}: "
                f"exported methods must be traced first (traced: {traced or 'none'}); call "
                f"bended.trace({(missing or ['forward'])[0]!r}, <example inputs>)."
            )
        self.methods = names
        self.entries: dict[str, Entry] = {}
        for n in names:
            entry = self.bended.current(n)
            assert entry.gm is not None
            self.entries[n] = entry
        keys = {self.bended.key(n) for n in names}
        bendings = [b for b in self.bended.bendings if b.weights or keys & set(b.activations)]
        self._check_scriptable(bendings)
        self.leaves: list[BendingCallback] = []
        for b in bendings:
            for leaf in _leaves(b.callback):
                if all(leaf is not other for other in self.leaves):
                    self.leaves.append(leaf)
        self.controls = {
            name: self._plan_control(name, control)
            for name, control in self.bended.controllables.items()
        }
        self.weights: list[_Weight] = []
        dependent = _unique(w for b in bendings if b.callback.controls() for w in b.weights)
        for w in dependent:
            chain = [
                self._index(leaf)
                for b in bendings
                if w in b.weights
                for leaf in _leaves(b.callback)
            ]
            self.weights.append(_Weight(w, chain))
            k = len(self.weights) - 1
            for c in self.controls.values():
                readers = [b for b in bendings if c.control in b.callback.controls()]
                if any(w in b.weights for b in readers):
                    c.weights.append(k)

    def check_savable(self) -> None:
        """Raise :class:`ExportError` if a callback keeps state ``torch.jit.save`` cannot write."""
        for leaf in self.leaves:
            for attr, value in vars(leaf).items():
                if isinstance(value, torch.Generator):
                    raise ExportError(
                        f"{leaf!r} keeps a torch.Generator ({attr}), which torch.jit.save cannot "
                        "write; give it seed=None (torch's global generator) to export it to a "
                        "file, or keep the scripted module in memory (path=None)"
                    )

    def _index(self, leaf: BendingCallback) -> int:
        return next(i for i, other in enumerate(self.leaves) if other is leaf)

    def _check_scriptable(self, bendings: Sequence[Any]) -> None:
        problems = []
        for b in bendings:
            for leaf in _leaves(b.callback):
                if not leaf.scriptable:
                    targets = b.weights + [
                        f"{m}:{n}" for m, ns in b.activations.items() for n in ns
                    ]
                    problems.append(
                        f"{leaf!r} (bending {', '.join(targets) or 'nothing'}) is marked "
                        "scriptable = False: it runs Python code (a function, or records values "
                        "in Python objects) that TorchScript cannot compile"
                    )
        if problems:
            raise ExportError(
                f"cannot script the bendings of {self.bended.owner}: "
                + "; ".join(problems)
                + ". Remove these bendings (or export before bending with them)."
            )

    def _plan_control(self, name: str, control: BendingParameter) -> _Control:
        plan = _Control(control)
        for i, leaf in enumerate(self.leaves):
            found = {a: v for a, v in leaf._controlled.items() if control_of(v) is control}
            if not found and control not in leaf.controls():
                continue
            if not found:
                raise ExportError(
                    f"control {name!r} is read by {leaf!r} other than through one of its "
                    "numeric arguments; the scripted module could not follow it"
                )
            arguments = declared(type(leaf))
            derived = [a for a in found if arguments[a].derives]
            if derived:
                raise ExportError(
                    f"control {name!r} drives {', '.join(derived)} of {leaf!r}, which derives "
                    "its state again when that changes (new masks, draws or permutations); a "
                    f"scripted module cannot do that. Give {type(leaf).__name__} a number "
                    "instead of the control to export it."
                )
            plan.writes += [(i, arguments[arg], source) for arg, source in found.items()]
        return plan

    # -- building --------------------------------------------------------------------------------

    def build(self) -> ExportedModule:
        """The unscripted container: copies of the weights, callbacks and graphs."""
        view = copy.deepcopy(self.bended.weights_view)
        for p in view.parameters():
            p.requires_grad_(False)
        weight_leaves = {i for w in self.weights for i in w.callbacks}
        scripted = [
            self._script_callback(leaf, i in weight_leaves) for i, leaf in enumerate(self.leaves)
        ]
        graphs = {n: self._graph(n, view, scripted) for n in self.methods}
        weights = []
        for w in self.weights:
            base = self.bended.base_weight(w.name).detach().clone()
            weights.append((base, view.get_parameter(w.name).detach()))
        values = {name: c.control.get() for name, c in self.controls.items()}
        return ExportedModule(graphs, scripted, weights, values)

    def _script_callback(self, leaf: BendingCallback, weights: bool) -> nn.Module:
        cb = copy.deepcopy(leaf)
        wrapper = ScriptedWeightCallback(cb) if weights else ScriptedCallback(cb)
        try:
            return _script(wrapper)
        except Exception as e:
            what = "bend(x, name) and bend_weight(weight, name)" if weights else "bend(x, name)"
            raise ExportError(
                f"TorchScript could not compile {leaf!r}: its {what} must be scriptable "
                f"(see docs/callbacks.md). TorchScript said: {error_summary(e)}"
            ) from e

    def _graph(self, method: str, view: nn.Module, callbacks: Sequence[nn.Module]) -> nn.Module:
        entry = self.entries[method]
        assert entry.gm is not None
        slots: dict[str, ActivationSlot] = {}
        for node in entry.gm.graph.nodes:
            target = str(node.target)
            if node.op == "call_module" and target.startswith(SLOTS + "."):
                slot = entry.gm.get_submodule(target)
                assert isinstance(slot, ActivationSlot)
                exported = [
                    callbacks[self._index(leaf)]
                    for cb in slot.callbacks
                    if isinstance(cb, BendingCallback)
                    for leaf in _leaves(cb)
                ]
                slots[node.args[0].name] = ActivationSlot(slot.name, exported)  # type: ignore[arg-type]
        constants = {k: v.clone() for k, v in entry.result.constants.items()}
        gm = build_graph_module(entry.result, view, slots, f"Exported_{method}", constants)
        guards = strip_guards(gm.graph)
        if guards:
            gm.recompile()
            warnings.warn(
                f"{method}: {guards} decision(s) read from tensor values are not checked in "
                "the exported module; it always takes the branches taken when traced",
                stacklevel=4,
            )
        try:
            return _script(gm)
        except Exception as e:
            raise ExportError(
                f"TorchScript could not compile the bended graph of {method!r} of "
                f"{self.bended.owner}: {error_summary(e)}. Methods must take and "
                "return tensors (or tuples and lists of them)."
            ) from e

    def script(self, container: ExportedModule, getters: str = "value") -> torch.jit.ScriptModule:
        """Script ``container`` and define its methods (``getters="tuple"``: nn~'s getters)."""
        scripted = _script(container)
        scripted.define(self.source(getters))
        return scripted

    # -- TorchScript source ----------------------------------------------------------------------

    def source(self, getters: str = "value") -> str:
        """TorchScript source of the container's methods: the traced methods, the controls'
        setters and getters, and the weights' recomputation."""
        lines: list[str] = []
        for method in self.methods:
            gm = self.entries[method].gm
            assert gm is not None
            args = [str(n.target) for n in gm.graph.nodes if n.op == "placeholder"]
            if any(a.startswith("*") for a in args):
                raise ExportError(f"{method} takes *args or **kwargs, which TorchScript cannot")
            lines += [
                f"def {method}(self{''.join(', ' + a for a in args)}):",
                f"    return self.tb_method_{method}({', '.join(args)})",
            ]
        for k, w in enumerate(self.weights):
            lines += [f"def tb_rebend_{k}(self):", f"    w = self.tb_weight_base_{k}"]
            lines += [
                f"    w = self.tb_callback_{i}.bend_weight(w, {w.name!r})" for i in w.callbacks
            ]
            lines += [f"    self.tb_weight_live_{k}.copy_(w)"]
        for name, c in self.controls.items():
            lines += _control_source(name, c, getters)
        return "\n".join(lines) + "\n"


def _control_source(name: str, c: _Control, getters: str) -> list[str]:
    control = c.control
    kind = {"float": "float", "int": "int", "bool": "bool"}[control.kind]
    lines = [f"def set_{name}(self, value: {kind}) -> int:"]
    if kind == "float":
        lines += ["    if math.isnan(value):", "        return -1"]
    if control.range is not None and kind != "bool":
        low, high = control.range
        if kind == "int":
            lo, hi = repr(math.ceil(low)), repr(math.floor(high))
        else:
            lo, hi = repr(float(low)), repr(float(high))
        lines += [f"    if value < {lo} or value > {hi}:"]
        lines += [
            f"        value = min(max(value, {lo}), {hi})" if control.clamp else "        return -1"
        ]
    lines += [f"    self.tb_control_{name} = value"]
    for i, argument, source in c.writes:
        assignments = argument.assignments(f"self.tb_callback_{i}.callback", source, "value")
        lines += ["    " + line for line in assignments]
    lines += [f"    self.tb_rebend_{k}()" for k in c.weights]
    lines += ["    return 0"]
    if getters == "tuple":
        lines += [
            f"def get_{name}(self) -> Tuple[{kind}]:",
            f"    return (self.tb_control_{name},)",
        ]
    else:
        lines += [f"def get_{name}(self) -> {kind}:", f"    return self.tb_control_{name}"]
    return lines


def _script(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        # Raised for empty containers annotated in a model's __init__, which TorchScript then
        # leaves out: an error follows only if scripted code reads them.
        warnings.filterwarnings("ignore", "The TorchScript type system doesn't support")
        return torch.jit.script(module)


def _unique(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


def torchscript(
    bended: BendedModule,
    path: str | Path | None = None,
    methods: Sequence[str] | None = None,
) -> torch.jit.ScriptModule:
    """Export ``bended`` as one TorchScript module, saved to ``path`` if given.

    The module holds the bended graph of every traced method (the graph of the last traced
    inputs), each under its own name (``forward`` as ``forward``), the bending callbacks, and
    for every control of ``bended.controllables`` a ``set_<name>(value) -> int`` (``0``:
    accepted; ``-1``: refused, out of range) and ``get_<name>()``. Setting a control has the
    effect of ``bended.update``: activation callbacks read the new value at the next call, and
    weights bent with the control are bent again from cached copies of their originals.
    Loading the file needs torch only (``torch.jit.load``), not torchbend.

    Args:
        bended: the bended module; its state is copied, later changes do not reach the export.
        path: where to save the module (``torch.jit.save``), or ``None``.
        methods: the methods to export (default: every traced method).

    Raises:
        ExportError: a method is not traced, a callback cannot be scripted (``Lambda``,
            ``Capture``...), or a control drives a callback whose state it derives again.

    Example:
        >>> import torch, torchbend as tb
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3)))
        >>> _ = bended.trace(input=torch.randn(1, 1, 16))
        >>> gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))
        >>> _ = bended.bend(tb.Scale(gain), "_0$")
        >>> scripted = torchscript(bended)
        >>> scripted.set_gain(1.5), scripted.set_gain(3.0), scripted.get_gain()
        (0, -1, 1.5)

    Notes:
        Ramps are not exported: ``set_<name>`` applies at once. Decisions read from tensor
        values are not checked: the branches taken when tracing are kept.
    """
    plan = ExportPlan(bended, methods)
    if path is not None:
        plan.check_savable()
    scripted = plan.script(plan.build())
    if path is not None:
        save(scripted, path)
    return scripted


def save(scripted: torch.jit.ScriptModule, path: str | Path) -> None:
    """``torch.jit.save``, then load the file back: TorchScript may write code that it then
    refuses to load, and that must fail here rather than where the file is used."""
    torch.jit.save(scripted, str(path))
    try:
        torch.jit.load(str(path))
    except Exception as e:
        Path(path).unlink(missing_ok=True)
        raise ExportError(
            f"{path} was written but does not load back with torch.jit.load (deleted): "
            f"{error_summary(e)}"
        ) from e
